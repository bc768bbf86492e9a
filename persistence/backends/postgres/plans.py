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

    __slots__ = (
        "_async", "_connections", "columns", "entry", "fallback", "probe", "statement", "unique"
    )  # fmt: skip

    def __init__(
        self,
        connections: tuple[Connections, AsyncConnections],
        statement: bytes,
        columns: tuple[str, ...],
        entry: Table,
        probe: bool,
        unique: bool = False,
        fallback: ShapeReader | None = None,
    ) -> None:
        self._connections, self._async = connections
        self.statement = statement
        self.columns = columns
        self.entry = entry
        self.probe = probe
        #: The statement is :func:`_pg_sql.build_lookup`'s: at most one row, no total column.
        self.unique = unique
        #: A unique lookup's page-and-total reader, for when its key no longer is unique (the
        #: index was dropped since the catalog was read): then more rows than the page's end
        #: come back, and the lookup, bounded there, cannot tell how many match.
        self.fallback = fallback

    def params(self, filters: Sequence[Filter], query: Query) -> list[Any]:
        """The statement's values for ``query``, with its ``filters`` as coerced."""
        if self.unique:
            bound = None if query.limit is None else query.offset + query.limit + 1
            return [*_pg_sql.filter_params(filters), bound]
        return _pg_sql.read_params(query, filters, probe=self.probe)

    def parse(self, rows: list[Any], query: Query) -> Page | None:
        """Rows ``(total, hit, *columns)`` of ``query`` as a page: no row but the total when none
        matched. A bounded total is exact below its bound (see :func:`_pg_sql.build_read`).
        A unique lookup's rows are the columns alone: every match (at most one), counted; or,
        past the page's end (the key is no longer unique), ``None``: read it by
        :attr:`fallback`."""
        columns = self.columns
        if self.unique:
            offset, limit = query.offset, query.limit
            end = None if limit is None else offset + limit
            if end is not None and len(rows) > end:
                return None
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
        """``query``, of this shape, its values coerced already: one round trip (two when a
        unique key turned out not to be)."""
        params = self.params(query.filters, query)
        page = self.parse(self._connections.select(self.statement, params, "read"), query)
        if page is None and self.fallback is not None:
            return self.fallback.read(query)
        assert page is not None
        return page

    async def aread(self, query: Query) -> Page:
        """:meth:`read` over the awaitable pool."""
        params = self.params(query.filters, query)
        page = self.parse(await self._async.select(self.statement, params, "read"), query)
        if page is None and self.fallback is not None:
            return await self.fallback.aread(query)
        assert page is not None
        return page


class Plan(NamedTuple):
    """One read as the backend plans it: the statement, its parameters, the operation's name
    and how its rows become the answer; :meth:`PostgresBackend._select` runs it blocking,
    :meth:`PostgresBackend._aselect` awaited."""

    statement: bytes
    params: list[Any]
    operation: str
    parse: Callable[[list[Any]], Any]
