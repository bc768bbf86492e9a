"""Aggregates over PostgREST (v12+): the ``select`` grammar, and the answer read back typed.

One request: every grouped column and metric under an alias (``g0:status``, ``m0:count()``,
``m1:score.sum()``), plus ``n:count()`` for the rows matched, ``order`` on the grouped columns
(``status.asc.nullslast``; PostgREST cannot order by an aggregate) and ``limit`` one past the
cap. PostgREST groups by the plain columns of ``select`` itself. ``count_distinct`` has no
PostgREST spelling: the backend does not declare it.

Servers refuse aggregates unless ``db-aggregates-enabled`` is on (``PGRST123``): that is an
:class:`~persistence.errors.AggregatesDisabledError`, never a fallback to reading rows.

Values come back as JSON; each is read as the type PostgreSQL gave it (numbers exactly, as
``Decimal`` where the SQL type is ``numeric``), so that the answer equals the other backends'.
"""

from __future__ import annotations

import decimal
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx

from persistence.aggregate import AggregateResult, Group, Metric
from persistence.backends.supabase.postgrest.client import Exchange, PostgrestClient
from persistence.errors import BackendError
from persistence.steps import Steps
from persistence.values.coerce import coerce_value
from persistence.values.column_kinds import ColumnKind, ColumnType

__all__ = [
    "AGGREGATE_FUNCTIONS",
    "aggregate_params",
    "aggregate_rows_from",
    "aggregate_steps",
    "typed_rows",
    "typed_value",
]

#: What PostgREST computes: its ``avg()``, ``count()``, ``max()``, ``min()``, ``sum()``.
AGGREGATE_FUNCTIONS = frozenset({"count", "sum", "avg", "min", "max"})
#: The alias of the hidden row count.
MATCHED = "n"
Row = dict[str, Any]
Params = list[tuple[str, str]]


def _metric_term(index: int, metric: Metric) -> str:
    if metric.column is None:
        return f"m{index}:count()"
    return f"m{index}:{metric.column}.{metric.function}()"


def aggregate_params(
    filters: Params, group_by: Sequence[str], metrics: Sequence[Metric], limit: int
) -> Params:
    """The query parameters of one aggregate request (``filters`` already encoded)."""
    select = [f"g{i}:{column}" for i, column in enumerate(group_by)]
    select += [_metric_term(i, m) for i, m in enumerate(metrics)]
    select.append(f"{MATCHED}:count()")
    params: Params = [("select", ",".join(select)), *filters]
    if group_by:
        params.append(("order", ",".join(f"{c}.asc.nullslast" for c in group_by)))
    params.append(("limit", str(limit + 1)))
    return params


def _decoded(response: httpx.Response, table: str) -> list[Row]:
    try:
        data = json.loads(response.content, parse_float=decimal.Decimal)
    except ValueError as exc:
        raise BackendError(
            f"the Supabase API answered aggregate on {table!r} with a body that is not JSON",
            backend="supabase",
            operation="aggregate",
        ) from exc
    if not isinstance(data, list) or not all(isinstance(row, dict) for row in data):
        raise BackendError(
            f"the Supabase API answered aggregate on {table!r} with something other than rows",
            backend="supabase",
            operation="aggregate",
        )
    return data


def typed_value(value: Any, ctype: ColumnType | None, table: str, column: str) -> Any:
    """A JSON value of ``column`` as the column's own type (as given when untyped)."""
    if value is None or ctype is None or ctype.kind in (ColumnKind.OTHER, ColumnKind.JSON):
        return value
    return coerce_value(value, ctype, table=table, column=column)


def typed_rows(rows: Sequence[Row], types: Mapping[str, ColumnType], table: str) -> list[Row]:
    """``rows`` as JSON gave them, each value read as its column's type."""
    return [{c: typed_value(v, types.get(c), table, c) for c, v in row.items()} for row in rows]


def _metric_value(metric: Metric, value: Any, ctype: ColumnType | None, table: str) -> Any:
    """``value`` as the type PostgreSQL's aggregate returns (see :mod:`persistence.aggregate`)."""
    if value is None or metric.column is None or metric.function == "count":
        return value if value is None else int(value)
    kind = None if ctype is None else ctype.kind
    if metric.function in ("min", "max"):
        return typed_value(value, ctype, table, metric.column)
    if kind is ColumnKind.FLOAT:
        return float(value)
    wide = kind is ColumnKind.INTEGER and ctype is not None and ctype.bits == 64
    if metric.function == "avg" or kind is ColumnKind.NUMERIC or wide:
        return decimal.Decimal(value)
    return int(value) if kind is ColumnKind.INTEGER else value


def aggregate_rows_from(
    response: httpx.Response,
    table: str,
    group_by: Sequence[str],
    metrics: Sequence[Metric],
    types: Mapping[str, ColumnType],
) -> tuple[list[tuple[dict[str, Any], dict[str, Any]]], int]:
    """The ``(keys, metric values)`` of each group in the response, and the rows they count."""
    groups = []
    matched = 0
    for row in _decoded(response, table):
        keys = {
            column: typed_value(row.get(f"g{i}"), types.get(column), table, column)
            for i, column in enumerate(group_by)
        }
        values = {
            str(m): _metric_value(
                m, row.get(f"m{i}"), types.get(m.column) if m.column else None, table
            )
            for i, m in enumerate(metrics)
        }
        matched += int(row.get(MATCHED) or 0)
        groups.append((keys, values))
    return groups, matched


def aggregate_steps(
    client: PostgrestClient,
    table: str,
    filters: Params,
    shape: tuple[tuple[str, ...], tuple[Metric, ...], int],
    types: Mapping[str, ColumnType],
    page_size: int,
    total: Callable[[], Steps[Exchange, int]],
) -> Steps[Exchange, AggregateResult]:
    """One aggregate request for ``shape`` (group-by columns, metrics, cap), and ``total()``
    for the rows matched when the groups returned do not count them all (capped)."""
    group_by, metrics, limit = shape
    measured = [m.column for m in metrics if m.column is not None]
    response = yield from client.request_steps(
        "GET",
        table,
        "aggregate",
        aggregate_params(filters, group_by, metrics, limit),
        columns=[*group_by, *measured, *(key for key, _ in filters)],
    )
    found, matched = aggregate_rows_from(response, table, group_by, metrics, types)
    # A server row cap (db-max-rows) at or below the limit hides whether more groups exist.
    capped = len(found) > limit or len(found) == page_size <= limit
    return AggregateResult(
        group_by=group_by,
        metrics=metrics,
        groups=tuple(Group(keys, values) for keys, values in found[:limit]),
        capped=capped,
        matched=(yield from total()) if capped else matched,
        total_groups=None if capped else len(found),
    )
