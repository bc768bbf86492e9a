"""The PostgreSQL backend's session: start-up over either pool (catalog, role check), closing,
and the cached catalog every statement is checked against."""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import psycopg

from persistence.backends.postgres.async_reads import AsyncConnections
from persistence.backends.postgres.catalog import Catalog, Table, check_role_steps, fetch_all
from persistence.backends.postgres.pool import Connections
from persistence.backends.postgres.search import PostgresSearch
from persistence.closing import Closing
from persistence.errors import BackendError
from persistence.query import Filter
from persistence.steps import Steps, drive
from persistence.values.types import ColumnType, coerce_filters


class _PostgresSession(Closing):
    """Start-up, closing and the catalog of :class:`~persistence.backends.postgres.PostgresBackend`,
    which sets the state below in its ``__init__``."""

    _read_only: bool
    _schema: str
    _allow_privileged: bool
    _catalog: Catalog
    _statements: dict[tuple[Any, ...], Any]
    _connections: Connections
    _started: bool
    _async: AsyncConnections
    _search: PostgresSearch

    def _start_up(self, conn: psycopg.Connection[Any]) -> None:
        drive(self._start_up_steps(), functools.partial(fetch_all, conn))

    def _start_up_steps(self) -> Steps[Any, None]:
        """On the first connection, blocking or awaited: load the catalog, then check the role
        of a read-only one."""
        yield from self._catalog.load_steps()
        self._statements = {}
        if self._read_only:
            yield from check_role_steps(self._catalog.writable, self._allow_privileged)
        self._started = True

    def _start(self) -> None:
        # Started by either pool: the awaitable one must not open the blocking one on the loop.
        if not self._started:
            self._connections.pool()

    async def aprepare(self) -> None:
        """Start up (catalog, role check) over the awaitable pool, without blocking the loop."""
        await self._async.pool()

    def close(self) -> None:
        """Close the pool; the backend may not be used afterwards."""
        self._connections.close()

    async def aclose(self) -> None:
        """Close the awaitable pool of the running loop (and mark the backend closed)."""
        await self._async.close()

    # --- catalog -------------------------------------------------------------------------------

    def _load_catalog(self, conn: psycopg.Connection[Any]) -> None:
        self._catalog.load(conn)
        self._statements = {}  # they name columns that may have changed

    def refresh_catalog(self) -> None:
        """Reload table and column names from the database (after a migration)."""
        self._connections.run(self._load_catalog, "catalog", read=True)

    def _table(self, table: str) -> Table:
        self._start()  # start-up loads the catalog
        entry = self._catalog.get(table)
        if entry is None and self._catalog.may_reload():
            self.refresh_catalog()  # a table created since start-up
            entry = self._catalog.get(table)
        if entry is None:
            raise BackendError(
                f"postgres: table {self._schema}.{table} does not exist or is not readable",
                backend="postgres",
                operation="read",
            )
        return entry

    def columns(self, table: str) -> frozenset[str] | None:
        return self._table(table).column_set

    def column_types(self, table: str) -> Mapping[str, ColumnType] | None:
        """The table's columns and their types from the cached catalog, in table order."""
        return self._table(table).types

    def _checked_filters(
        self,
        table: str,
        filters: Sequence[Filter],
        operation: str,
        referenced: Collection[str] | None = None,
    ) -> tuple[Table, tuple[Filter, ...]]:
        """``table``'s catalog entry and ``filters`` with values coerced to their columns' types.

        Every ``referenced`` column (the filters' when ``None``) must exist. The facade has
        coerced the values already, by the same rule (the filters then come back as they were).
        """
        names = [f.column for f in filters] if referenced is None else referenced
        entry = self._table(table).require(table, names, operation)
        return entry, coerce_filters(table, filters, entry.types)
