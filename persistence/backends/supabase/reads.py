"""The Supabase backend's reads: pages (and related rows), counts, the columns, the exact
re-check of a literal ``*``, and the paging of every fetch."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from persistence.backends.supabase.postgrest.client import Exchange, PostgrestClient, json_rows
from persistence.backends.supabase.postgrest.embed import embedded, embedding
from persistence.backends.supabase.postgrest.encoding import (
    RESERVED_PARAMETERS,
    CountMode,
    filter_params,
    needs_client_check,
    order_param,
    select_param,
)
from persistence.backends.supabase.postgrest.paging import Window, total_steps, window_steps
from persistence.backends.supabase.postgrest.schema import ApiDescription
from persistence.backends.supabase.postgrest.search import RowVectors
from persistence.errors import ColumnNotAllowedError, PersistenceError, UnsupportedOperatorError
from persistence.query import Filter, Page, Query
from persistence.relations import RelatedPlan, Relation, attach
from persistence.steps import Steps
from persistence.values.like import text_predicate
from persistence.values.types import ColumnType

Row = dict[str, Any]
Params = list[tuple[str, str]]


class _SupabaseReads:
    """The reads of :class:`~persistence.backends.supabase.SupabaseBackend`, which sets the
    state below in its ``__init__``."""

    name: str
    _client: PostgrestClient
    _count_mode: CountMode
    _page_size: int
    _max_read_rows: int
    _declared: tuple[Relation, ...] | None
    _columns: dict[str, frozenset[str]]
    _description: ApiDescription
    _row_vectors: RowVectors

    # --- reads -----------------------------------------------------------------------------

    def read(self, query: Query) -> Page:
        return self._client.drive(self._read_steps(query))

    async def aread(self, query: Query) -> Page:
        """:meth:`read` over ``httpx.AsyncClient``: the same requests and parsing."""
        return await self._client.adrive(self._read_steps(query))

    async def aread_related(self, query: Query, plans: Sequence[RelatedPlan]) -> Page:
        """:meth:`read_related` over ``httpx.AsyncClient``."""
        return await self._client.adrive(self._related_steps(query, plans))

    async def acount(self, table: str, filters: Sequence[Filter]) -> int:
        """:meth:`count` over ``httpx.AsyncClient``."""
        return await self._client.adrive(self._count_steps(table, filters))

    def _read_steps(self, query: Query) -> Steps[Exchange, Page]:
        checks = [f for f in query.filters if needs_client_check(f)]
        base = self._filter_params(query.table, query.filters, "read")
        if checks:
            return (yield from self._read_checked(query, base, checks))
        params = [
            ("select", select_param(query.columns)),
            *base,
            ("order", order_param(query.order)),
        ]
        rows, total = yield from self._page_steps(query, params, base)
        return Page(rows=rows, total_count=total)

    def relations(self) -> tuple[Relation, ...]:
        """The declared relations (``relations=``), else the foreign keys the API's OpenAPI
        description notes."""
        if self._declared is not None:
            return self._declared
        return self._description.relations()

    def read_related(self, query: Query, plans: Sequence[RelatedPlan]) -> Page:
        """One page of ``query`` with each row's related rows, by resource embedding (see
        :mod:`persistence.backends.supabase.postgrest.embed`): the same requests as the page
        alone."""
        return self._client.drive(self._related_steps(query, plans))

    def _related_steps(self, query: Query, plans: Sequence[RelatedPlan]) -> Steps[Exchange, Page]:
        if any(needs_client_check(f) for f in query.filters):
            raise UnsupportedOperatorError(
                "a literal '*' in a text filter cannot be combined with included rows over the "
                "Supabase API (PostgREST reads every '*' as a wildcard)",
                operator="include",
                backend=self.name,
            )
        base = self._filter_params(query.table, query.filters, "read")
        terms, embedded_params = embedding(plans, self.relations())
        select = f"{select_param(query.columns)},{terms}"
        params = [("select", select), *base, *embedded_params, ("order", order_param(query.order))]
        rows, total = yield from self._page_steps(query, params, base)
        capped = attach(rows, plans, embedded)
        return Page(rows=rows, total_count=total, related_capped=capped)

    def count(self, table: str, filters: Sequence[Filter]) -> int:
        return self._client.drive(self._count_steps(table, filters))

    def _count_steps(self, table: str, filters: Sequence[Filter]) -> Steps[Exchange, int]:
        checks = [f for f in filters if needs_client_check(f)]
        base = self._filter_params(table, filters, "count")
        if checks:
            return len((yield from self._checked_rows(table, base, checks, "count", ("id",))))
        return (yield from self._total(table, base, "count"))

    def columns(self, table: str) -> frozenset[str] | None:
        """The columns of ``table``'s first readable row, cached; ``None`` when none can be read.

        PostgREST offers the anon role no cheap column listing, so the keys of one ``select=*``
        row stand in. An empty table, row-level security hiding every row, column-level grants
        (``select=*`` is then refused) or any failure give ``None``: the server then reports an
        unknown column itself, mapped to ``ColumnNotAllowedError``. Only a found set is cached,
        for the backend's lifetime.
        """
        cached = self._columns.get(table)
        if cached is not None:
            return cached
        try:
            response = self._client.request(
                "GET", table, "columns", [("select", "*"), ("limit", "1")]
            )
            rows = json_rows(response, table, "columns")
        except PersistenceError:
            return None
        if not rows:
            return None
        found = self._columns[table] = frozenset(rows[0])
        return found

    def column_types(self, table: str) -> Mapping[str, ColumnType] | None:
        """``table``'s column types from the API's OpenAPI description (``GET`` on the REST
        root, once per backend), or ``None`` when the server does not describe it."""
        return self._description.column_types(table)

    def _read_checked(
        self, query: Query, base: Params, checks: list[Filter]
    ) -> Steps[Exchange, Page]:
        kept = yield from self._checked_rows(
            query.table, base, checks, "read", query.columns, query
        )
        end = None if query.limit is None else query.offset + query.limit
        window = kept[query.offset : end]
        if query.columns is not None:
            window = [{c: row.get(c) for c in query.columns} for row in window]
        return Page(rows=window, total_count=len(kept))

    def _checked_rows(
        self,
        table: str,
        base: Params,
        checks: list[Filter],
        operation: str,
        columns: Sequence[str] | None,
        query: Query | None = None,
    ) -> Steps[Exchange, list[Row]]:
        """Every row the (wider) server filter returns that passes the exact client checks.

        ``columns`` (all when ``None``) are fetched along with the checked columns.
        """
        predicates = [text_predicate(f) for f in checks]
        select = select_param(columns, (f.column for f in checks))
        order = order_param(() if query is None else query.order)
        params = [("select", select), *base, ("order", order)]
        probe = query if query is not None else Query(table)
        rows, _, _ = yield from self._fetch(probe, params, 0, None, operation)
        return [row for row in rows if all(p(row) for p in predicates)]

    def _page_steps(
        self, query: Query, params: Params, base: Params
    ) -> Steps[Exchange, tuple[list[Row], int]]:
        """The page ``params`` ask for and the number of rows matching ``base``."""
        rows, total, ended = yield from self._fetch(
            query, params, query.offset, query.limit, "read"
        )
        if total is None:
            # No count in Content-Range (``*``): what was read is the total when the rows ran
            # out on this page; otherwise ask for the count on its own.
            known = ended and (rows or not query.offset)
            total = (
                query.offset + len(rows)
                if known
                else (yield from self._total(query.table, base, "read"))
            )
        return rows, total

    def _fetch(
        self, query: Query, params: Params, offset: int, limit: int | None, operation: str
    ) -> Steps[Exchange, Window]:
        return window_steps(
            self._client,
            query.table,
            operation,
            params,
            offset=offset,
            limit=limit,
            page_size=self._page_size,
            max_rows=self._max_read_rows,
            count_mode=self._count_mode,
            columns=query.referenced_columns(),
        )

    def _total(self, table: str, base: Params, operation: str) -> Steps[Exchange, int]:
        return total_steps(self._client, table, operation, base, self._count_mode)

    def _filter_params(self, table: str, filters: Sequence[Filter], operation: str) -> Params:
        for flt in filters:
            if flt.column in RESERVED_PARAMETERS:
                raise ColumnNotAllowedError(
                    f"column {flt.column!r} of {table!r} cannot be filtered over the Supabase "
                    "API: PostgREST reads that query parameter as part of its own grammar",
                    table=table,
                    column=flt.column,
                    operation=operation,
                )
        return [filter_params(f) for f in filters]
