"""The emulator's aggregate functions (PostgREST v12's ``select=status,count()`` grammar).

Strict, as the rest of the emulator: a ``select`` item is ``[alias:]column``,
``[alias:]count()`` or ``[alias:]column.fn()`` with ``fn`` one of ``avg``, ``count``, ``max``,
``min``, ``sum``; the plain columns are the grouping (PostgREST's automatic ``GROUP BY``); an
``order`` term must name a grouped column (PostgREST cannot order by an aggregate). Values are
computed as PostgreSQL computes them (by :func:`persistence.values.aggregate_rows`, whose
agreement with PostgreSQL the differential test holds) and answered as PostgREST encodes them:
numbers as JSON numbers with ``numeric``'s digits, everything else as text.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from persistence.aggregate import Metric
from persistence.values.aggregate_rows import aggregate_rows
from persistence.values.types import ColumnType

__all__ = ["AggregateItem", "encode_json", "is_aggregate_select", "parse_aggregate_select", "run"]

_ITEM = re.compile(
    r"(?:(?P<alias>[a-z_][a-z0-9_]{0,62}):)?"
    r"(?:(?P<count>count\(\))|(?P<column>[a-z_][a-z0-9_]{0,62})(?:\.(?P<fn>[a-z_]+)\(\))?)"
)
_FUNCTIONS = {"avg", "count", "max", "min", "sum"}
Row = dict[str, Any]


class AggregateItem:
    """One ``select`` item: its output key, its column (``None`` for ``count()``), its
    function (``None`` for a grouped column)."""

    __slots__ = ("column", "function", "key")

    def __init__(self, key: str, column: str | None, function: str | None) -> None:
        self.key, self.column, self.function = key, column, function


def is_aggregate_select(select: str | None) -> bool:
    """True when ``select`` asks for an aggregate function: ``count()``, ``score.sum()`` (an
    empty argument list; a resource embedding such as ``conversations(*)`` has one)."""
    return select is not None and "()" in select


def parse_aggregate_select(select: str, fail: Callable[[str], Exception]) -> list[AggregateItem]:
    """The items of an aggregate ``select``; ``fail(item)`` is raised for one out of grammar."""
    items = []
    for text in select.split(","):
        match = _ITEM.fullmatch(text)
        if match is None:
            raise fail(text)
        alias, column, function = match["alias"], match["column"], match["fn"]
        if match["count"]:
            items.append(AggregateItem(alias or "count", None, "count"))
        elif function is not None:
            if function not in _FUNCTIONS:
                raise fail(text)
            items.append(AggregateItem(alias or function, column, function))
        else:
            items.append(AggregateItem(alias or column, column, None))
    return items


def run(
    rows: Sequence[Row], items: Sequence[AggregateItem], types: dict[str, ColumnType]
) -> tuple[list[Row], list[str]]:
    """The answer rows (one per group, unordered) and the grouped columns."""
    grouped = [i.column for i in items if i.function is None and i.column is not None]
    # col.count() (non-NULL values) is counted below; Metric("count") holds its place.
    metrics = [
        Metric("count") if i.function == "count" else Metric(i.function or "", i.column)
        for i in items
        if i.function is not None
    ]
    unique = list(dict.fromkeys(metrics))
    result = aggregate_rows(rows, grouped, unique, types, limit=10**9)
    answer = []
    for group in result.groups:
        row: Row = {}
        metric_index = 0
        for item in items:
            if item.function is None:
                row[item.key] = group.keys[item.column or ""]
                continue
            metric = metrics[metric_index]
            metric_index += 1
            if item.function == "count" and item.column is not None:
                # col.count() counts non-NULL values, not distinct ones.
                column = item.column
                value = sum(
                    1 for r in rows if _in_group(r, group.keys) and r.get(column) is not None
                )
            else:
                value = group.metrics[str(metric)]
            row[item.key] = value
        answer.append(row)
    return answer, [c for c in grouped if c is not None]


def _in_group(row: Row, keys: Any) -> bool:
    return all(
        row.get(c) == v and (type(row.get(c)) is bool) is (type(v) is bool) for c, v in keys.items()
    )


def _json_value(value: Any) -> str:
    import json

    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | decimal.Decimal):
        return str(value)  # a JSON number with numeric's digits, as PostgreSQL prints it
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, dt.date | dt.time):
        return json.dumps(value.isoformat())
    if isinstance(value, uuid.UUID):
        return json.dumps(str(value))
    return json.dumps(value)


def encode_json(rows: Sequence[Row]) -> bytes:
    """``rows`` as PostgREST's JSON body."""
    import json

    body = ",".join(
        "{" + ",".join(f"{json.dumps(k)}:{_json_value(v)}" for k, v in row.items()) + "}"
        for row in rows
    )
    return f"[{body}]".encode()
