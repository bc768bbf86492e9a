"""Checking a model's answer before anything uses it: schema, types and grounding in the text.

:func:`understand_answer` turns the raw answer to an :class:`~rag_agent.specs.ExtractionRequest`
(a mapping shaped by :func:`~rag_agent.understanding.llm.schema.extraction_schema`, or anything at
all from a model that ignored it) into an :class:`~rag_agent.specs.Understanding` whose conditions
all have ``source="llm"``. A condition is kept only when

- its column is one the request offered and its operator one allowed on that column (never
  ``ilike``);
- its value has the column's kind (the facade's own coercion rules,
  :mod:`persistence.values.types`): a list of 1 to
  :data:`~rag_agent.understanding.llm.schema.MAX_IN_VALUES` values for ``in``, ``true``/``false``
  for ``is_null``;
- its value is **grounded** in the user's text:

  * text: occurs in the text, case-insensitively, with whitespace collapsed and on word edges
    (``"acme"`` is in "people at ACME." but not in "acmeology"), and has a letter or digit;
  * numbers: occur in the text as a number, written in digits (``80``, ``80.5``, ``1,000``);
  * uuids: occur in the text as a uuid, in any of the spellings the coercion accepts;
  * booleans and ``is_null``: the text mentions the column (a word starting like one of the
    column's name parts: "unsubscribed" for ``unsubscribed``, "phone" for ``phone_number``);
  * dates and times may be **computed** (relative dates), but only when the text states a date
    or a period (a year, a month or weekday name, "today", "last week", "3 days ago", "since"…):
    a model never adds a period nobody asked for. They must parse as ISO 8601 and lie
    within :data:`DATE_PAST` before and :data:`DATE_FUTURE` after the request's ``now``.

Everything else goes to ``ignored`` with a reason. Dropping never widens a query: an answer with
nothing valid has no conditions, which the pipeline treats as "nothing understood". The values
returned are coerced (``int``, ``Decimal``, ``UUID``, UTC ``datetime``…); the pipeline still runs
every condition through the facade's checks, as it does for the rules' output.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import re
import uuid
from collections.abc import Mapping
from typing import Any

from persistence import InvalidQueryError, Op
from persistence.values.types import ColumnKind, ColumnType, coerce_value
from rag_agent.specs import ColumnInfo, Condition, ExtractionRequest, Ignored, Understanding
from rag_agent.understanding.llm.schema import (
    COMPARISON_OPERATORS,
    MAX_CONDITIONS,
    MAX_IGNORED,
    MAX_IN_VALUES,
    offered_columns,
)
from rag_agent.understanding.llm.shape import Shape, column_mentioned, understand_shape

__all__ = [
    "DATE_FUTURE",
    "DATE_PAST",
    "column_mentioned",
    "number_grounded",
    "shape_of",
    "text_grounded",
    "understand_answer",
    "uuid_grounded",
]

#: How far before and after the request's ``now`` a computed date may lie.
DATE_PAST = dt.timedelta(days=100 * 366)
DATE_FUTURE = dt.timedelta(days=10 * 366)

_SHOWN = 120  # characters of a rejected condition shown in ``ignored``
_WORD = re.compile(r"\w")
# Numbers as people write them: 80, -5, 80.5, 1,000 (not the "2" of "v2" or the "5" of "1.5").
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?!\d)")
_HEX = "[0-9a-fA-F]"
_UUID = re.compile(
    rf"(?<!{_HEX})\{{?{_HEX}{{8}}-?{_HEX}{{4}}-?{_HEX}{{4}}-?{_HEX}{{4}}-?{_HEX}{{12}}\}}?(?!{_HEX})"
)
# Words that state a date or a period: a date condition needs one in the text, or the model
# invented the period ("leads at Acme" never asks for "created this year").
_DATE_CUE = re.compile(
    r"\b(?:19|20)\d\d\b|\b\d{1,2}[/.-]\d{1,2}\b|\b\d{1,2}(?:st|nd|rd|th)\b"
    r"|\b(?:today|yesterday|tomorrow|tonight|ago|recent(?:ly)?|lately|since|until|till"
    r"|weeks?|weekends?|months?|years?|quarters?|days?|hours?|minutes?|morning|evening|ytd"
    r"|q[1-4]|monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|march"
    r"|april|june|july|august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug"
    r"|sept?|oct|nov|dec|(?:in|of|since|until|during|early|late|mid)\s+may)\b",
    re.IGNORECASE,
)
_DATE_KINDS = frozenset({"date", "timestamp", "timestamptz"})
_NUMBER_KINDS = frozenset({"integer", "numeric", "float"})
# Coercion types per offered kind: integers and floats at their widest (only the kind is known).
_COLUMN_TYPES = {
    "integer": ColumnType(ColumnKind.INTEGER, "bigint", 64),
    "float": ColumnType(ColumnKind.FLOAT, "double precision", 64),
}


class _Rejected(Exception):
    """A condition (or one value of it) that cannot be used, and why."""


def _collapsed(text: str) -> str:
    return " ".join(text.split()).casefold()


def text_grounded(value: str, text: str) -> bool:
    """True when ``value`` occurs in ``text`` case-insensitively, on word edges.

    Whitespace is collapsed in both; an edge of ``value`` that is a word character must not
    continue a word of ``text``. A ``value`` without a letter or digit (blank, or punctuation
    only: nothing a user names) is never grounded.
    """
    needle = _collapsed(value)
    if not _WORD.search(needle):
        return False
    start = r"(?<!\w)" if _WORD.match(needle[0]) else ""
    end = r"(?!\w)" if _WORD.match(needle[-1]) else ""
    return re.search(start + re.escape(needle) + end, _collapsed(text)) is not None


def number_grounded(value: int | float | decimal.Decimal, text: str) -> bool:
    """True when ``text`` writes a number equal to ``value`` in digits (``80`` is ``80.0``)."""
    try:
        target = decimal.Decimal(str(value))
    except decimal.InvalidOperation:
        return False
    return any(
        decimal.Decimal(match.group().replace(",", "")) == target
        for match in _NUMBER.finditer(text)
    )


def uuid_grounded(value: uuid.UUID, text: str) -> bool:
    """True when ``text`` contains ``value`` as a uuid (any case, hyphens or braces or not)."""
    return any(
        uuid.UUID(match.group().strip("{}").replace("-", "")) == value
        for match in _UUID.finditer(text)
    )


def _column_type(kind: str) -> ColumnType:
    if kind in _COLUMN_TYPES:
        return _COLUMN_TYPES[kind]
    try:
        return ColumnType(ColumnKind(kind), kind)
    except ValueError:
        return ColumnType(ColumnKind.OTHER, kind)


def _aware(moment: dt.datetime) -> dt.datetime:
    return moment.replace(tzinfo=dt.UTC) if moment.tzinfo is None else moment.astimezone(dt.UTC)


def _check_window(value: object, now: dt.datetime) -> None:
    if isinstance(value, dt.datetime):
        moment = _aware(value)
    elif isinstance(value, dt.date):
        moment = dt.datetime.combine(value, dt.time(), tzinfo=dt.UTC)
    else:
        return
    if not now - DATE_PAST <= moment <= now + DATE_FUTURE:
        raise _Rejected(
            f"the date {value.isoformat()} is too far from now ({now.date().isoformat()})"
        )


def _scalar(column: ColumnInfo, value: object, request: ExtractionRequest) -> Any:
    """``value`` coerced to ``column``'s kind and grounded in the request; or ``_Rejected``."""
    if isinstance(value, list | dict) or value is None:
        raise _Rejected(f"{column.name} needs one {column.kind} value")
    if column.kind in _DATE_KINDS and not isinstance(value, str):
        raise _Rejected("dates must be ISO 8601 strings")
    try:
        coerced = coerce_value(
            value, _column_type(column.kind), table=request.table, column=column.name
        )
    except InvalidQueryError as exc:
        raise _Rejected(str(exc)) from None
    kind = column.kind
    if kind in _DATE_KINDS:
        if not _DATE_CUE.search(request.text):
            raise _Rejected("the request states no date or period")
        _check_window(coerced, _aware(request.now))
        return coerced
    if kind == "time":
        return coerced
    if kind == "boolean":
        if not column_mentioned(column.name, request.text):
            raise _Rejected(f"the request does not mention {column.name}")
        return coerced
    if kind in _NUMBER_KINDS:
        grounded = number_grounded(coerced, request.text)
    elif kind == "uuid":
        grounded = uuid_grounded(coerced, request.text)
    else:  # text and every kind offered as text: a string the user wrote
        grounded = isinstance(coerced, str) and text_grounded(coerced, request.text)
    if not grounded:
        raise _Rejected("not in the request: a value the user did not write")
    return coerced


def _condition(
    item: object, columns: Mapping[str, ColumnInfo], request: ExtractionRequest
) -> tuple[Condition | None, list[Ignored]]:
    """The condition ``item`` stands for (or ``None``) and what was dropped from it."""
    if not isinstance(item, Mapping):
        return None, [Ignored(_shown(item), "not a condition with column, op and value")]
    name, op, value = item.get("column"), item.get("op"), item.get("value")
    shown = _shown_condition(name, op, value)
    column = columns.get(name) if isinstance(name, str) else None
    if column is None:
        return None, [Ignored(shown, f"{request.table} offers no column {_shown(name)}")]
    if not isinstance(op, str) or op not in column.operators:
        return None, [Ignored(shown, f"operator {_shown(op)} is not allowed on {column.name}")]
    try:
        if op == "is_null":
            if not isinstance(value, bool):
                raise _Rejected("is_null needs true or false")
            if not column_mentioned(column.name, request.text):
                raise _Rejected(f"the request does not mention {column.name}")
            return Condition(column.name, Op.IS_NULL, value, source="llm"), []
        if op == "in":
            return _in_condition(column, value, request, shown)
        assert op in COMPARISON_OPERATORS  # offered_columns keeps only known operators
        return Condition(column.name, Op(op), _scalar(column, value, request), "llm"), []
    except _Rejected as rejected:
        return None, [Ignored(shown, str(rejected))]


def _in_condition(
    column: ColumnInfo, value: object, request: ExtractionRequest, shown: str
) -> tuple[Condition | None, list[Ignored]]:
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_IN_VALUES:
        raise _Rejected(f"'in' needs a list of 1 to {MAX_IN_VALUES} values")
    kept: list[Any] = []
    dropped: list[Ignored] = []
    # An ungrounded member is dropped alone: the rest is still what the user asked for.
    for member in value:
        try:
            coerced = _scalar(column, member, request)
        except _Rejected as rejected:
            dropped.append(Ignored(_shown_condition(column.name, "in", member), str(rejected)))
            continue
        if coerced not in kept:
            kept.append(coerced)
    if not kept:
        return None, [Ignored(shown, "no value of the list is usable"), *dropped]
    return Condition(column.name, Op.IN, tuple(kept), source="llm"), dropped


def _table_named(table: str, text: str) -> bool:
    words = table.replace("_", " ")
    singular = words[:-3] + "y" if words.endswith("ies") else words.removesuffix("s")
    return any(text_grounded(form, text) for form in {table, words, singular})


def _shown(value: object) -> str:
    shown = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return shown if len(shown) <= _SHOWN else shown[: _SHOWN - 1] + "…"


def _shown_condition(column: object, op: object, value: object) -> str:
    shown_value = json.dumps(value, default=str, ensure_ascii=False)
    return _shown(f"{_shown(column)} {_shown(op)} {shown_value}")


def _model_ignored(raw: object, text: str) -> list[Ignored]:
    """The model's own ``ignored`` entries whose text is part of the request, bounded."""
    kept: list[Ignored] = []
    for entry in raw if isinstance(raw, list) else ():
        if len(kept) >= MAX_IGNORED:
            break
        if not isinstance(entry, Mapping):
            continue
        part, reason = entry.get("text"), entry.get("reason")
        if (
            isinstance(part, str)
            and isinstance(reason, str)
            and part.strip()
            and _collapsed(part) in _collapsed(text)
        ):
            kept.append(Ignored(_shown(" ".join(part.split())), _shown(" ".join(reason.split()))))
    return kept


def understand_answer(raw: object, request: ExtractionRequest) -> Understanding:
    """The valid, grounded part of a model's ``raw`` answer to ``request`` (module docstring).

    Never raises for any ``raw``; a non-mapping is an Understanding with no conditions.
    """
    if not isinstance(raw, Mapping):
        return Understanding(
            ignored=(Ignored(_shown(request.text), "the answer was not an object"),)
        )
    columns = {column.name: column for column in offered_columns(request)}
    conditions: list[Condition] = []
    ignored = _model_ignored(raw.get("ignored"), request.text)
    items = raw.get("conditions")
    if not isinstance(items, list):
        items = [] if items is None else [items]
    for index, item in enumerate(items):
        if index >= MAX_CONDITIONS:
            ignored.append(Ignored(_shown(item), f"more than {MAX_CONDITIONS} conditions"))
            continue
        condition, dropped = _condition(item, columns, request)
        ignored.extend(dropped)
        if condition is not None and condition not in conditions:
            conditions.append(condition)

    table: str | None = None
    named = raw.get("table")
    if named is not None:
        if not isinstance(named, str) or named not in request.tables:
            ignored.append(Ignored(_shown(named), "not a readable table"))
        elif _table_named(named, request.text):
            table = named
        elif named != request.table:
            ignored.append(Ignored(named, "the request does not name this table"))
    shape = understand_shape(raw, request)
    ignored.extend(shape.ignored)
    if table is not None and table != request.table and (conditions or shape_of(shape)):
        # The conditions were written against this request's columns, not the named table's.
        reason = f"a condition on {request.table}, but the request is about {table}"
        ignored.extend(
            Ignored(_shown_condition(c.column, c.op.value, c.value), reason) for c in conditions
        )
        ignored.extend(Ignored(part, reason) for part in shape_of(shape))
        conditions = []
        shape.group_by, shape.metrics, shape.include = [], [], []
    return Understanding(
        table=table,
        conditions=tuple(conditions),
        count_only=raw.get("count_only") is True,
        ignored=tuple(ignored),
        group_by=tuple(shape.group_by),
        include=tuple(shape.include),
        metrics=tuple(shape.metrics),
    )


def shape_of(shape: Shape) -> list[str]:
    """The kept parts of ``shape`` as short phrases (``"group by status"``, ``"avg:score"``)."""
    return [
        *(f"group by {column}" for column in shape.group_by),
        *shape.metrics,
        *(f"with {relation}" for relation in shape.include),
    ]
