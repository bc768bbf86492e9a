"""``PostgresBackend`` in one class: start-up and the role check, the cached catalog, reads (one
statement each, planned by shape), related rows, counts, aggregates, search, and the writes of a
``PersistenceAgent``. How read-only is enforced (by the database, not only by this code) is told
in the package's docstring, :mod:`persistence.backends.postgres`.

This module is the backend, one class; its connections are in
:mod:`~persistence.backends.postgres.pool` (blocking) and
:mod:`~persistence.backends.postgres.async_reads` (awaited), its catalog and role check in
:mod:`~persistence.backends.postgres.catalog`, its SQL in :mod:`~persistence.backends.postgres.sql`,
the statement of a read shape in :mod:`~persistence.backends.postgres.plans`, its search in
:mod:`~persistence.backends.postgres.search`.

Thread-safety: a backend is safe to share between threads; its pool hands each call its own
connection, and the cached catalog is replaced, never mutated.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from persistence.aggregate import AggregateResult, DistinctValues, Group, Metric
from persistence.backends.postgres import sql as _pg_sql
from persistence.backends.postgres.async_reads import AsyncConnections
from persistence.backends.postgres.catalog import Catalog, Table, check_role_steps, fetch_all
from persistence.backends.postgres.indexes import unique_lookup, unserved
from persistence.backends.postgres.inspect import data_target
from persistence.backends.postgres.plans import Plan, ShapeReader
from persistence.backends.postgres.pool import DEFAULT_STATEMENT_TIMEOUT_MS, Connections
from persistence.backends.postgres.search import PostgresSearch
from persistence.backends.postgres.vectors import SearchSettings
from persistence.capabilities import Capabilities
from persistence.closing import Closing
from persistence.errors import BackendError
from persistence.query import Filter, Page, Query
from persistence.read_only import refuse_write
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
from persistence.steps import Steps, adrive, drive
from persistence.values.types import ColumnKind, ColumnType, coerce_filters

__all__ = ["PostgresBackend"]

Row = dict[str, Any]

_STATEMENT_CACHE_SIZE = 1024

# Moves an identity/serial sequence past explicitly written ids, never backwards, so that a later
# insert without an id does not collide (the memory backend behaves the same way).
_BUMP_SEQUENCE_SQL = b"""
SELECT setval(s.seq::regclass, s.m) FROM (
  SELECT pg_get_serial_sequence(%s, 'id') AS seq, (SELECT max(id) FROM {table}) AS m
) AS s
WHERE s.seq IS NOT NULL AND s.m >= 1
  AND s.m > COALESCE(pg_sequence_last_value(s.seq::regclass), 0)
"""


class PostgresBackend(Closing):
    """psycopg 3 over a ``psycopg_pool`` pool, opened on first use; see the module docstring.

    ``read_only=True`` (the facade's backend) refuses writes itself, runs reads in ``READ ONLY``
    transactions and checks the role's privileges at start-up.
    """

    name = "postgres"
    #: Every operator.
    capabilities = Capabilities()

    def __init__(
        self,
        dsn: str,
        *,
        read_only: bool = True,
        schema: str = "public",
        statement_timeout_ms: int = DEFAULT_STATEMENT_TIMEOUT_MS,
        pool_min_size: int = 1,
        pool_max_size: int = 10,
        pool_timeout: float = 10.0,
        connect_timeout: float = 5.0,
        max_idle: float = 600.0,
        max_lifetime: float = 3600.0,
        prepared_statements: bool | None = None,
        transaction_pooler: bool = False,
        allow_privileged: bool = False,
        clock: Callable[[], float] = time.monotonic,
        search: SearchSettings | None = None,
    ) -> None:
        self._read_only = read_only
        self._schema = schema
        self._allow_privileged = allow_privileged
        #: Which tables these are, for write versions: server, database and schema.
        self.data_target = data_target(dsn, schema)
        #: The database name alone, for envelopes: no user, password or host.
        self.database = self.data_target[3] or None
        self._catalog = Catalog(schema, clock)
        self._statements: dict[tuple[Any, ...], Any] = {}
        self._connections = Connections(
            dsn,
            read_only=read_only,
            statement_timeout_ms=statement_timeout_ms,
            connect_timeout=connect_timeout,
            prepared_statements=prepared_statements,
            transaction_pooler=transaction_pooler,
            start_up=self._start_up,
            clock=clock,
            min_size=pool_min_size,
            max_size=pool_max_size,
            timeout=pool_timeout,
            max_idle=max_idle,
            max_lifetime=max_lifetime,
        )
        self._started = False
        self._async = AsyncConnections(self._connections, self._start_up_steps)
        self._search = PostgresSearch(self._connections, schema, search or SearchSettings())

    def __repr__(self) -> str:
        mode = "read-only" if self._read_only else "read-write"
        return f"PostgresBackend({mode}, schema={self._schema!r})"

    # --- start-up and closing --------------------------------------------------------------------

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

    # --- catalog ---------------------------------------------------------------------------------

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

    # --- reads -----------------------------------------------------------------------------------

    def read(self, query: Query) -> Page:
        reader = self._shape_reader(query)
        filters = self._coerced(query, reader)
        page: Page | None = self._select(self._read_plan(reader, query, filters))
        if page is None and reader.fallback is not None:  # a key no longer unique
            page = self._select(self._read_plan(reader.fallback, query, filters))
        assert page is not None
        return page

    async def aread(self, query: Query) -> Page:
        """:meth:`read` over the awaitable pool: the same statements and parsing."""
        reader = self._shape_reader(query)
        filters = self._coerced(query, reader)
        page: Page | None = await self._aselect(self._read_plan(reader, query, filters))
        if page is None and reader.fallback is not None:
            page = await self._aselect(self._read_plan(reader.fallback, query, filters))
        assert page is not None
        return page

    @staticmethod
    def _coerced(query: Query, reader: ShapeReader) -> tuple[Filter, ...]:
        # Values are coerced on every call (the facade's come back as they were).
        return coerce_filters(query.table, query.filters, reader.entry.types)

    @staticmethod
    def _read_plan(reader: ShapeReader, query: Query, filters: Sequence[Filter]) -> Plan:
        params = reader.params(filters, query)
        return Plan(reader.statement, params, "read", lambda rows: reader.parse(rows, query))

    def _select(self, plan: Plan) -> Any:
        return plan.parse(self._connections.select(plan.statement, plan.params, plan.operation))

    async def _aselect(self, plan: Plan) -> Any:
        return plan.parse(await self._async.select(plan.statement, plan.params, plan.operation))

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
            query.counts_every_match,
        )
        reader = self._statements.get(shape)
        if reader is None or reader.entry is not entry:
            # Filter, order and projected columns alike must exist.
            entry.require(table, query.referenced_columns(), "read")
            columns = entry.names if query.columns is None else query.columns
            # Without an index to serve any filter, the planner's guess of the matches is what
            # the probe stands in for (see _pg_sql); an unfiltered read has nothing to guess.
            probe = unserved(query.filters, entry.served)
            # An equality on a unique key matches one row at most: the row alone, no count.
            unique = unique_lookup(query.filters, entry.unique)
            has_id = "id" in entry.column_set
            composed = (
                _pg_sql.build_lookup(query, self._schema, columns, has_id)
                if unique
                else _pg_sql.build_read(query, self._schema, columns, has_id, probe=probe)
            )
            if len(self._statements) >= _STATEMENT_CACHE_SIZE:
                self._statements = {}
            connections = (self._connections, self._async)
            fallback = None
            if unique:
                plain = _pg_sql.build_read(query, self._schema, columns, has_id, probe=probe)
                fallback = ShapeReader(connections, plain.as_bytes(None), columns, entry, probe)
            reader = ShapeReader(
                connections, composed.as_bytes(None), columns, entry, probe, unique, fallback
            )
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
        return dataclasses.replace(page, related_capped=capped)

    def _children(self, plan: RelatedPlan, parents: Sequence[Row], budget: int) -> list[Row]:
        planned = self._children_plan(plan, parents, budget)
        return [] if planned is None else list(self._select(planned))

    def _children_plan(self, plan: RelatedPlan, parents: Sequence[Row], budget: int) -> Plan | None:
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

        return Plan(statement, params, "read", parse)

    def count(self, table: str, filters: Sequence[Filter]) -> int:
        count: int = self._select(self._count_plan(table, filters))
        return count

    async def acount(self, table: str, filters: Sequence[Filter]) -> int:
        """:meth:`count` over the awaitable pool."""
        count: int = await self._aselect(self._count_plan(table, filters))
        return count

    def _count_plan(self, table: str, filters: Sequence[Filter]) -> Plan:
        _, filters = self._checked_filters(table, filters, "count")
        statement = _pg_sql.build_count(table, self._schema, filters).as_bytes(None)
        params = _pg_sql.filter_params(filters)
        return Plan(statement, params, "count", lambda rows: int(rows[0][0]))

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
    ) -> Plan:
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

        return Plan(statement, params, "aggregate", parse)

    def distinct_values(self, table: str, column: str, limit: int) -> DistinctValues:
        """The distinct non-NULL values of ``column`` when at most ``limit``, in one statement
        that stops after the table's first rows when they already show more (see
        :func:`~persistence.backends.postgres.sql.build_distinct`)."""
        result: DistinctValues = self._select(self._distinct_plan(table, column, limit))
        return result

    async def adistinct_values(self, table: str, column: str, limit: int) -> DistinctValues:
        """:meth:`distinct_values` over the awaitable pool."""
        result: DistinctValues = await self._aselect(self._distinct_plan(table, column, limit))
        return result

    def _distinct_plan(self, table: str, column: str, limit: int) -> Plan:
        entry, _ = self._checked_filters(table, (), "distinct_values", (column,))
        text = frozenset(c for c, t in entry.types.items() if t.kind is ColumnKind.TEXT)
        enums = frozenset(c for c, t in entry.types.items() if t.is_enum)
        statement = _pg_sql.build_distinct(table, self._schema, column, text, enums)
        probe_rows = (limit + 1) * _pg_sql.DISTINCT_PROBE_ROWS_PER_VALUE
        params = [limit, probe_rows, limit + 1]

        def parse(rows: list[Any]) -> DistinctValues:
            if (rows and rows[0][0]) or len(rows) > limit:
                return DistinctValues(column, (), True)
            return DistinctValues(column, tuple(row[1] for row in rows), False)

        return Plan(statement.as_bytes(None), params, "distinct_values", parse)

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

    # --- writes (PersistenceAgent only) ----------------------------------------------------------

    def _check_writable(self, table: str, operation: str) -> None:
        if self._read_only:
            refuse_write(operation, table, "this postgres backend")

    def _write(
        self,
        table: str,
        rows: Sequence[Mapping[str, Any]],
        operation: str,
        build: Callable[[Row], sql.Composed],
        keys: Collection[str] = (),
    ) -> list[Row]:
        """Run ``build``'s statement for each row in one transaction; ``keys`` must be columns."""
        self._check_writable(table, operation)
        checked = [{k: v for k, v in r.items() if not (k == "id" and v is None)} for r in rows]
        entry = self._table(table).require(table, keys, operation)
        for row in checked:
            entry.require(table, list(row), operation)
        # Only an integer key has a sequence to move (max() of a uuid does not even exist).
        id_type = entry.types.get("id")
        bump = (
            id_type is not None
            and id_type.kind is ColumnKind.INTEGER
            and any("id" in row for row in checked)
        )
        set_timeout = self._connections.set_timeout

        def work(conn: psycopg.Connection[Any]) -> list[Row]:
            stored: list[Row] = []
            with conn.transaction(), conn.cursor(row_factory=dict_row) as cursor:
                cursor.execute(set_timeout)
                for row in checked:
                    cursor.execute(build(row), list(row.values()))
                    stored.extend(cursor.fetchall())
                if bump:
                    cursor.execute(
                        sql.SQL(_BUMP_SEQUENCE_SQL.decode()).format(
                            table=sql.Identifier(self._schema, table)
                        ),
                        (sql.Identifier(self._schema, table).as_string(None),),
                    )
            return stored

        result: list[Row] = self._connections.run(work, operation, read=False)
        return result

    def insert(self, table: str, rows: Sequence[Mapping[str, Any]]) -> list[Row]:
        return self._write(
            table, rows, "insert", lambda row: _pg_sql.build_insert(table, self._schema, row)
        )

    def upsert(
        self, table: str, rows: Sequence[Mapping[str, Any]], on_conflict: str = "id"
    ) -> list[Row]:
        return self._write(
            table,
            rows,
            "upsert",
            lambda row: _pg_sql.build_upsert(table, self._schema, row, on_conflict),
            (on_conflict,),
        )

    def delete(self, table: str, filters: Sequence[Filter]) -> int:
        self._check_writable(table, "delete")
        _, filters = self._checked_filters(table, filters, "delete")
        statement = _pg_sql.build_delete(table, self._schema, filters)
        params = _pg_sql.filter_params(filters)
        set_timeout = self._connections.set_timeout

        def work(conn: psycopg.Connection[Any]) -> int:
            with conn.transaction(), conn.cursor() as cursor:
                cursor.execute(set_timeout)
                cursor.execute(statement, params)
                return cursor.rowcount

        result: int = self._connections.run(work, "delete", read=False)
        return result
