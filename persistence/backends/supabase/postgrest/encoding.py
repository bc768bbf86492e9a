"""Translate query value objects into PostgREST's URL grammar, and read its ``Content-Range``.

Pure functions, no I/O: the Supabase backend sends what these build. The grammar rules below are
PostgREST's own (``docs/references/api/url_grammar.rst`` and its query-string parser):

* A top-level filter ``col=op.value`` takes *everything* after ``op.`` as the value, verbatim:
  no quoting applies there (quotes would become part of the value), so ``eq``/``gt``/... values
  are sent as they are, percent-encoded.
* Inside ``in.(...)`` an element is either bare (up to the next ``,`` or ``)``) or ``"..."`` in
  which ``\\`` escapes the next character. Every element is quoted here, with ``\\`` and ``"``
  escaped, so ``, . : ( )`` and quotes inside a value stay data.
* ``like``/``ilike`` values go to SQL ``ILIKE`` after PostgREST replaces **every** ``*`` with
  ``%``; there is no escape for that. ``%``, ``_`` and ``\\`` are escaped with ``\\`` (SQL's
  default LIKE escape). A literal ``*`` is sent as ``_`` (any one character) and the row is then
  checked exactly on the client: see :func:`needs_client_check` and
  :func:`persistence.values.like.text_predicate`.
* ``ieq`` (case-insensitive equality) is an ``ilike`` whose every wildcard is escaped, so it
  matches the whole value literally: PostgreSQL's ``ILIKE`` lower-cases both sides with
  ``lower()`` in a UTF-8 database, so this is ``lower(col) = lower(value)``. A ``*`` in the value
  takes the same ``_``-and-re-check path as in ``icontains``.
* ``or=``/``and=`` logic trees are never built: filters are separate parameters, ANDed.

Query strings are percent-encoded here with nothing left "safe" (space is ``%20``, ``+`` is
``%2B``), so the server decodes every value back to the exact text, whatever its ``+`` rule.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
import uuid
from collections.abc import Iterable, Sequence
from typing import Literal
from urllib.parse import quote

from persistence.query import Filter, Op, Order
from persistence.values.like import escape_like

__all__ = [
    "COUNT_MODES",
    "RESERVED_PARAMETERS",
    "ContentRange",
    "CountMode",
    "encode_query_string",
    "encode_scalar",
    "filter_params",
    "icontains_pattern",
    "ieq_pattern",
    "ilike_pattern",
    "in_list",
    "needs_client_check",
    "order_param",
    "parse_content_range",
    "quote_list_element",
    "select_param",
]

CountMode = Literal["exact", "planned", "estimated"]
#: The ``Prefer: count=`` values PostgREST accepts.
COUNT_MODES: tuple[CountMode, ...] = ("exact", "planned", "estimated")

#: Query parameters PostgREST reads as something other than a column filter. A column with one
#: of these names cannot be filtered through the URL grammar without changing the request.
RESERVED_PARAMETERS = frozenset(
    {"select", "order", "limit", "offset", "or", "and", "columns", "on_conflict"}
)

_SCALAR_OPS = {
    Op.EQ: "eq",
    Op.NEQ: "neq",
    Op.GT: "gt",
    Op.GTE: "gte",
    Op.LT: "lt",
    Op.LTE: "lte",
}


def encode_scalar(value: object) -> str:
    """The text PostgREST hands to PostgreSQL for ``value`` (an ``::unknown`` literal)."""
    if isinstance(value, bool):  # before int: bool is an int subclass
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | decimal.Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, dt.date | dt.time):  # datetime is a date
        return value.isoformat()
    raise TypeError(f"cannot encode {type(value).__name__} for PostgREST")


def quote_list_element(text: str) -> str:
    """``text`` as a quoted ``in.(...)`` element: ``"..."`` with ``\\`` and ``"`` escaped."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def in_list(values: Iterable[object]) -> str:
    """The ``in.`` operand: every element quoted, so no value can end the list or add one."""
    return "(" + ",".join(quote_list_element(encode_scalar(v)) for v in values) + ")"


def _escape_like(text: str) -> str:
    escaped = escape_like(text)
    # PostgREST turns every ``*`` into ``%`` and has no escape for it; ``_`` matches the one
    # character, and the client-side check keeps only rows where it really is ``*``.
    return escaped.replace("*", "_")


def ieq_pattern(literal: str) -> str:
    """The ``ilike`` operand that matches exactly ``literal``, ignoring case."""
    return _escape_like(literal)


def icontains_pattern(literal: str) -> str:
    """The ``ilike`` operand for a case-insensitive substring ``literal``."""
    return "*" + _escape_like(literal) + "*"


def ilike_pattern(pattern: str) -> str:
    """The ``ilike`` operand for a caller's LIKE ``pattern`` (``%``/``_`` wildcards, ``\\``).

    The pattern already speaks SQL's LIKE; only ``*``, which PostgREST would widen to ``%``, is
    narrowed to ``_`` and re-checked on the client.
    """
    out: list[str] = []
    chars = iter(pattern)
    for char in chars:
        if char == "\\":
            escaped = next(chars, "\\")
            # ``\*`` is a literal star: on the wire it can only be the wildcard ``_``.
            out.append("_" if escaped == "*" else "\\" + escaped)
        else:
            out.append("_" if char == "*" else char)
    return "".join(out)


def filter_params(flt: Filter) -> tuple[str, str]:
    """One ``(column, operator.value)`` query parameter for ``flt``."""
    column, op, value = flt.column, flt.op, flt.value
    if column in RESERVED_PARAMETERS:
        raise ValueError(f"column {column!r} collides with a PostgREST query parameter")
    if op in _SCALAR_OPS:
        return column, f"{_SCALAR_OPS[op]}.{encode_scalar(value)}"
    if op is Op.IN:
        if len(value) == 1:
            # PostgREST reads the one-element list ("") as an empty list, which matches
            # nothing; eq has no such special case.
            return column, f"eq.{encode_scalar(value[0])}"
        return column, f"in.{in_list(value)}"
    if op is Op.IS_NULL:
        return column, "is.null" if value else "not.is.null"
    if op is Op.ICONTAINS:
        return column, f"ilike.{icontains_pattern(value)}"
    if op is Op.IEQ:
        return column, f"ilike.{ieq_pattern(value)}"
    if op is Op.ILIKE:
        return column, f"ilike.{ilike_pattern(value)}"
    raise ValueError(f"operator {op!r} has no PostgREST translation")


def needs_client_check(flt: Filter) -> bool:
    """True when the server-side filter for ``flt`` is wider than ``flt`` (a literal ``*``)."""
    return flt.op in (Op.ICONTAINS, Op.ILIKE, Op.IEQ) and "*" in flt.value


def order_param(order: Sequence[Order]) -> str:
    """The ``order`` value: the requested keys with PostgreSQL's NULL placement, then ``id``."""
    terms = [
        f"{o.column}.desc.nullsfirst" if o.descending else f"{o.column}.asc.nullslast"
        for o in order
    ]
    if "id" not in {o.column for o in order}:
        terms.append("id.asc")
    return ",".join(terms)


def select_param(columns: Sequence[str] | None, extra: Iterable[str] = ()) -> str:
    """The ``select`` value: ``columns`` plus ``extra`` ones, each once, or ``*`` for all."""
    if columns is None:
        return "*"
    return ",".join(dict.fromkeys([*columns, *extra]))


def encode_query_string(params: Sequence[tuple[str, str]]) -> bytes:
    """``params`` as a query string in which every reserved byte is percent-encoded."""
    return "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in params).encode("ascii")


_CONTENT_RANGE = re.compile(r"(?:(\d+)-(\d+)|\*)/(\d+|\*)")


class ContentRange:
    """A parsed ``Content-Range`` header: ``first``/``last`` row (or ``None``) and ``total``."""

    __slots__ = ("first", "last", "total")

    def __init__(self, first: int | None, last: int | None, total: int | None) -> None:
        self.first = first
        self.last = last
        self.total = total

    def __repr__(self) -> str:
        return f"ContentRange(first={self.first}, last={self.last}, total={self.total})"


def parse_content_range(header: str | None) -> ContentRange | None:
    """Parse ``0-24/3573458``, ``*/0`` or ``0-24/*``; ``None`` when absent or malformed."""
    if header is None:
        return None
    match = _CONTENT_RANGE.fullmatch(header.strip())
    if match is None:
        return None
    first, last, total = match.groups()
    return ContentRange(
        None if first is None else int(first),
        None if last is None else int(last),
        None if total == "*" else int(total),
    )
