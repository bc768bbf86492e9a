"""Aggregates: what :meth:`ReadOnlyPersistenceFacade.aggregate` takes and returns.

A metric is written as a string, ``"count"`` or ``"<function>:<column>"`` with ``function`` one
of ``count_distinct``, ``sum``, ``avg``, ``min``, ``max``, or built as a :class:`Metric`;
:func:`parse_metric` turns the first into the second, and ``str(metric)`` gives the string back
(it is the key of the metric's value in every :class:`Group`).

The rules every backend follows, so that all give the same answer:

* Groups are ordered by their keys, ascending, NULL last, in code-point order for text (what
  ``COLLATE "C"`` gives on PostgreSQL); at most ``limit`` groups come back, and ``capped`` says
  more existed.
* ``count`` counts rows; every other metric ignores NULLs, as SQL does, and is ``None`` over a
  group whose values are all NULL.
* Values keep their exact type, the one PostgreSQL gives: ``count``/``count_distinct`` an
  ``int``; ``sum`` of ``smallint``/``integer`` an ``int``, of ``bigint``/``numeric`` a
  ``Decimal``, of a float a ``float``; ``avg`` of an integer or numeric column a ``Decimal``
  with PostgreSQL's ``numeric`` division scale (:func:`numeric_quotient`), of a float a
  ``float``; ``min``/``max`` the column's own type.
* ``sum``/``avg`` need a numeric column, ``min``/``max`` an ordered one (numbers, text, dates,
  times), group-by and ``count_distinct`` columns a comparable scalar (no JSON); anything else is
  an ``InvalidQueryError`` naming the column and its type.
"""

from __future__ import annotations

import decimal
import fractions
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from persistence.errors import InvalidQueryError, brief_repr
from persistence.query import is_identifier
from persistence.values.column_kinds import ColumnKind, ColumnType

__all__ = [
    "DEFAULT_GROUP_LIMIT",
    "FUNCTIONS",
    "MAX_GROUP_BY",
    "MAX_GROUP_LIMIT",
    "MAX_METRICS",
    "AggregateResult",
    "DistinctValues",
    "Group",
    "Metric",
    "check_aggregate",
    "check_kinds",
    "numeric_quotient",
    "parse_metric",
    "parse_metrics",
]

#: Groups returned when the caller names no ``limit``.
DEFAULT_GROUP_LIMIT = 100
#: The largest ``limit`` a caller may ask for.
MAX_GROUP_LIMIT = 1000
#: Columns one aggregate may group by.
MAX_GROUP_BY = 3
#: Metrics one aggregate may compute.
MAX_METRICS = 8
#: The metric functions, each but ``count`` over one column.
FUNCTIONS = ("count", "count_distinct", "sum", "avg", "min", "max")

_NUMERIC_KINDS = frozenset({ColumnKind.INTEGER, ColumnKind.NUMERIC, ColumnKind.FLOAT})
_ORDERED_KINDS = _NUMERIC_KINDS | {
    ColumnKind.TEXT,
    ColumnKind.DATE,
    ColumnKind.TIMESTAMP,
    ColumnKind.TIMESTAMPTZ,
    ColumnKind.TIME,
}
_GROUPABLE_KINDS = _ORDERED_KINDS | {ColumnKind.UUID, ColumnKind.BOOLEAN}
# PostgreSQL's numeric division (select_div_scale in numeric.c): at least this many significant
# digits, counted in base-10000 digits of four decimal digits each.
_MIN_SIG_DIGITS = 16
_DEC_DIGITS = 4
_MAX_DISPLAY_SCALE = 1000


@dataclass(frozen=True, slots=True)
class Metric:
    """One aggregate: ``function`` (one of :data:`FUNCTIONS`) over ``column`` (``None`` for
    ``count``, which counts rows). ``str(Metric("sum", "score"))`` is ``"sum:score"``."""

    function: str
    column: str | None = None

    def __post_init__(self) -> None:
        if self.function not in FUNCTIONS:
            raise InvalidQueryError(
                f"unknown metric function {self.function!r}; use one of {', '.join(FUNCTIONS)}",
                field="metrics",
            )
        if self.function == "count":
            if self.column is not None:
                raise InvalidQueryError(
                    "count counts rows and takes no column; use count_distinct:<column>",
                    field="metrics",
                )
        elif not isinstance(self.column, str) or not is_identifier(self.column):
            raise InvalidQueryError(
                f"metric {self.function!r} needs a column name, e.g. '{self.function}:score'",
                field="metrics",
            )

    def __str__(self) -> str:
        return self.function if self.column is None else f"{self.function}:{self.column}"


def parse_metric(metric: Metric | str) -> Metric:
    """``metric`` as a :class:`Metric`: ``"count"`` or ``"<function>:<column>"``."""
    if isinstance(metric, Metric):
        return metric
    if not isinstance(metric, str):
        raise InvalidQueryError(
            f"a metric is a string such as 'count' or 'sum:score', not {type(metric).__name__}",
            field="metrics",
        )
    function, sep, column = metric.partition(":")
    return Metric(function, column if sep else None)


def parse_metrics(metrics: Iterable[Metric | str]) -> tuple[Metric, ...]:
    """Every metric of ``metrics`` parsed, duplicates dropped (first kept), in order."""
    if isinstance(metrics, str | Metric) or not isinstance(metrics, Iterable):
        raise InvalidQueryError(
            "metrics must be a sequence such as ['count', 'sum:score']", field="metrics"
        )
    parsed = tuple(dict.fromkeys(parse_metric(m) for m in metrics))
    if not parsed or len(parsed) > MAX_METRICS:
        raise InvalidQueryError(
            f"an aggregate computes 1 to {MAX_METRICS} metrics, not {len(parsed)}",
            field="metrics",
        )
    return parsed


def _group_by(group_by: Iterable[str]) -> tuple[str, ...]:
    if isinstance(group_by, str) or not isinstance(group_by, Iterable):
        raise InvalidQueryError(
            "group_by must be a sequence of column names, e.g. ['status']", field="group_by"
        )
    names = tuple(group_by)
    for name in names:
        if not isinstance(name, str) or not is_identifier(name):
            raise InvalidQueryError(f"invalid group_by column {brief_repr(name)}", field="group_by")
    if len(set(names)) != len(names) or len(names) > MAX_GROUP_BY:
        raise InvalidQueryError(
            f"group_by names at most {MAX_GROUP_BY} distinct columns, "
            f"not {brief_repr(list(names))}",
            field="group_by",
        )
    return names


def _limit(limit: int | None) -> int:
    if limit is None:
        return DEFAULT_GROUP_LIMIT
    if type(limit) is not int or not 1 <= limit <= MAX_GROUP_LIMIT:
        raise InvalidQueryError(
            f"limit (groups) must be an int from 1 to {MAX_GROUP_LIMIT}, not {brief_repr(limit)}",
            field="limit",
        )
    return limit


def check_aggregate(
    group_by: Iterable[str], metrics: Iterable[Metric | str], limit: int | None
) -> tuple[tuple[str, ...], tuple[Metric, ...], int]:
    """The validated shape of an aggregate: group-by names, metrics, the group cap."""
    return _group_by(group_by), parse_metrics(metrics), _limit(limit)


def check_kinds(
    table: str,
    group_by: Iterable[str],
    metrics: Iterable[Metric],
    types: Mapping[str, ColumnType],
) -> None:
    """Refuse a metric or a grouping its column's type cannot take (columns of unknown type
    pass: the backend then decides)."""

    def refuse(column: str, what: str, ctype: ColumnType) -> None:
        raise InvalidQueryError(
            f"{what} needs {_NEEDS[what]} column; {table}.{column} is {ctype.name}",
            field="group_by" if what == "group_by" else "metrics",
        )

    for column in group_by:
        ctype = types.get(column)
        if ctype is not None and ctype.kind not in _GROUPABLE_KINDS:
            refuse(column, "group_by", ctype)
    for metric in metrics:
        if metric.column is None:
            continue
        ctype = types.get(metric.column)
        if ctype is None:
            continue
        allowed = _KINDS_BY_FUNCTION[metric.function]
        if ctype.kind not in allowed:
            refuse(metric.column, metric.function, ctype)


_KINDS_BY_FUNCTION = {
    "count_distinct": _GROUPABLE_KINDS,
    "sum": _NUMERIC_KINDS,
    "avg": _NUMERIC_KINDS,
    "min": _ORDERED_KINDS,
    "max": _ORDERED_KINDS,
}
_NEEDS = {
    "group_by": "a scalar (not JSON)",
    "count_distinct": "a scalar (not JSON)",
    "sum": "a numeric",
    "avg": "a numeric",
    "min": "an ordered (number, text, date or time)",
    "max": "an ordered (number, text, date or time)",
}


def numeric_quotient(total: decimal.Decimal | int, count: int) -> decimal.Decimal:
    """``total / count`` exactly as PostgreSQL's ``numeric`` division gives it (``avg`` of an
    integer or numeric column): the scale of ``select_div_scale`` in ``numeric.c`` (at least 16
    significant digits, never less than the dividend's scale), rounded half away from zero."""
    total = decimal.Decimal(total)
    dividend_scale = max(0, -int(total.as_tuple().exponent))
    weight1, first1 = _base_10000_head(total)
    weight2, first2 = _base_10000_head(decimal.Decimal(count))
    qweight = weight1 - weight2 - (1 if first1 <= first2 else 0)
    scale = max(_MIN_SIG_DIGITS - qweight * _DEC_DIGITS, dividend_scale, 0)
    scale = min(scale, _MAX_DISPLAY_SCALE)
    exact = fractions.Fraction(total) * 10**scale / count
    magnitude = abs(exact)
    rounded = int(magnitude) + (1 if magnitude - int(magnitude) >= fractions.Fraction(1, 2) else 0)
    return decimal.Decimal(-rounded if exact < 0 else rounded).scaleb(-scale)


def _base_10000_head(value: decimal.Decimal) -> tuple[int, int]:
    """The weight and the value of the first non-zero base-10000 digit of ``value`` (0, 0 for
    zero), as PostgreSQL's ``NumericVar`` holds them."""
    if not value:
        return 0, 0
    weight = abs(value).adjusted() // _DEC_DIGITS
    with decimal.localcontext() as context:
        context.prec = 64
        first = int(abs(value).scaleb(-_DEC_DIGITS * weight))
    return weight, first


@dataclass(frozen=True, slots=True)
class Group:
    """One group: its key values by group-by column, its metric values by ``str(metric)``."""

    keys: Mapping[str, Any]
    metrics: Mapping[str, Any]

    def __post_init__(self) -> None:
        object.__setattr__(self, "keys", MappingProxyType(dict(self.keys)))
        object.__setattr__(self, "metrics", MappingProxyType(dict(self.metrics)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Group):
            return NotImplemented
        return dict(self.keys) == dict(other.keys) and dict(self.metrics) == dict(other.metrics)

    def __hash__(self) -> int:
        return hash((tuple(self.keys.items()), tuple(self.metrics.items())))

    def __repr__(self) -> str:
        return f"Group(keys={dict(self.keys)!r}, metrics={dict(self.metrics)!r})"


@dataclass(frozen=True, slots=True)
class AggregateResult:
    """What an aggregate found.

    ``groups`` in key order (one group, with empty keys, when nothing is grouped); ``capped``
    when more groups existed than the limit let through; ``matched`` the number of rows the
    filters matched; ``total_groups`` how many groups there were in all (``None`` when the
    backend cannot tell without reading them: PostgREST, when capped).
    """

    group_by: tuple[str, ...]
    metrics: tuple[Metric, ...]
    groups: tuple[Group, ...]
    capped: bool
    matched: int
    total_groups: int | None = field(default=None)


@dataclass(frozen=True, slots=True)
class DistinctValues:
    """A column's distinct values, when it holds few (the facade's ``distinct_values``).

    ``values`` are the column's distinct non-NULL values in key order (the order of an
    aggregate's groups), at most the call's ``limit`` of them. ``capped`` says the column holds
    more than ``limit``; ``values`` is then empty, since a backend may stop reading as soon as
    it knows (PostgreSQL does), where listing the first ``limit`` would mean grouping them all.
    """

    column: str
    values: tuple[Any, ...]
    capped: bool

    @classmethod
    def from_groups(cls, column: str, result: AggregateResult) -> DistinctValues:
        """The values of ``result``, an aggregate grouped by ``column`` alone over its non-NULL
        rows (what a backend without its own ``distinct_values`` answers with)."""
        if result.capped:
            return cls(column, (), True)
        return cls(column, tuple(group.keys[column] for group in result.groups), False)
