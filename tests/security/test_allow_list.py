"""Allow-list bypass attempts are refused before any backend call."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from persistence import (
    AccessPolicy,
    Capabilities,
    ColumnNotAllowedError,
    Filter,
    InvalidQueryError,
    MemoryBackend,
    MemoryStore,
    Op,
    Page,
    PersistenceAgent,
    PersistencePermissionError,
    Query,
    ReadOnlyPersistenceFacade,
    TableNotAllowedError,
)

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


class SpyBackend(MemoryBackend):
    """Counts every call that reaches the backend."""

    def __init__(self) -> None:
        super().__init__(MemoryStore())
        self.calls: list[str] = []

    def read(self, query: Query) -> Page:
        self.calls.append("read")
        return super().read(query)

    def count(self, table: str, filters: Sequence[Filter]) -> int:
        self.calls.append("count")
        return super().count(table, filters)

    def insert(self, table: str, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        self.calls.append("insert")
        return super().insert(table, rows)

    def delete(self, table: str, filters: Sequence[Filter]) -> int:
        self.calls.append("delete")
        return super().delete(table, filters)

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities()


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
