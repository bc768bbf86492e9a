"""The in-memory backend's query evaluation: filters as row tests with PostgreSQL's semantics
(NULL, booleans, ``in`` lists), and ordering with NULLs last ascending, first descending."""

from __future__ import annotations

import decimal
import operator
from collections.abc import Callable, Sequence
from typing import Any

from persistence.backends.memory.table import Layout, RowView, Values
from persistence.query import Filter, Op, Order
from persistence.values.like import text_predicate


def _compare(op: Op, left: Any, right: Any) -> bool:
    if (type(left) is bool) is not (type(right) is bool):
        # Python says True == 1; SQL has no boolean-integer comparison: never a match.
        return False
    try:
        if op is Op.EQ:
            return bool(left == right)
        if op is Op.NEQ:
            return bool(left != right)
        if op is Op.GT:
            return bool(left > right)
        if op is Op.GTE:
            return bool(left >= right)
        if op is Op.LT:
            return bool(left < right)
        return bool(left <= right)
    except TypeError:  # values of incomparable types never match
        return False


def _predicate(flt: Filter, get: Callable[[Any], Any] | None = None) -> Callable[[Any], bool]:
    """The row test for ``flt``; ``get`` reads its column from a row (a getter of the store's
    row tuples; by default ``row.get(column)`` on a mapping)."""
    op, value = flt.op, flt.value
    if get is None:
        get = operator.methodcaller("get", flt.column)
    if op is Op.IS_NULL:
        want_null = bool(value)
        return lambda row: (get(row) is None) is want_null
    if op in (Op.ICONTAINS, Op.ILIKE, Op.IEQ):
        return text_predicate(flt, get)
    if op is Op.IN:
        # A set lookup, not a scan of the list per row: `in` lists are bounded, but 1,000 values
        # times every row was seconds. Keys keep bools apart from ints, as _compare does; equal
        # numbers of other types (1, 1.0, Decimal 1) hash alike and match, as with ==.
        keys = frozenset((type(c) is bool, c) for c in value)

        def member(row: Any) -> bool:
            v = get(row)
            if v is None:
                return False
            try:
                return (type(v) is bool, v) in keys
            except TypeError:  # an unhashable value (a JSON list or object) equals no scalar
                return False

        return member
    return lambda row: (v := get(row)) is not None and _compare(op, v, value)


def _getter(layout: Layout, column: str) -> Callable[[Values], Any]:
    """Reads ``column`` from a row tuple of ``layout`` (always ``None`` for an unknown one)."""
    position = layout.positions.get(column)
    return (lambda _: None) if position is None else operator.itemgetter(position)


def _matching(layout: Layout, rows: list[Values], filters: Sequence[Filter]) -> list[Values]:
    for flt in filters:
        keep = _predicate(flt, _getter(layout, flt.column))
        rows = [row for row in rows if keep(row)]
    return rows


def _sort_key(get: Callable[[Values], Any]) -> Callable[[Values], tuple[bool, str, Any]]:
    def key(row: Values) -> tuple[bool, str, Any]:
        value = get(row)
        if value is None:
            return (True, "", 0)
        return (
            False,
            "" if isinstance(value, int | float | decimal.Decimal) else type(value).__name__,
            value,
        )

    return key


def _sorted(layout: Layout, rows: list[Values], order: Sequence[Order]) -> list[Values]:
    # Stable sorts applied from the last key to the first give a multi-key sort; ``reverse`` keeps
    # stability, and puts NULLs (True sorts after False) first when descending, as PostgreSQL does.
    for item in reversed(order):
        key = _sort_key(_getter(layout, item.column))
        rows = sorted(rows, key=key, reverse=item.descending)
    return rows


def _views(layout: Layout, rows: list[Values]) -> list[RowView]:
    return [RowView(layout, values) for values in rows]
