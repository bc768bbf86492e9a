"""Allow-list bypass attempts are refused before any backend call; column rules hide what they
forbid, and no holder of a facade can widen its policy or turn its read-only flag off."""

from __future__ import annotations

import pytest

from persistence import (
    AccessPolicy,
    ColumnNotAllowedError,
    ConfigurationError,
    Filter,
    InvalidQueryError,
    MemoryStore,
    Op,
    PersistenceAgent,
    PersistencePermissionError,
    ReadOnlyPersistenceFacade,
    TableNotAllowedError,
    create_persistence_agent,
    create_read_only_facade,
)
from tests.support.memory import SpyBackend, one_lead_store

BYPASS_TABLES = [
    "LEADS", "Leads", " leads", "leads ", "\tleads", "public.leads", '"leads"', "`leads`",
    "[leads]", "leads;drop table leads", "leads--", "leads/**/", "lеads", "ⅼeads", "leads\x00",
    "le\x00ads", "", "leads\n", "pg_catalog.pg_tables", "information_schema.tables", "secrets",
    "users", "auth.users", "*", "leads,clients", "leads)", "ｌｅａｄｓ",
]  # fmt: skip
BYPASS_COLUMNS = [
    "Email", "email;", '"email"', "e mail", "email--", "е mail", "id)", "*", "", "email\x00",
    "leads.email", "count(*)",
]  # fmt: skip


@pytest.fixture
def spy() -> SpyBackend:
    return SpyBackend()


@pytest.fixture
def facade(spy: SpyBackend) -> ReadOnlyPersistenceFacade:
    return ReadOnlyPersistenceFacade(spy, AccessPolicy.read_only())


class TestTableBypass:
    @pytest.mark.parametrize("table", BYPASS_TABLES)
    def test_read_refused_before_backend(
        self, facade: ReadOnlyPersistenceFacade, spy: SpyBackend, table: str
    ) -> None:
        """A table name that is not exactly allow-listed never reaches the backend."""
        with pytest.raises(TableNotAllowedError):
            facade.read(table)
        with pytest.raises(TableNotAllowedError):
            facade.count(table)
        assert spy.calls == []

    @pytest.mark.parametrize("table", [123, None, b"leads", ["leads"]])
    def test_non_string_tables_refused(
        self, facade: ReadOnlyPersistenceFacade, table: object
    ) -> None:
        """Only str names are considered."""
        with pytest.raises(TableNotAllowedError):
            facade.read(table)  # type: ignore[arg-type]


class TestColumnBypass:
    @pytest.mark.parametrize("column", BYPASS_COLUMNS)
    def test_malformed_columns_refused_before_backend(
        self, facade: ReadOnlyPersistenceFacade, spy: SpyBackend, column: str
    ) -> None:
        """Projection and order columns must be plain identifiers."""
        with pytest.raises((ColumnNotAllowedError, InvalidQueryError)):
            facade.read("leads", columns=[column])
        with pytest.raises((ColumnNotAllowedError, InvalidQueryError)):
            facade.read("leads", order=[column])
        assert spy.calls == []


class TestNoWrites:
    @pytest.mark.parametrize(
        "method", ["write", "insert", "upsert", "update", "delete", "batch", "rpc", "execute"]
    )
    def test_write_shaped_methods_never_reach_backend(
        self, facade: ReadOnlyPersistenceFacade, spy: SpyBackend, method: str
    ) -> None:
        """Write-shaped calls raise with table and operation, and touch nothing."""
        with pytest.raises(PersistencePermissionError) as info:
            getattr(facade, method)("leads", [{"email": "x"}])
        assert info.value.operation == method
        with pytest.raises(PersistencePermissionError):
            getattr(facade, method)()
        assert spy.calls == []

    def test_agent_refuses_tables_outside_write_list(self, spy: SpyBackend) -> None:
        """PersistenceAgent honours its own write allow-list."""
        agent = PersistenceAgent(spy, AccessPolicy.writer())
        for table in ("clients", "campaigns", "LEADS", "users"):
            with pytest.raises(TableNotAllowedError):
                agent.write(table, {"name": "x"})
        with pytest.raises(ColumnNotAllowedError):
            agent.write("leads", {"Email": "x"})
        assert spy.calls == []
        agent.write("leads", {"email": "ok@x.io"})
        assert spy.calls == ["insert"]

    def test_filter_values_never_identifiers(self, facade: ReadOnlyPersistenceFacade) -> None:
        """Hostile filter values are matched literally."""
        page = facade.read("leads", [Filter("email", Op.EQ, "' OR 1=1 --")])
        assert page.total_count == 0

    @pytest.mark.parametrize("value", [False, True])
    def test_read_only_cannot_be_passed_as_a_backend_option(self, value: bool) -> None:
        """The factories own the read_only flag: passing it is a ConfigurationError."""
        with pytest.raises(ConfigurationError, match="read_only"):
            create_read_only_facade(kind="memory", store=MemoryStore(), read_only=value)
        with pytest.raises(ConfigurationError, match="read_only"):
            create_persistence_agent(kind="memory", store=MemoryStore(), read_only=value)


@pytest.fixture
def store() -> MemoryStore:
    return one_lead_store()


@pytest.fixture
def restricted(store: MemoryStore) -> ReadOnlyPersistenceFacade:
    return create_read_only_facade(kind="memory", store=store, columns={"leads": ["id", "email"]})


class TestColumnPolicyOnReads:
    def test_read_without_columns_returns_only_allowed_columns(
        self, restricted: ReadOnlyPersistenceFacade
    ) -> None:
        """A read that names no columns projects the policy's columns, never every column."""
        page = restricted.read("leads")
        assert page.rows == [{"email": "a@x.io", "id": 1}]

    def test_read_with_filter_still_hides_other_columns(
        self, restricted: ReadOnlyPersistenceFacade
    ) -> None:
        """A filtered read without a projection leaks no column outside the policy either."""
        page = restricted.read("leads", [Filter("email", Op.EQ, "a@x.io")], limit=5)
        assert all(set(row) <= {"id", "email"} for row in page.rows)
        assert page.total_count == 1

    def test_tables_without_a_column_rule_return_every_column(self, store: MemoryStore) -> None:
        """A table the column policy does not name keeps every column."""
        facade = create_read_only_facade(kind="memory", store=store, columns={"clients": ["id"]})
        assert "phone" in facade.read("leads").rows[0]

    def test_policy_allowing_no_existing_column_is_refused(self, store: MemoryStore) -> None:
        """A column rule that matches no column of the table refuses the read."""
        facade = create_read_only_facade(kind="memory", store=store, columns={"leads": []})
        with pytest.raises(ColumnNotAllowedError):
            facade.read("leads")


class TestPolicyImmutability:
    def test_column_rules_cannot_be_widened_through_the_facade(
        self, restricted: ReadOnlyPersistenceFacade
    ) -> None:
        """The policy a facade exposes is immutable: its column rules cannot be replaced."""
        assert restricted.policy.columns is not None
        with pytest.raises(TypeError):
            restricted.policy.columns["leads"] = frozenset({"phone"})  # type: ignore[index]
        with pytest.raises(ColumnNotAllowedError):
            restricted.read("leads", columns=["phone"])

    def test_a_string_is_not_an_allow_list(self) -> None:
        """A bare string for an allow-list is refused instead of becoming its letters."""
        with pytest.raises(ConfigurationError):
            AccessPolicy(read_tables="leads")  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError):
            create_read_only_facade(kind="memory", store=MemoryStore(), tables="leads")
        with pytest.raises(ConfigurationError):
            AccessPolicy.read_only(["leads"], columns={"leads": "email"})
