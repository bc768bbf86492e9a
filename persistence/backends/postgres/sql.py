"""SQL composition for the PostgreSQL backend: ``psycopg.sql`` objects and bound values only.

Identifiers come from validated ``Query`` objects and the catalog; every value is a bound
parameter. Text from a user never becomes SQL, and ``icontains`` text never becomes a pattern:
it is escaped and matched with an explicit ``ESCAPE``. ``ieq`` is ``lower(col) = lower(%s)``,
the shape an expression index ``ON t (lower(col))`` serves.

Page and count share one statement::

    SELECT c.total, p.* FROM (SELECT count(*) AS total FROM t WHERE w) AS c
    LEFT JOIN LATERAL (SELECT 1, cols FROM t WHERE w ORDER BY ..., id LIMIT n OFFSET m) AS p
    ON true

When no index serves any of the filters, the statement first probes for the matches up to the
page's end (``probe=True``)::

    WITH probe AS MATERIALIZED (SELECT needed FROM t WHERE w LIMIT offset + limit + 1),
         s AS (SELECT count(*) AS n, coalesce(count(*) < offset + limit + 1, true) AS complete
               FROM probe)
    SELECT CASE WHEN s.complete THEN s.n ELSE (SELECT count(*) FROM t WHERE w) END, p.*
    FROM s LEFT JOIN LATERAL (
        (SELECT 1, cols FROM probe WHERE s.complete ORDER BY ..., id LIMIT n OFFSET m)
        UNION ALL
        (SELECT 1, cols FROM t WHERE w AND NOT s.complete ORDER BY ..., id LIMIT n OFFSET m)
    ) AS p ON true

When the probe holds every match (a lookup, the last page), the total is its row count and the
page is sorted from it: one pass over the table. Otherwise the total is counted and the page read
in order, as by the plain statement; the branch not taken is skipped by a one-time filter. Why:
without an index the planner guesses how many rows match, and for a selective filter it guesses
too many, so the plain statement scanned the table twice, the second time walking the primary
key in its order to find the page: on a uuid key, every row fetched at random (3 to 6 times a
sequential scan). Where an index serves a filter the plain statement is kept: there the probe
would be a third index scan, for nothing.

When a filter is an equality on a column a unique index keys alone (the primary key), at most
one row matches, and the statement is that row alone (``unique=True``)::

    SELECT cols FROM t WHERE w ORDER BY ..., id

Its total is the number of rows it returns and the page is sliced from them: one index scan,
where the plain statement makes two (the count's and the page's), a fifth of a lookup by id.

A read with ``exact_total=False`` counts only up to the page's end plus one row: the count's
subquery becomes ``(SELECT 1 FROM t WHERE w LIMIT offset + limit + 1)``, and the probing form
answers the probe's own row count. The total is then exact below that bound and a lower bound at
it, which still tells whether another page follows.

Chosen over ``count(*) OVER ()`` by measurement (see docs/backends/postgres.md): it returns the
total even when the page is past the end, and lets PostgreSQL use an index for ``ORDER BY ...
LIMIT`` instead of sorting every match to evaluate the window.
"""

from __future__ import annotations

import decimal
from collections.abc import Mapping, Sequence
from typing import Any

from psycopg import sql

from persistence.aggregate import Metric
from persistence.query import Filter, Op, Query
from persistence.values.like import escape_like

__all__ = [
    "build_aggregate",
    "build_children",
    "build_count",
    "build_delete",
    "build_distinct",
    "build_insert",
    "build_lookup",
    "build_read",
    "build_upsert",
    "escape_like",
    "filter_params",
    "read_params",
]

_COMPARISON = {
    Op.EQ: sql.SQL(" = "),
    Op.NEQ: sql.SQL(" <> "),
    Op.GT: sql.SQL(" > "),
    Op.GTE: sql.SQL(" >= "),
    Op.LT: sql.SQL(" < "),
    Op.LTE: sql.SQL(" <= "),
}
# E'\\' is one backslash whatever standard_conforming_strings says.
_ILIKE = sql.SQL(" ILIKE %s ESCAPE E'\\\\'")
# Exactly this text: it is the expression a ``lower(col)`` index is matched against.
# Schema-qualified, as every function we call: a role's search_path cannot swap it (the planner
# matches an index on lower(col) by the function, not by how the call is spelled).
_IEQ = sql.SQL("pg_catalog.lower({}) = pg_catalog.lower(%s)")
_NUMBERS = (int, float, decimal.Decimal)


def _in_values(values: tuple[Any, ...]) -> list[Any]:
    # psycopg dumps a list as one array type: mixed numbers become exact Decimals.
    if len({type(v) for v in values}) > 1 and all(isinstance(v, _NUMBERS) for v in values):
        return [decimal.Decimal(v) for v in values]
    return list(values)


def _condition(flt: Filter) -> sql.Composable:
    column = sql.Identifier(flt.column)
    op = flt.op
    if op is Op.IS_NULL:
        return sql.SQL("{} IS NULL" if flt.value else "{} IS NOT NULL").format(column)
    if op is Op.IN:
        return sql.SQL("{} = ANY(%s)").format(column)
    if op in (Op.ICONTAINS, Op.ILIKE):
        return column + _ILIKE
    if op is Op.IEQ:
        return _IEQ.format(column)
    return column + _COMPARISON[op] + sql.SQL("%s")


def filter_params(filters: Sequence[Filter]) -> list[Any]:
    """The bound values of ``filters``, in the order their placeholders appear."""
    params: list[Any] = []
    for flt in filters:
        if flt.op is Op.IS_NULL:
            continue
        if flt.op is Op.IN:
            params.append(_in_values(flt.value))
        elif flt.op is Op.ICONTAINS:
            params.append(f"%{escape_like(flt.value)}%")
        else:
            params.append(flt.value)
    return params


def _where(filters: Sequence[Filter], *also: sql.Composable) -> sql.Composable:
    """`` WHERE`` and the filters' conditions, then ``also`` (nothing when there are none)."""
    conditions = [*(_condition(f) for f in filters), *also]
    if not conditions:
        return sql.SQL("")
    return sql.SQL(" WHERE ") + sql.SQL(" AND ").join(conditions)


def _order(query: Query, has_id: bool) -> sql.Composable:
    keys = [
        sql.SQL("{} DESC").format(sql.Identifier(o.column))
        if o.descending
        else sql.Identifier(o.column)
        for o in query.order
    ]
    # The id tie-breaker makes pages deterministic (after an order on id, it adds nothing).
    if has_id and not any(o.column == "id" for o in query.order):
        keys.append(sql.Identifier("id"))
    if not keys:
        return sql.SQL("")
    return sql.SQL(" ORDER BY ") + sql.SQL(", ").join(keys)


def build_read(
    query: Query, schema: str, columns: Sequence[str], has_id: bool, *, probe: bool = False
) -> sql.Composed:
    """The page-and-total statement for ``query``, projecting ``columns`` (the module's docstring
    draws both forms; ``probe`` picks the probing one).

    Its values are :func:`read_params` (with the same ``probe``); result rows are
    ``(total, hit, *columns)``, where ``hit`` is NULL on the single row returned when the page is
    empty.
    """
    table = sql.Identifier(schema, query.table)
    where = _where(query.filters)
    order = _order(query, has_id)
    projected = sql.SQL(", ").join(sql.Identifier(c) for c in columns)
    # A bounded total counts the matches up to the page's end plus one (its own LIMIT): the
    # scan stops there, where counting every match reads every matching row.
    counted = sql.SQL(
        "{table}{where}"
        if query.counts_every_match
        else "(SELECT 1 FROM {table}{where} LIMIT %s) AS b"
    )
    if not probe:
        return sql.SQL(
            "SELECT c.total, p.* FROM (SELECT count(*) AS total FROM {counted}) AS c "
            "LEFT JOIN LATERAL (SELECT 1 AS hit, {columns} FROM {table}{where}{order} "
            "LIMIT %s OFFSET %s) AS p ON true"
        ).format(
            counted=counted.format(table=table, where=where),
            table=table,
            where=where,
            columns=projected,
            order=order,
        )
    # The probe keeps what the page's projection and its order need, and nothing else: a role
    # granted SELECT on some columns only can still read.
    needed = list(dict.fromkeys([*columns, *(o.column for o in query.order)]))
    if has_id and "id" not in needed:
        needed.append("id")
    return sql.SQL(
        "WITH probe AS MATERIALIZED (SELECT {needed} FROM {table}{where} LIMIT %s), "
        "s AS (SELECT count(*) AS n, coalesce(count(*) < %s, true) AS complete FROM probe) "
        "SELECT {total} AS total, p.* FROM s LEFT JOIN LATERAL ("
        "(SELECT 1 AS hit, {columns} FROM probe WHERE s.complete{order} LIMIT %s OFFSET %s) "
        "UNION ALL "
        "(SELECT 1 AS hit, {columns} FROM {table}{where_incomplete}{order} LIMIT %s OFFSET %s)"
        ") AS p ON true"
    ).format(
        needed=sql.SQL(", ").join(sql.Identifier(c) for c in needed),
        table=table,
        where=where,
        columns=projected,
        order=order,
        where_incomplete=_where(query.filters, sql.SQL("NOT s.complete")),
        # A bounded total is the probe's row count: the probe stops at the same bound.
        total=sql.SQL(
            "CASE WHEN s.complete THEN s.n ELSE (SELECT count(*) FROM {table}{where}) END"
            if query.counts_every_match
            else "s.n"
        ).format(table=table, where=where),
    )


def build_lookup(query: Query, schema: str, columns: Sequence[str], has_id: bool) -> sql.Composed:
    """The statement of a read matching at most one row (see the module docstring): ``columns``
    of the rows matching ``query``'s filters, up to the page's end plus one. Its values are
    :func:`filter_params`, then that bound (NULL without a limit); the caller counts the rows
    and slices the page. Ordered as the plain statement is, and bounded, so that a key no longer
    unique (its index dropped since the catalog was read) still pages deterministically and
    never reads every match: reaching the bound says so, and the caller reads again by
    :func:`build_read`."""
    return sql.SQL("SELECT {columns} FROM {table}{where}{order} LIMIT %s").format(
        columns=sql.SQL(", ").join(sql.Identifier(c) for c in columns),
        table=sql.Identifier(schema, query.table),
        where=_where(query.filters),
        order=_order(query, has_id),
    )


def read_params(
    query: Query, filters: Sequence[Filter] | None = None, *, probe: bool = False
) -> list[Any]:
    """The values of :func:`build_read`'s statement for ``query`` (its filters, or ``filters``
    where the caller coerced them). Plain: the count's filters (and, bounded, its bound), the
    page's filters, then limit and offset. Probing: the probe's filters, its bound twice (NULL,
    no bound, without a limit), the count's filters unless bounded (the probe's row count is
    the total then), then each page's limit and offset with the ordered page's filters between.
    """
    values = filter_params(query.filters if filters is None else filters)
    limit, offset, counted = query.limit, query.offset, query.count_bound
    if not probe:
        count = [*values] if counted is None else [*values, counted]
        return [*count, *values, limit, offset]
    bound = None if limit is None else offset + limit + 1
    count = [*values] if counted is None else []
    return [*values, bound, bound, *count, limit, offset, *values, limit, offset]


_RANK = sql.Identifier("related rank")
_POSITION = sql.Identifier("related position")
_KEY = sql.Identifier("related key")
_SEQUENCE = sql.Identifier("related sequence")


def build_children(
    table: str,
    schema: str,
    join_column: str,
    filters: Sequence[Filter],
    columns: Sequence[str],
    has_id: bool,
) -> sql.Composed:
    """The children of one level of parents, for :func:`persistence.relations.attach`: each
    parent key's first ``n`` children of ``table`` matching ``filters`` (``id`` order), in
    parent order; of those, the first ``m`` and each parent's first (which tells whether the
    total cut its list). One statement for every parent of the level.

    Values: the parent keys (a list, in parent order), :func:`filter_params`, ``n``, ``m``.
    The helper columns' names hold a space, which no column name the facade accepts does.
    """
    child = sql.Identifier(join_column)
    return sql.SQL(
        "SELECT {outer} FROM (SELECT {middle}, s.{rank}, "
        "row_number() OVER (ORDER BY s.{position}, s.{rank}) AS {sequence} FROM ("
        "SELECT {inner}, k.{position}, "
        "row_number() OVER (PARTITION BY c.{child} ORDER BY c.{within}) AS {rank} "
        "FROM {table} AS c JOIN pg_catalog.unnest(%s) WITH ORDINALITY AS k({key}, {position}) "
        "ON c.{child} = k.{key}{where}) AS s WHERE s.{rank} <= %s) AS t "
        "WHERE t.{sequence} <= %s OR t.{rank} = 1 ORDER BY t.{sequence}"
    ).format(
        outer=sql.SQL(", ").join(sql.Identifier("t", c) for c in columns),
        middle=sql.SQL(", ").join(sql.Identifier("s", c) for c in columns),
        inner=sql.SQL(", ").join(sql.Identifier("c", c) for c in columns),
        position=_POSITION,
        child=child,
        within=sql.Identifier("id") if has_id else child,
        rank=_RANK,
        sequence=_SEQUENCE,
        table=sql.Identifier(schema, table),
        key=_KEY,
        where=_where(filters),
    )


def build_count(
    table: str, schema: str, filters: Sequence[Filter], *, bounded: bool = False
) -> sql.Composed:
    """``SELECT count(*)`` of ``table`` matching ``filters`` (values: :func:`filter_params`);
    ``bounded``: of the matches up to a bound, the last value (the scan stops there)."""
    if bounded:
        return sql.SQL("SELECT count(*) FROM (SELECT 1 FROM {}{} LIMIT %s) AS b").format(
            sql.Identifier(schema, table), _where(filters)
        )
    return sql.SQL("SELECT count(*) FROM {}{}").format(
        sql.Identifier(schema, table), _where(filters)
    )


_METRIC_SQL = {
    "count_distinct": "count(DISTINCT {})",
    "sum": "sum({})",
    "avg": "avg({})",
    "min": "min({})",
    "max": "max({})",
}


def _key(column: str, text_columns: frozenset[str], enums: frozenset[str]) -> sql.Composable:
    # Code-point order for text whatever the database's collation: the order, and the min/max,
    # every backend gives. An enum takes no collation (and orders by declaration): its label
    # as text does.
    if column in enums:
        return sql.SQL('{}::pg_catalog.text COLLATE "C"').format(sql.Identifier(column))
    if column in text_columns:
        return sql.SQL('{} COLLATE "C"').format(sql.Identifier(column))
    return sql.Identifier(column)


def _metric(metric: Metric, text_columns: frozenset[str], enums: frozenset[str]) -> sql.Composable:
    if metric.column is None:
        return sql.SQL("count(*)")
    inner = (
        _key(metric.column, text_columns, enums)
        if metric.function in ("min", "max")
        else sql.Identifier(metric.column)
    )
    return sql.SQL(_METRIC_SQL[metric.function]).format(inner)


def build_aggregate(
    table: str,
    schema: str,
    filters: Sequence[Filter],
    group_by: Sequence[str],
    metrics: Sequence[Metric],
    text_columns: frozenset[str],
    enum_columns: frozenset[str] = frozenset(),
) -> sql.Composed:
    """One ``GROUP BY`` statement: rows ``(*keys, *metrics, total_groups, matched)`` in key
    order (ascending, NULL last, text and enum labels in code-point order), ``LIMIT %s``.

    The two window functions run over the grouped rows before the limit: the number of groups
    and the number of rows matched (the sum of the groups' ``count(*)``). Values:
    :func:`filter_params`, then the limit.
    """
    keys = [sql.Identifier(c) for c in group_by]
    selected = [*keys, *(_metric(m, text_columns, enum_columns) for m in metrics)]
    selected += [sql.SQL("count(*) OVER ()"), sql.SQL("sum(count(*)) OVER ()")]
    statement = sql.SQL("SELECT {} FROM {}{}").format(
        sql.SQL(", ").join(selected), sql.Identifier(schema, table), _where(filters)
    )
    if group_by:
        order = [_key(c, text_columns, enum_columns) for c in group_by]
        statement += sql.SQL(" GROUP BY {} ORDER BY {}").format(
            sql.SQL(", ").join(keys), sql.SQL(", ").join(order)
        )
    return statement + sql.SQL(" LIMIT %s")


#: Rows of the table read first by :func:`build_distinct`, per value the caller allows: a column
#: of many values shows more than ``limit`` of them within these, one of few values never does.
DISTINCT_PROBE_ROWS_PER_VALUE = 20


def build_distinct(
    table: str,
    schema: str,
    column: str,
    text_columns: frozenset[str],
    enum_columns: frozenset[str] = frozenset(),
) -> sql.Composed:
    """The distinct non-NULL values of ``column``, in key order as an aggregate's groups, when
    they are few.

    A probe counts the distinct values among the table's first rows; when that count passes the
    limit, the one-time filter skips the scan and a single row ``(true, NULL)`` says so. Otherwise
    rows ``(false, value)``, at most ``limit + 1``. Exact either way: a probe that finds few
    values proves nothing, and the full scan runs. Values: the limit, the probe's rows, the limit
    plus one.
    """
    name, target = sql.Identifier(column), sql.Identifier(schema, table)
    key = _key(column, text_columns, enum_columns)
    return sql.SQL(
        "WITH probe AS MATERIALIZED (SELECT count(DISTINCT {name}) > %s AS many"
        " FROM (SELECT {name} FROM {target} WHERE {name} IS NOT NULL LIMIT %s) AS first_rows)"
        " SELECT true, NULL FROM probe WHERE many"
        " UNION ALL (SELECT false, {name} FROM {target}"
        " WHERE {name} IS NOT NULL AND NOT (SELECT many FROM probe)"
        " GROUP BY {name} ORDER BY {key} LIMIT %s)"
    ).format(name=name, target=target, key=key)


def _insert_body(table: str, schema: str, row: Mapping[str, Any]) -> sql.Composed:
    target = sql.Identifier(schema, table)
    if not row:
        return sql.SQL("INSERT INTO {} DEFAULT VALUES").format(target)
    return sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
        target,
        sql.SQL(", ").join(sql.Identifier(c) for c in row),
        sql.SQL(", ").join(sql.Placeholder() * len(row)),
    )


def build_insert(table: str, schema: str, row: Mapping[str, Any]) -> sql.Composed:
    """``INSERT ... RETURNING *`` for one row (values: the row's, in order)."""
    return _insert_body(table, schema, row) + sql.SQL(" RETURNING *")


def build_upsert(table: str, schema: str, row: Mapping[str, Any], on_conflict: str) -> sql.Composed:
    """``INSERT ... ON CONFLICT (on_conflict) DO UPDATE`` of the given columns, ``RETURNING *``."""
    updates = [c for c in row if c != on_conflict]
    # DO UPDATE even with nothing to change, so that RETURNING yields the existing row.
    assignments = [sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(c)) for c in updates] or [
        sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(on_conflict))
    ]
    statement = sql.SQL("{} ON CONFLICT ({}) DO UPDATE SET {} RETURNING *").format(
        _insert_body(table, schema, row),
        sql.Identifier(on_conflict),
        sql.SQL(", ").join(assignments),
    )
    return statement


def build_delete(table: str, schema: str, filters: Sequence[Filter]) -> sql.Composed:
    """``DELETE FROM`` the rows matching ``filters`` (values: :func:`filter_params`)."""
    return sql.SQL("DELETE FROM {}{}").format(sql.Identifier(schema, table), _where(filters))
