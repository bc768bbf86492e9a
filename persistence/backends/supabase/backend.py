"""``SupabaseBackend`` in one class: PostgREST over HTTP through the ``supabase`` client's session;
its reads (paged past the server's row cap, a literal ``*`` re-checked here), search, aggregates
and the writes of a ``PersistenceAgent``. The wire protocol, counts, retries and the key check are
told in the package's docstring, :mod:`persistence.backends.supabase`.

This module is the backend, one class: its reads, search, aggregates and writes; PostgREST's
grammar, client, paging, embedding, search and aggregates are in
:mod:`~persistence.backends.supabase.postgrest`, API keys in
:mod:`~persistence.backends.supabase.keys`.

Thread-safety: a backend is safe to share between threads (the httpx client is, over HTTP/1.1;
the only other state is a per-table cache of column names, filled once).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import urllib.parse
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

import httpx
from supabase import ClientOptions, SupabaseException, create_client

from persistence.aggregate import AggregateResult, Metric
from persistence.backends.supabase.keys import ALLOWED_KEY_ROLES, _lacks_role_claim, key_role
from persistence.backends.supabase.postgrest.aggregate import (
    AGGREGATE_FUNCTIONS,
    aggregate_steps,
    typed_rows,
)
from persistence.backends.supabase.postgrest.client import (
    Exchange,
    PostgrestClient,
    default_http_client,
    json_body,
    json_rows,
)
from persistence.backends.supabase.postgrest.distinct import (
    count_distinct_groups,
    with_distinct_counts,
)
from persistence.backends.supabase.postgrest.embed import embedded, embedding
from persistence.backends.supabase.postgrest.encoding import (
    COUNT_MODES,
    RESERVED_PARAMETERS,
    CountMode,
    filter_params,
    needs_client_check,
    order_param,
    select_param,
)
from persistence.backends.supabase.postgrest.enum_groups import all_enum_groups, ordered_and_capped
from persistence.backends.supabase.postgrest.paging import (
    MAX_READ_ROWS,
    Window,
    total_steps,
    window_steps,
)
from persistence.backends.supabase.postgrest.schema import ApiDescription
from persistence.backends.supabase.postgrest.search import (
    EmbedQuery,
    EmbedRows,
    RowVectors,
    SearchStep,
    search_steps,
)
from persistence.capabilities import Capabilities
from persistence.closing import Closing
from persistence.errors import (
    ColumnNotAllowedError,
    ConfigurationError,
    PersistenceError,
    UnsupportedOperatorError,
)
from persistence.logs import get_logger
from persistence.query import Filter, Op, Page, Query
from persistence.read_only import refuse_write
from persistence.relations import RelatedPlan, Relation, attach, check_relations
from persistence.search import SearchRequest, SearchResult
from persistence.search.embedder import Embedder
from persistence.steps import Steps, adrive, drive
from persistence.values.aggregate_rows import aggregate_rows
from persistence.values.like import text_predicate
from persistence.values.types import ColumnType

__all__ = ["DEFAULT_PAGE_SIZE", "DEFAULT_TIMEOUT", "SupabaseBackend"]

log = get_logger("persistence.supabase")

Row = dict[str, Any]
Params = list[tuple[str, str]]

#: Rows asked for per request: Supabase's default ``db-max-rows``.
DEFAULT_PAGE_SIZE = 1000
#: Seconds for the whole request (connect: at most 5).
DEFAULT_TIMEOUT = 10.0
_DEFAULT_RETRIES = 2
# Ids per DELETE when rows were selected on the client; keeps URLs well under gateway limits.
_DELETE_CHUNK = 200


class SupabaseBackend(Closing):
    """Serves queries from a Supabase project (or any PostgREST) over its REST API.

    Build it with :func:`persistence.create_read_only_facade` ``(kind="supabase", ...)`` rather
    than directly; see ``docs/backends/supabase.md`` for the options.
    """

    name = "supabase"
    #: Every operator; any page size (capped answers are refilled here, where Content-Range is);
    #: PostgREST's aggregate functions, and count_distinct from its grouping (bounded, see
    #: ``postgrest.distinct``).
    capabilities = Capabilities(aggregates=AGGREGATE_FUNCTIONS | {"count_distinct"})

    def __init__(
        self,
        *,
        url: str,
        key: str,
        http_client: httpx.Client | None = None,
        async_http_client: httpx.AsyncClient | None = None,
        read_only: bool = True,
        allow_privileged: bool = False,
        allowed_roles: Collection[str] = ALLOWED_KEY_ROLES,
        count: CountMode = "exact",
        page_size: int = DEFAULT_PAGE_SIZE,
        max_read_rows: int = MAX_READ_ROWS,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = _DEFAULT_RETRIES,
        schema: str = "public",
        sleep: Callable[[float], None] = time.sleep,
        relations: Iterable[Relation] | None = None,
    ) -> None:
        _check_options(count, page_size, timeout, retries, http_client)
        if async_http_client is not None and not isinstance(async_http_client, httpx.AsyncClient):
            raise ConfigurationError(
                "async_http_client= must be an httpx.AsyncClient, "
                f"not {type(async_http_client).__name__}"
            )
        if type(max_read_rows) is not int or max_read_rows < 1:
            raise ConfigurationError(
                f"max_read_rows= must be a positive integer, not {max_read_rows!r}"
            )
        self._max_read_rows = max_read_rows
        if isinstance(allowed_roles, str):
            raise ConfigurationError(
                f"allowed_roles= must be a collection of role names, not {allowed_roles!r}"
            )
        self._declared = None if relations is None else check_relations(relations)
        role = key_role(key)
        if read_only and not allow_privileged and _lacks_role_claim(key):
            raise ConfigurationError(
                "SUPABASE_KEY (or key=) is a JWT without a 'role' claim, so the role it reads "
                "as (and whether row-level security applies) depends on the server; the "
                "read-only facade accepts only keys naming one of "
                f"{', '.join(sorted(allowed_roles))}. Use the project's anon key, or pass "
                "allow_privileged=True to accept the risk",
                variable="SUPABASE_KEY",
            )
        privileged = role is not None and role not in frozenset(allowed_roles)
        if read_only and (privileged or _lacks_role_claim(key)):
            if not allow_privileged:
                raise ConfigurationError(
                    f"SUPABASE_KEY (or key=) is a {role!r} key, which may bypass row-level "
                    "security; the read-only facade accepts only "
                    f"{', '.join(sorted(allowed_roles))} keys. Use the anon key with SELECT-only "
                    "policies, or pass allow_privileged=True to accept the risk",
                    variable="SUPABASE_KEY",
                )
            log.warning(
                "supabase.privileged_key",
                role=role,
                hint="read-only facade with allow_privileged=True: row-level security is bypassed",
            )
        self._read_only = read_only
        http = http_client if http_client is not None else default_http_client(timeout)
        try:
            rest = create_client(
                url,
                key,
                ClientOptions(
                    schema=schema,
                    httpx_client=http,
                    postgrest_client_retry=False,  # ours is bounded and injectable
                    auto_refresh_token=False,
                    persist_session=False,
                ),
            ).postgrest
        except SupabaseException as exc:
            if http_client is None:
                http.close()
            raise ConfigurationError(
                f"invalid Supabase settings (SUPABASE_URL / url=, SUPABASE_KEY / key=): "
                f"{exc.message}",
                variable="SUPABASE_URL",
            ) from exc
        self._client = PostgrestClient(
            http,
            str(rest.base_url),
            rest.headers,
            owns_http=http_client is None,
            retries=retries,
            sleep=sleep,
            async_http=async_http_client,
            timeout=timeout,
        )
        self._count_mode: CountMode = count
        self._page_size = page_size
        #: Which tables these are, for write versions: the project's URL and the schema.
        self.data_target = ("supabase", url.rstrip("/"), schema)
        #: The project's host name alone, for envelopes (a URL could carry credentials).
        self.database = urllib.parse.urlsplit(url).hostname or None
        # Written once per table and only read afterwards; a race costs one duplicate request.
        self._columns: dict[str, frozenset[str]] = {}
        self._description = ApiDescription(self._client)
        self._row_vectors = RowVectors()

    @property
    def count_mode(self) -> CountMode:
        """The ``Prefer: count=`` mode used for totals."""
        return self._count_mode

    async def aprepare(self) -> None:
        """Read the API description (column types, relations) without blocking the loop."""
        if not self._description.known():
            await self._client.adrive(self._description.fetch_steps())

    async def aclose(self) -> None:
        """Close the awaitable HTTP client if the backend made it."""
        await self._client.aclose()

    def close(self) -> None:
        """Close the HTTP client if this backend created it (a caller's client stays open)."""
        self._client.close()

    # --- reads -----------------------------------------------------------------------------------

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
        return (yield from self._page_steps(query, params, base))

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
        page = yield from self._page_steps(query, params, base)
        return dataclasses.replace(page, related_capped=attach(page.rows, plans, embedded))

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

    def _page_steps(self, query: Query, params: Params, base: Params) -> Steps[Exchange, Page]:
        """The page ``params`` ask for and the number of rows matching ``base`` (bounded: see
        :meth:`_bounded_page_steps`)."""
        if not query.counts_every_match:
            return (yield from self._bounded_page_steps(query, params, base))
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
        return Page(rows=rows, total_count=total)

    def _bounded_page_steps(
        self, query: Query, params: Params, base: Params
    ) -> Steps[Exchange, Page]:
        """The page and one row past it, without a count: the total is the rows known to match
        (see :attr:`Page.total_exact`), which tells whether another page follows."""
        limit, offset = query.limit, query.offset
        assert limit is not None  # a read without a limit counts every match
        # The row past the page is asked for on top of what one read may fetch.
        rows, _, _ = yield from self._fetch(
            query, params, offset, limit + 1, "read", count=False, extra_rows=1
        )
        if not rows and offset:
            # Past the end nothing tells how many rows came before the offset: counted, as
            # the other backends answer (fewer matches than the bound, so an exact total).
            return Page(rows=[], total_count=(yield from self._total(query.table, base, "read")))
        return Page(
            rows=rows[:limit], total_count=offset + len(rows), total_exact=len(rows) <= limit
        )

    def _fetch(
        self,
        query: Query,
        params: Params,
        offset: int,
        limit: int | None,
        operation: str,
        *,
        count: bool = True,
        extra_rows: int = 0,
    ) -> Steps[Exchange, Window]:
        return window_steps(
            self._client,
            query.table,
            operation,
            params,
            offset=offset,
            limit=limit,
            page_size=self._page_size,
            max_rows=self._max_read_rows + extra_rows,
            count_mode=self._count_mode if count else None,
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

    # --- search ----------------------------------------------------------------------------------

    def search(
        self,
        query: Query,
        request: SearchRequest,
        text_columns: tuple[str, ...],
        embedder: Embedder | None,
    ) -> SearchResult:
        """Rank the rows matching ``query.filters`` by the owner's read-only ranking function,
        else by full-text candidates ranked here (see
        :mod:`~persistence.backends.supabase.postgrest.search`
        and docs/search-supabase.md)."""

        def perform(step: SearchStep) -> Any:
            if isinstance(step, EmbedQuery):
                return _embedder(embedder).embed_query(step.text)
            if isinstance(step, EmbedRows):
                return _embedder(embedder).embed_rows(step.texts)
            return self._client.perform(step)

        return drive(self._search_steps(query, request, text_columns, embedder), perform)

    async def asearch(
        self,
        query: Query,
        request: SearchRequest,
        text_columns: tuple[str, ...],
        embedder: Embedder | None,
    ) -> SearchResult:
        """:meth:`search` over ``httpx.AsyncClient``: the same steps; the query is embedded by
        the model's awaitable call, row texts in a worker thread."""

        async def perform(step: SearchStep) -> Any:
            if isinstance(step, EmbedQuery):
                return await _embedder(embedder).aembed_query(step.text)
            if isinstance(step, EmbedRows):
                return await asyncio.to_thread(_embedder(embedder).embed_rows, step.texts)
            return await self._client.aperform(step)

        return await adrive(self._search_steps(query, request, text_columns, embedder), perform)

    def _search_steps(
        self,
        query: Query,
        request: SearchRequest,
        text_columns: tuple[str, ...],
        embedder: Embedder | None,
    ) -> Steps[SearchStep, SearchResult]:
        base = self._filter_params(query.table, query.filters, "search")
        return search_steps(
            self._client,
            self._description,
            self._row_vectors,
            query,
            base,
            request,
            text_columns,
            embedder,
            page_size=self._page_size,
            count_mode=self._count_mode,
        )

    # --- aggregates ------------------------------------------------------------------------------

    async def aaggregate(
        self, query: Query, group_by: tuple[str, ...], metrics: tuple[Metric, ...], limit: int
    ) -> AggregateResult:
        """:meth:`aggregate` over ``httpx.AsyncClient``."""
        return await self._client.adrive(self._aggregate_steps(query, group_by, metrics, limit))

    def aggregate(
        self, query: Query, group_by: tuple[str, ...], metrics: tuple[Metric, ...], limit: int
    ) -> AggregateResult:
        """PostgREST's aggregate functions
        (:mod:`~persistence.backends.supabase.postgrest.aggregate`);
        with a literal ``*`` filter, over the exactly checked rows, as :meth:`count` does."""
        return self._client.drive(self._aggregate_steps(query, group_by, metrics, limit))

    def _aggregate_steps(
        self, query: Query, group_by: tuple[str, ...], metrics: tuple[Metric, ...], limit: int
    ) -> Steps[Exchange, AggregateResult]:
        table, types = query.table, self.column_types(query.table) or {}
        checks = [f for f in query.filters if needs_client_check(f)]
        base = self._filter_params(table, query.filters, "aggregate")
        if checks:
            wanted = [*group_by, *(m.column for m in metrics if m.column)] or ["id"]
            rows = yield from self._checked_rows(table, base, checks, "aggregate", wanted)
            return aggregate_rows(typed_rows(rows, types, table), group_by, metrics, types, limit)
        total = lambda: self._total(table, base, "aggregate")  # noqa: E731 - only when capped
        native = tuple(m for m in metrics if m.function != "count_distinct")
        # Enum keys: every group asked for and ordered here (the server orders by declaration).
        every = all_enum_groups(group_by, types)
        shape = (group_by, native or (Metric("count"),), limit if every is None else every)
        result: AggregateResult = yield from aggregate_steps(
            self._client, table, base, shape, types, self._page_size, total
        )
        if every is not None and not result.capped:
            result = ordered_and_capped(result, limit)
        if len(native) == len(metrics):
            return result
        distinct = {}
        for metric in metrics:
            if metric.function == "count_distinct":
                distinct[metric] = yield from count_distinct_groups(
                    self._client, table, base, group_by, str(metric.column), types, self._page_size
                )
        return with_distinct_counts(result, metrics, distinct)

    # --- writes (PersistenceAgent only) ----------------------------------------------------------

    def insert(self, table: str, rows: Sequence[Mapping[str, Any]]) -> list[Row]:
        if not rows:
            return []
        columns = list(dict.fromkeys(k for row in rows for k in row))
        return self._post(
            table,
            rows,
            [("columns", ",".join(columns))],
            "return=representation,missing=default",
            "insert",
        )

    def upsert(
        self, table: str, rows: Sequence[Mapping[str, Any]], on_conflict: str = "id"
    ) -> list[Row]:
        # PostgREST updates every column named in ``columns`` on conflict, so rows naming
        # different columns go in separate requests: no row gets another row's columns reset.
        groups: dict[tuple[str, ...], list[Mapping[str, Any]]] = {}
        for row in rows:
            groups.setdefault(tuple(row), []).append(row)
        stored: list[Row] = []
        for columns, group in groups.items():
            stored.extend(
                self._post(
                    table,
                    group,
                    [("on_conflict", on_conflict), ("columns", ",".join(columns))],
                    "resolution=merge-duplicates,return=representation",
                    "upsert",
                )
            )
        return stored

    def delete(self, table: str, filters: Sequence[Filter]) -> int:
        self._check_writable(table, "delete")
        checks = [f for f in filters if needs_client_check(f)]
        base = self._filter_params(table, filters, "delete")
        if not checks:
            return self._delete(table, base)
        rows = self._client.drive(self._checked_rows(table, base, checks, "delete", ("id",)))
        ids = [row["id"] for row in rows]
        deleted = 0
        for start in range(0, len(ids), _DELETE_CHUNK):
            chunk = Filter("id", Op.IN, ids[start : start + _DELETE_CHUNK])
            deleted += self._delete(table, [filter_params(chunk)])
        return deleted

    def _check_writable(self, table: str, operation: str) -> None:
        # The read-only facade never calls a write; this keeps the backend itself honest too.
        if self._read_only:
            refuse_write(operation, table, "this Supabase backend")

    def _delete(self, table: str, params: Params) -> int:
        """One DELETE request; :meth:`delete` has checked the backend may write."""
        response = self._client.request(
            "DELETE",
            table,
            "delete",
            [*params, ("select", "id")],
            headers={"Prefer": "return=representation"},
            columns=[k for k, _ in params],
        )
        return len(json_rows(response, table, "delete"))

    def _post(
        self,
        table: str,
        rows: Sequence[Mapping[str, Any]],
        params: Params,
        prefer: str,
        operation: str,
    ) -> list[Row]:
        self._check_writable(table, operation)
        response = self._client.request(
            "POST",
            table,
            operation,
            params,
            headers={"Prefer": prefer, "Content-Type": "application/json"},
            content=json_body(rows, table, operation),
            columns={k for row in rows for k in row},
        )
        return json_rows(response, table, operation)


def _check_options(
    count: object, page_size: object, timeout: object, retries: object, http_client: object
) -> None:
    if count not in COUNT_MODES:
        raise ConfigurationError(f"count= must be one of {', '.join(COUNT_MODES)}, not {count!r}")
    if type(page_size) is not int or page_size < 1:
        raise ConfigurationError(f"page_size= must be a positive integer, not {page_size!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ConfigurationError(f"timeout= must be a positive number of seconds, not {timeout!r}")
    if type(retries) is not int or not 0 <= retries <= 10:
        raise ConfigurationError(f"retries= must be an integer from 0 to 10, not {retries!r}")
    if http_client is not None and not isinstance(http_client, httpx.Client):
        raise ConfigurationError(
            f"http_client= must be an httpx.Client, not {type(http_client).__name__}"
        )


def _embedder(embedder: Embedder | None) -> Embedder:
    # The steps ask for vectors only when the search was given an embedder.
    assert embedder is not None
    return embedder
