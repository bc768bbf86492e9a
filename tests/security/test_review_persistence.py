"""Findings of the persistence review: column-policy bypasses and policy mutation."""

from __future__ import annotations

import pytest

from persistence import (
    AccessPolicy,
    ColumnNotAllowedError,
    ConfigurationError,
    Filter,
    MemoryBackend,
    MemoryStore,
    Op,
    ReadOnlyPersistenceFacade,
    create_persistence_agent,
    create_read_only_facade,
)


@pytest.fixture
def store() -> MemoryStore:
    store = MemoryStore()
    agent = create_persistence_agent(kind="memory", store=store)
    agent.write("leads", {"email": "a@x.io", "phone": "555-0100", "company_name": "Acme"})
    return store


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


class _ColumnsSpy(MemoryBackend):
    """A memory backend that records each ``columns`` call (Supabase sends a request for one)."""

    def __init__(self, store: MemoryStore) -> None:
        super().__init__(store)
        self.column_calls: list[str] = []

    def columns(self, table: str) -> frozenset[str] | None:
        self.column_calls.append(table)
        return super().columns(table)


class TestColumnLookups:
    def test_read_under_a_column_policy_asks_for_columns_once(self, store: MemoryStore) -> None:
        """One read under a column rule asks the backend for the table's columns once."""
        spy = _ColumnsSpy(store)
        policy = AccessPolicy.read_only(columns={"leads": ["id", "email"]})
        facade = ReadOnlyPersistenceFacade(spy, policy)
        page = facade.read("leads", [Filter("email", Op.EQ, "a@x.io")], order=["email"])
        assert page.rows == [{"email": "a@x.io", "id": 1}]
        assert spy.column_calls == ["leads"]

    def test_column_outside_the_policy_is_refused_before_the_backend_is_asked(
        self, store: MemoryStore
    ) -> None:
        """A read naming a column the policy forbids is refused without asking the backend."""
        spy = _ColumnsSpy(store)
        policy = AccessPolicy.read_only(columns={"leads": ["id", "email"]})
        facade = ReadOnlyPersistenceFacade(spy, policy)
        with pytest.raises(ColumnNotAllowedError) as info:
            facade.read("leads", [Filter("phone", Op.EQ, "555-0100")])
        assert info.value.column == "phone"
        assert spy.column_calls == []

    def test_count_asks_for_columns_once(self, store: MemoryStore) -> None:
        """A count under a column rule asks the backend for the table's columns once too."""
        spy = _ColumnsSpy(store)
        policy = AccessPolicy.read_only(columns={"leads": ["id", "email"]})
        facade = ReadOnlyPersistenceFacade(spy, policy)
        assert facade.count("leads", [Filter("email", Op.EQ, "a@x.io")]) == 1
        assert spy.column_calls == ["leads"]


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


class TestFactoryReadOnlyFlag:
    @pytest.mark.parametrize("value", [False, True])
    def test_read_only_cannot_be_passed_as_a_backend_option(self, value: bool) -> None:
        """The factories own the read_only flag: passing it is a ConfigurationError."""
        with pytest.raises(ConfigurationError, match="read_only"):
            create_read_only_facade(kind="memory", store=MemoryStore(), read_only=value)
        with pytest.raises(ConfigurationError, match="read_only"):
            create_persistence_agent(kind="memory", store=MemoryStore(), read_only=value)
