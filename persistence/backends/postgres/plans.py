"""How the PostgreSQL backend plans a read: the statement of one read shape, built and checked
once (:class:`ShapeReader`), and one call's statement, parameters and parsing (:class:`Plan`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from persistence.backends.postgres import sql as _pg_sql
from persistence.backends.postgres.async_reads import AsyncConnections
from persistence.backends.postgres.catalog import Table
from persistence.backends.postgres.pool import Connections
from persistence.query import Filter, Page, Query

__all__ = ["Plan", "ShapeReader"]


class ShapeReader:
    """One read shape's statement on one backend: built and checked once, run for each query
    of that shape whose values the caller coerced against :attr:`entry` (the facade's read
    plans do; :meth:`PostgresBackend.read` coerces first). Immutable; thread-safe."""

    __slots__ = ("_async", "_connections", "columns", "entry", "probe", "statement", "unique")

    def __init__(
        self,
        connections: tuple[Connections, AsyncConnections],
        statement: bytes,
        columns: tuple[str, ...],
        entry: Table,
        probe: bool,
        unique: bool = False,
    ) -> None:
        self._connections, self._async = connections
        self.statement = statement
        self.columns = columns
        self.entry = entry
        self.probe = probe
        #: The statement is :func:`_pg_sql.build_lookup`'s: at most one row, no total column.
        self.unique = unique

    def params(self, filters: Sequence[Filter], query: Query) -> list[Any]:
        """The statement's values for ``query``, with its ``filters`` as coerced."""
        if self.unique:
            return _pg_sql.filter_params(filters)
        return _pg_sql.read_params(query, filters, probe=self.probe)

    def parse(self, rows: list[Any], query: Query) -> Page:
        """Rows ``(total, hit, *columns)`` of ``query`` as a page: no row but the total when none
        matched. A bounded total is exact below its bound (see :func:`_pg_sql.build_read`).
        A unique lookup's rows are the columns alone: every match (at most one), counted."""
        columns = self.columns
        if self.unique:
            offset, limit = query.offset, query.limit
            end = None if limit is None else offset + limit
            return Page(
                rows=[dict(zip(columns, row, strict=True)) for row in rows[offset:end]],
                total_count=len(rows),
            )
        total = int(rows[0][0]) if rows else 0
        bound = query.count_bound
        return Page(
            rows=[dict(zip(columns, row[2:], strict=True)) for row in rows if row[1] is not None],
            total_count=total,
            total_exact=bound is None or total < bound,
        )

    def read(self, query: Query) -> Page:
        """``query``, of this shape, its values coerced already: one round trip."""
        params = self.params(query.filters, query)
        return self.parse(self._connections.select(self.statement, params, "read"), query)

    async def aread(self, query: Query) -> Page:
        """:meth:`read` over the awaitable pool."""
        params = self.params(query.filters, query)
        return self.parse(await self._async.select(self.statement, params, "read"), query)


class Plan(NamedTuple):
    """One read as the backend plans it: the statement, its parameters, the operation's name
    and how its rows become the answer; :meth:`PostgresBackend._select` runs it blocking,
    :meth:`PostgresBackend._aselect` awaited."""

    statement: bytes
    params: list[Any]
    operation: str
    parse: Callable[[list[Any]], Any]
