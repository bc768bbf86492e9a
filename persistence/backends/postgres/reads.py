"""The PostgreSQL backend's reads: each read planned as one statement (cached by its shape) and
the parsing of its rows, run blocking or awaited; related rows, counts, aggregates, search."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from persistence.aggregate import AggregateResult, Group, Metric
from persistence.backends.postgres import sql as _pg_sql
from persistence.backends.postgres.catalog import Table
from persistence.backends.postgres.indexes import unserved
from persistence.backends.postgres.session import _PostgresSession
from persistence.query import Filter, Page, Query
from persistence.relations import (
    FetchRequest,
    RelatedPlan,
    Relation,
    attach_steps,
    fetch_columns,
    parent_keys,
    read_with_related,
)
from persistence.search import SearchRequest, SearchResult
from persistence.search.embedder import Embedder
from persistence.steps import adrive
from persistence.values.types import ColumnKind, coerce_filters

Row = dict[str, Any]

_STATEMENT_CACHE_SIZE = 1024


class _PostgresReads(_PostgresSession):
    """The reads of the PostgreSQL backend, over the read path of its pools."""

    # --- reads ---------------------------------------------------------------------------------

    def read(self, query: Query) -> Page:
        page: Page = self._select(self._read_plan(query))
        return page

    async def aread(self, query: Query) -> Page:
        """:meth:`read` over the awaitable pool: the same statement and parsing."""
        page: Page = await self._aselect(self._read_plan(query))
        return page

    def _select(self, plan: _Plan) -> Any:
        return plan.parse(self._connections.select(plan.statement, plan.params, plan.operation))

    async def _aselect(self, plan: _Plan) -> Any:
        return plan.parse(await self._async.select(plan.statement, plan.params, plan.operation))

    def _read_plan(self, query: Query) -> _Plan:
        reader = self._shape_reader(query)
        # Values are coerced on every call (the facade's come back as they were).
        filters = coerce_filters(query.table, query.filters, reader.entry.types)
        return _Plan(reader.statement, reader.params(filters, query), "read", reader.parse)

    def _shape_reader(self, query: Query) -> ShapeReader:
        """The statement of ``query``'s shape, its columns checked against the catalog."""
        table = query.table
        entry = self._table(table)
        # Values never change the SQL text, so one statement serves every query of this shape;
        # the shape's columns were checked against this very catalog entry when it was built.
        shape = (
            table,
            tuple((f.column, f.op, f.value is True) for f in query.filters),
            query.columns,
            query.order,
        )
        reader = self._statements.get(shape)
        if reader is None or reader.entry is not entry:
            # Filter, order and projected columns alike must exist.
            entry.require(table, query.referenced_columns(), "read")
            columns = entry.names if query.columns is None else query.columns
            # Without an index to serve any filter, the planner's guess of the matches is what
            # the probe stands in for (see _pg_sql); an unfiltered read has nothing to guess.
            probe = unserved(query.filters, entry.served)
            composed = _pg_sql.build_read(
                query, self._schema, columns, "id" in entry.column_set, probe=probe
            )
            if len(self._statements) >= _STATEMENT_CACHE_SIZE:
                self._statements = {}
            reader = ShapeReader(self, composed.as_bytes(None), columns, entry, probe)
            self._statements[shape] = reader
        return reader

    def read_statement(self, query: Query) -> ShapeReader:
        """The reader of ``query``'s shape, for the facade's read plans: its statement built and
        its columns checked once; it binds the values of each query of that shape as they come
        (coerced by the facade against the catalog entry it holds)."""
        return self._shape_reader(query)

    def relations(self) -> tuple[Relation, ...]:
        """The schema's single-column foreign keys between readable tables (from the catalog)."""
        self._start()  # start-up loads the catalog
        return self._catalog.relations

    def read_related(self, query: Query, plans: Sequence[RelatedPlan]) -> Page:
        """One page of ``query`` with each row's related rows: one statement for the page and
        one per relation and level (``row_number()`` caps each parent's children), never one
        per parent."""
        return read_with_related(self.read, query, plans, self._children)

    async def aread_related(self, query: Query, plans: Sequence[RelatedPlan]) -> Page:
        """:meth:`read_related` over the awaitable pool: the same statements and bounds."""
        page = await self.aread(query)

        async def fetch(asked: FetchRequest) -> list[Row]:
            plan = self._children_plan(*asked)
            return [] if plan is None else list(await self._aselect(plan))

        capped = await adrive(attach_steps(page.rows, plans), fetch)
        return Page(rows=page.rows, total_count=page.total_count, related_capped=capped)

    def _children(self, plan: RelatedPlan, parents: Sequence[Row], budget: int) -> list[Row]:
        planned = self._children_plan(plan, parents, budget)
        return [] if planned is None else list(self._select(planned))

    def _children_plan(
        self, plan: RelatedPlan, parents: Sequence[Row], budget: int
    ) -> _Plan | None:
        relation = plan.relation
        keys = parent_keys(parents, relation.parent_column)
        if not keys:
            return None
        columns = fetch_columns(plan)
        entry, filters = self._checked_filters(relation.child_table, plan.filters, "read", columns)
        statement = _pg_sql.build_children(
            relation.child_table,
            self._schema,
            relation.child_column,
            filters,
            columns,
            "id" in entry.column_set,
        ).as_bytes(None)
        params = [keys, *_pg_sql.filter_params(filters), plan.limit + 1, budget + 1]

        def parse(rows: list[Any]) -> list[Row]:
            return [dict(zip(columns, row, strict=True)) for row in rows]

        return _Plan(statement, params, "read", parse)

    def count(self, table: str, filters: Sequence[Filter]) -> int:
        count: int = self._select(self._count_plan(table, filters))
        return count

    async def acount(self, table: str, filters: Sequence[Filter]) -> int:
        """:meth:`count` over the awaitable pool."""
        count: int = await self._aselect(self._count_plan(table, filters))
        return count

    def _count_plan(self, table: str, filters: Sequence[Filter]) -> _Plan:
        _, filters = self._checked_filters(table, filters, "count")
        statement = _pg_sql.build_count(table, self._schema, filters).as_bytes(None)
        params = _pg_sql.filter_params(filters)
        return _Plan(statement, params, "count", lambda rows: int(rows[0][0]))

    def aggregate(
        self, query: Query, group_by: tuple[str, ...], metrics: tuple[Metric, ...], limit: int
    ) -> AggregateResult:
        """One ``GROUP BY`` statement over the read path (``READ ONLY``, statement timeout),
        asking for ``limit + 1`` groups to know whether more existed."""
        result: AggregateResult = self._select(
            self._aggregate_plan(query, group_by, metrics, limit)
        )
        return result

    async def aaggregate(
        self, query: Query, group_by: tuple[str, ...], metrics: tuple[Metric, ...], limit: int
    ) -> AggregateResult:
        """:meth:`aggregate` over the awaitable pool."""
        plan = self._aggregate_plan(query, group_by, metrics, limit)
        result: AggregateResult = await self._aselect(plan)
        return result

    def _aggregate_plan(
        self, query: Query, group_by: tuple[str, ...], metrics: tuple[Metric, ...], limit: int
    ) -> _Plan:
        measured = [m.column for m in metrics if m.column is not None]
        referenced = {*(f.column for f in query.filters), *group_by, *measured}
        entry, filters = self._checked_filters(query.table, query.filters, "aggregate", referenced)
        text = frozenset(c for c, t in entry.types.items() if t.kind is ColumnKind.TEXT)
        enums = frozenset(c for c, t in entry.types.items() if t.is_enum)
        statement = _pg_sql.build_aggregate(
            query.table, self._schema, filters, group_by, metrics, text, enums
        ).as_bytes(None)
        params = [*_pg_sql.filter_params(filters), limit + 1]
        width = len(group_by)

        def parse(rows: list[Any]) -> AggregateResult:
            groups = tuple(
                Group(
                    keys=dict(zip(group_by, row[:width], strict=True)),
                    metrics={str(m): v for m, v in zip(metrics, row[width:-2], strict=True)},
                )
                for row in rows[:limit]
            )
            return AggregateResult(
                group_by=group_by,
                metrics=metrics,
                groups=groups,
                capped=len(rows) > limit,
                matched=int(rows[0][-1]) if rows else 0,
                total_groups=int(rows[0][-2]) if rows else 0,
            )

        return _Plan(statement, params, "aggregate", parse)

    def search(
        self,
        query: Query,
        request: SearchRequest,
        text_columns: tuple[str, ...],
        embedder: Embedder | None,
    ) -> SearchResult:
        """Rank the rows matching ``query.filters`` in one ``READ ONLY`` transaction (see
        :mod:`persistence.backends.postgres.search`)."""
        entry, filters = self._checked_filters(
            query.table, query.filters, "search", query.referenced_columns()
        )
        return self._search.search(entry, query, filters, request, text_columns, embedder)


class ShapeReader:
    """One read shape's statement on one backend: built and checked once, run for each query
    of that shape whose values the caller coerced against :attr:`entry` (the facade's read
    plans do; :meth:`_PostgresReads.read` coerces first). Immutable; thread-safe."""

    __slots__ = ("_backend", "columns", "entry", "probe", "statement")

    def __init__(
        self,
        backend: _PostgresReads,
        statement: bytes,
        columns: tuple[str, ...],
        entry: Table,
        probe: bool,
    ) -> None:
        self._backend = backend
        self.statement = statement
        self.columns = columns
        self.entry = entry
        self.probe = probe

    def params(self, filters: Sequence[Filter], query: Query) -> list[Any]:
        """The statement's values for ``query``, with its ``filters`` as coerced."""
        return _pg_sql.read_params(query, filters, probe=self.probe)

    def parse(self, rows: list[Any]) -> Page:
        """Rows ``(total, hit, *columns)`` as a page: no row but the total when none matched."""
        columns = self.columns
        return Page(
            rows=[dict(zip(columns, row[2:], strict=True)) for row in rows if row[1] is not None],
            total_count=int(rows[0][0]) if rows else 0,
        )

    def read(self, query: Query) -> Page:
        """``query``, of this shape, its values coerced already: one round trip."""
        backend = self._backend
        params = self.params(query.filters, query)
        return self.parse(backend._connections.select(self.statement, params, "read"))

    async def aread(self, query: Query) -> Page:
        """:meth:`read` over the awaitable pool."""
        params = self.params(query.filters, query)
        return self.parse(await self._backend._async.select(self.statement, params, "read"))


class _Plan(NamedTuple):
    """One read as the backend plans it: the statement, its parameters, the operation's name
    and how its rows become the answer; :meth:`PostgresBackend._select` runs it blocking,
    :meth:`PostgresBackend._aselect` awaited."""

    statement: bytes
    params: list[Any]
    operation: str
    parse: Callable[[list[Any]], Any]
