"""Aggregates computed in Python over rows already filtered, with PostgreSQL's semantics and
result types (see :mod:`persistence.aggregate`): the memory backend's, and the Supabase
backend's for the rare filter PostgREST cannot apply exactly.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from persistence.aggregate import AggregateResult, Group, Metric, numeric_quotient
from persistence.values.column_kinds import ColumnKind, ColumnType

__all__ = ["aggregate_rows", "group_sort_key"]

Row = Mapping[str, Any]
# Wide enough that no sum of numeric values is ever rounded (PostgreSQL's numeric is exact).
_EXACT = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)


def group_sort_key(keys: Sequence[Any]) -> tuple[tuple[bool, str, Any], ...]:
    """Groups in key order: ascending, NULL last, numbers together, text by code point."""
    return tuple(
        (True, "", 0)
        if value is None
        else (
            False,
            "" if isinstance(value, int | float | decimal.Decimal) else type(value).__name__,
            value,
        )
        for value in keys
    )


def _sum(values: list[Any], ctype: ColumnType | None) -> Any:
    kind = None if ctype is None else ctype.kind
    if kind is ColumnKind.NUMERIC or (kind is ColumnKind.INTEGER and ctype and ctype.bits == 64):
        # sum(bigint) is numeric on PostgreSQL; sum(numeric) keeps the largest scale.
        return sum((decimal.Decimal(v) for v in values), _EXACT.create_decimal(0))
    if kind is ColumnKind.FLOAT:
        return float(sum(values, 0.0))
    return sum(values)


def _avg(values: list[Any], ctype: ColumnType | None) -> Any:
    if ctype is not None and ctype.kind is ColumnKind.FLOAT:
        return float(sum(values, 0.0)) / len(values)
    with decimal.localcontext(_EXACT):
        total = sum((decimal.Decimal(v) for v in values), decimal.Decimal(0))
    return numeric_quotient(total, len(values))


def _distinct(values: list[Any]) -> int:
    # By value and, for booleans, by type: Python's True == 1 is no SQL equality.
    return len({(type(v) is bool, v) for v in values})


_OVER_VALUES: dict[str, Callable[[list[Any], ColumnType | None], Any]] = {
    "count_distinct": lambda values, _: _distinct(values),
    "sum": _sum,
    "avg": _avg,
    "min": lambda values, _: min(values),
    "max": lambda values, _: max(values),
}


def _metric(metric: Metric, rows: list[Row], types: Mapping[str, ColumnType]) -> Any:
    if metric.column is None:
        return len(rows)
    values = [v for row in rows if (v := row.get(metric.column)) is not None]
    if not values and metric.function != "count_distinct":
        return None
    return _OVER_VALUES[metric.function](values, types.get(metric.column))


def aggregate_rows(
    rows: Sequence[Row],
    group_by: Sequence[str],
    metrics: Sequence[Metric],
    types: Mapping[str, ColumnType],
    limit: int,
) -> AggregateResult:
    """``metrics`` per group of ``rows`` by ``group_by``; at most ``limit`` groups in key order.

    Without ``group_by`` there is exactly one group, even over no rows (as SQL's aggregate
    without ``GROUP BY``): ``count`` 0, every other metric ``None`` (``count_distinct`` 0).
    """
    buckets: dict[tuple[Any, ...], list[Row]] = {}
    if not group_by:
        buckets[()] = list(rows)
    for row in rows if group_by else ():
        # (is-bool, value) keeps True and 1 apart, as SQL does.
        key = tuple((type(v) is bool, v) for v in (row.get(c) for c in group_by))
        buckets.setdefault(key, []).append(row)
    ordered = sorted(buckets.items(), key=lambda item: group_sort_key([v for _, v in item[0]]))
    groups = tuple(
        Group(
            keys={column: value for column, (_, value) in zip(group_by, key, strict=True)},
            metrics={str(m): _metric(m, members, types) for m in metrics},
        )
        for key, members in ordered[:limit]
    )
    return AggregateResult(
        group_by=tuple(group_by),
        metrics=tuple(metrics),
        groups=groups,
        capped=len(ordered) > limit,
        matched=len(rows),
        total_groups=len(ordered),
    )
