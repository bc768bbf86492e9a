"""Filters on PostgreSQL enum columns, rewritten onto the enum's labels before any backend.

An enum column holds one of a fixed list of labels (:attr:`ColumnType.labels`, declaration
order). PostgreSQL refuses ``lower(status)`` and ``status ILIKE …`` on an enum ("function
lower(lead_status) does not exist"), a value that is no label ("invalid input value for enum"),
and orders an enum by declaration, not by text. So every filter on an enum column is turned here
into an equality on labels, which every backend answers alike and a plain btree index on the
column serves (a ``lower(status::text)`` index is impossible: ``enum_out`` is not immutable):

=========================  ===============================================================
filter                     becomes
=========================  ===============================================================
``eq``/``neq`` value       the label equal to it; else the one label equal ignoring case
``in`` values              each value so mapped
``ieq`` value              ``eq`` the label equal ignoring case (``in`` when several are)
``icontains`` text         ``in`` the labels containing it, ignoring case
``ilike`` pattern          ``in`` the labels it matches, ignoring case
``gt``/``gte``/``lt``/…    ``in`` the labels after/before it in declaration order
=========================  ===============================================================

A value that maps to no label is an :class:`~persistence.errors.InvalidQueryError` listing the
labels, so a person or a model can correct it: no query runs on a value the column cannot hold.
"""

from __future__ import annotations

from typing import Any

from persistence.errors import InvalidQueryError, brief_repr
from persistence.query import Filter, Op
from persistence.values.column_kinds import ColumnType
from persistence.values.like import fold_case, text_predicate

__all__ = ["enum_filter", "enum_label", "exact_label"]

_SHOWN_LABELS = 20
_AFTER = {Op.GT: (1, False), Op.GTE: (0, False), Op.LT: (0, True), Op.LTE: (1, True)}


def _labels_text(ctype: ColumnType) -> str:
    labels = ctype.labels or ()
    shown = ", ".join(repr(label) for label in labels[:_SHOWN_LABELS])
    more = f" and {len(labels) - _SHOWN_LABELS} more" if len(labels) > _SHOWN_LABELS else ""
    return f"one of {shown}{more}"


def _refuse(ctype: ColumnType, table: str, column: str, what: str) -> InvalidQueryError:
    return InvalidQueryError(
        f"{table}.{column} is the enum {ctype.name}: {what}; use {_labels_text(ctype)}",
        field="value",
    )


def _text(value: Any, ctype: ColumnType, table: str, column: str) -> str:
    if type(value) is str:
        return value
    if isinstance(value, str):
        return str.__str__(value)  # a StrEnum member: its plain value
    raise _refuse(ctype, table, column, f"{brief_repr(value)} is not a label")


def exact_label(value: Any, ctype: ColumnType, *, table: str, column: str) -> str:
    """``value`` when it is a label of ``ctype``, as PostgreSQL's enum input takes it (exactly,
    case included): what a written value must be. ``InvalidQueryError`` listing the labels
    otherwise."""
    text = _text(value, ctype, table, column)
    if text in (ctype.labels or ()):
        return text
    raise _refuse(ctype, table, column, f"{text[:60]!r} is not a label")


def enum_label(value: Any, ctype: ColumnType, *, table: str, column: str) -> str:
    """The label of ``ctype`` that ``value`` names: equal to it, else the only label equal to
    it ignoring case; ``InvalidQueryError`` listing the labels otherwise."""
    labels = ctype.labels or ()
    text = _text(value, ctype, table, column)
    if text in labels:
        return text
    folded = [label for label in labels if fold_case(label) == fold_case(text)]
    if len(folded) == 1:
        return folded[0]
    raise _refuse(ctype, table, column, f"{text[:60]!r} is not a label")


def _matching(labels: list[str], flt: Filter, ctype: ColumnType, table: str) -> Filter:
    if not labels:
        shown = repr(flt.value)[:60]
        raise _refuse(ctype, table, flt.column, f"no label matches {flt.op.value} {shown}")
    if len(labels) == 1:
        return Filter(flt.column, Op.EQ, labels[0])
    return Filter(flt.column, Op.IN, tuple(labels))


def enum_filter(flt: Filter, ctype: ColumnType, *, table: str) -> Filter:
    """``flt`` on an enum column of type ``ctype`` as an equality on labels (module table)."""
    labels = list(ctype.labels or ())
    column, op = flt.column, flt.op
    if op is Op.IS_NULL:
        return flt
    if op is Op.IN:
        mapped = tuple(enum_label(v, ctype, table=table, column=column) for v in flt.value)
        return flt if mapped == flt.value else Filter(column, op, mapped)
    if op in (Op.EQ, Op.NEQ):
        label = enum_label(flt.value, ctype, table=table, column=column)
        return flt if label == flt.value else Filter(column, op, label)
    text = _text(flt.value, ctype, table, column)
    if op in (Op.IEQ, Op.ICONTAINS, Op.ILIKE):
        # The memory backend's own text tests: case folded as PostgreSQL's lower() folds it.
        matches = text_predicate(Filter(column, op, text))
        return _matching([x for x in labels if matches({column: x})], flt, ctype, table)
    start, before = _AFTER[op]
    position = labels.index(enum_label(text, ctype, table=table, column=column))
    chosen = labels[: position + start] if before else labels[position + start :]
    return _matching(chosen, flt, ctype, table)
