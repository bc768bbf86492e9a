"""Query value objects: what callers ask for, validated once, on construction.

Backends translate these objects; they never see a raw string from a user or an LLM as
anything but a bound value. Example::

    Query("leads", filters=(Filter("company_name", Op.ICONTAINS, "acme"),), limit=50)
"""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import itertools
import math
import re
import uuid
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from persistence.errors import InvalidQueryError, brief_repr

__all__ = [
    "IDENTIFIER_PATTERN",
    "MAX_COLUMNS",
    "MAX_IN_VALUES",
    "MAX_NUMBER_DIGITS",
    "MAX_ORDER_KEYS",
    "MAX_TEXT_VALUE_LENGTH",
    "Filter",
    "Op",
    "Order",
    "Page",
    "Query",
    "is_identifier",
]

#: Table and column names: lower-case ASCII, at most 63 characters (PostgreSQL's limit).
IDENTIFIER_PATTERN = re.compile(r"[a-z_][a-z0-9_]{0,62}")
#: An ``IN`` list longer than this is refused: it is a mistake or an attack, not a lookup (and
#: 1,000 UUIDs already make a 37 KB PostgREST URL, near what servers accept).
MAX_IN_VALUES = 1_000
#: A text value (each ``IN`` item too) longer than this is refused before any backend sees it:
#: no e-mail (254), name or title comes near it, and on PostgreSQL a 200 KB literal held a pooled
#: connection for the whole statement timeout.
MAX_TEXT_VALUE_LENGTH = 4_096
#: An integer or decimal value with more digits than this is refused: no id, amount or count
#: comes near it, Python refuses to print an integer past 4,300 digits (so no message could
#: show it), and comparing or hashing a 100,000-digit number is real work on every row.
MAX_NUMBER_DIGITS = 1_000
#: A read naming more distinct columns than this is refused (no table of the schema has half).
MAX_COLUMNS = 256
#: More sort keys than this are refused: the id tie-breaker makes every order total already, so
#: further keys change nothing a reader can see, while the memory backend compared rows by each
#: of them (20,000 keys cost 20 s of CPU in one call).
MAX_ORDER_KEYS = 4

Scalar = str | int | float | bool | decimal.Decimal | dt.date | dt.datetime | dt.time | uuid.UUID
_SCALAR_TYPES = (str, int, float, bool, decimal.Decimal, dt.date, dt.datetime, dt.time, uuid.UUID)
# A lone surrogate is what undecodable bytes become (``surrogateescape``); no UTF-8 store holds it.
_SURROGATE = re.compile("[\ud800-\udfff]")
# Bits of the smallest integer of MAX_NUMBER_DIGITS + 1 digits, less one: 10**1000 has 3,322.
_MAX_NUMBER_BITS: int = (10**MAX_NUMBER_DIGITS).bit_length() - 1
# A decimal exponent past this (1e-10000, 1e10000) is no business value either.
_MAX_EXPONENT = 2 * MAX_NUMBER_DIGITS
# PostgreSQL's LIMIT and OFFSET are bigint: a larger page window is a mistake, refused as one.
_MAX_COUNT = 2**63 - 1


def is_identifier(name: object) -> bool:
    """True when ``name`` is a ``str`` that matches :data:`IDENTIFIER_PATTERN` exactly."""
    return type(name) is str and IDENTIFIER_PATTERN.fullmatch(name) is not None


def _check_identifier(name: object, what: str) -> str:
    if not is_identifier(name):
        raise InvalidQueryError(
            f"{what} {brief_repr(name)} is not a valid identifier: use lower-case ASCII "
            "letters, digits and '_', starting with a letter or '_', at most 63 characters",
            field=what,
        )
    return name  # type: ignore[return-value]


class Op(enum.StrEnum):
    """Filter operators, with SQL semantics on every backend.

    ``ICONTAINS`` takes literal text (the backend escapes it); ``ILIKE`` takes a pattern in which
    ``%`` and ``_`` are wildcards and ``\\`` escapes; ``IEQ`` is case-insensitive equality with
    literal text (PostgreSQL ``lower(col) = lower(value)``, which a ``lower(col)`` index serves).
    NULL never matches a comparison.
    """

    EQ = "eq"
    NEQ = "neq"
    GT = "gt"
    GTE = "gte"
    LT = "lt"
    LTE = "lte"
    IN = "in"
    IS_NULL = "is_null"
    ICONTAINS = "icontains"
    ILIKE = "ilike"
    IEQ = "ieq"


# Scalars with no check past their type (no digits, length or characters to bound).
_PLAIN_SCALARS = frozenset({uuid.UUID, dt.date, dt.datetime, dt.time})


def _check_scalar(value: object, column: str) -> Scalar:
    kind = type(value)
    # The common values first, with the checks their type needs alone (every filter of every
    # read is checked here); any other takes the full sequence below, in its order.
    if kind is str:
        return _check_text(value, column)  # type: ignore[arg-type]
    if kind in _PLAIN_SCALARS:
        return value  # type: ignore[return-value]
    if value is None:
        raise InvalidQueryError(
            f"filter on {column!r} compares with None, which never matches in SQL; "
            "use Op.IS_NULL instead",
            field="value",
        )
    if not isinstance(value, _SCALAR_TYPES):
        raise InvalidQueryError(
            f"filter on {column!r} has a value of type {type(value).__name__}; expected one of "
            "str, int, float, bool, Decimal, date, datetime, time or UUID",
            field="value",
        )
    # Decimal NaN/Infinity too: Python refuses to order a NaN Decimal (InvalidOperation).
    if (isinstance(value, float) and not math.isfinite(value)) or (
        isinstance(value, decimal.Decimal) and not value.is_finite()
    ):
        raise InvalidQueryError(f"filter on {column!r} has a non-finite float", field="value")
    if _too_many_digits(value):
        raise InvalidQueryError(
            f"filter on {column!r} has a number of more than {MAX_NUMBER_DIGITS} digits",
            field="value",
        )
    if isinstance(value, str):
        return _check_text(value, column)
    return value


def _check_text(value: str, column: str) -> str:
    if len(value) > MAX_TEXT_VALUE_LENGTH:
        raise InvalidQueryError(
            f"filter on {column!r} has a text value of {len(value)} characters; at most "
            f"{MAX_TEXT_VALUE_LENGTH}",
            field="value",
        )
    if "\x00" in value:
        raise InvalidQueryError(f"filter on {column!r} has a NUL character", field="value")
    if _SURROGATE.search(value):
        raise InvalidQueryError(
            f"filter on {column!r} has a lone surrogate (text that is not valid Unicode)",
            field="value",
        )
    return value


def _too_many_digits(value: object) -> bool:
    if isinstance(value, int) and not isinstance(value, bool):
        # By bit length: counting decimal digits would print the number (or raise past 4,300).
        return abs(value).bit_length() > _MAX_NUMBER_BITS
    if isinstance(value, decimal.Decimal):
        digits = value.as_tuple()
        return len(digits.digits) > MAX_NUMBER_DIGITS or abs(int(digits.exponent)) > _MAX_EXPONENT
    return False


def _ends_with_lone_escape(pattern: str) -> bool:
    trailing = len(pattern) - len(pattern.rstrip("\\"))
    return trailing % 2 == 1


@dataclass(frozen=True, slots=True)
class Filter:
    """One condition: ``column op value``. ``Filter("email", Op.EQ, "a@x.io")``."""

    column: str
    op: Op
    value: Any

    def __post_init__(self) -> None:
        _check_identifier(self.column, "column")
        op = self.op
        if type(op) is not Op:  # an Op is taken as it is; any other value is looked up
            try:
                op = Op(op)
            except ValueError:
                known = ", ".join(o.value for o in Op)
                raise InvalidQueryError(
                    f"unknown operator {self.op!r}; expected one of {known}", field="op"
                ) from None
            object.__setattr__(self, "op", op)
        value = self._checked_value(op)
        if value is not self.value:  # an ``in`` list becomes a tuple; a scalar is kept
            object.__setattr__(self, "value", value)

    def _checked_value(self, op: Op) -> Any:
        value = self.value
        if op is Op.IS_NULL:
            if type(value) is not bool:
                raise InvalidQueryError(
                    f"is_null on {self.column!r} takes True or False, not {brief_repr(value)}",
                    field="value",
                )
            return value
        if op is Op.IN:
            if isinstance(value, str | bytes | Mapping) or not isinstance(
                value, Sequence | set | frozenset
            ):
                raise InvalidQueryError(
                    f"in on {self.column!r} takes a list of values, not {type(value).__name__}",
                    field="value",
                )
            values = tuple(value)
            if not values:
                raise InvalidQueryError(
                    f"in on {self.column!r} needs at least one value", field="value"
                )
            if len(values) > MAX_IN_VALUES:
                raise InvalidQueryError(
                    f"in on {self.column!r} has {len(values)} values; at most {MAX_IN_VALUES}",
                    field="value",
                )
            return tuple(_check_scalar(v, self.column) for v in values)
        if op in (Op.ICONTAINS, Op.ILIKE, Op.IEQ) and not isinstance(value, str):
            raise InvalidQueryError(
                f"{op.value} on {self.column!r} takes text, not {type(value).__name__}",
                field="value",
            )
        if op is Op.ILIKE and _ends_with_lone_escape(value):
            raise InvalidQueryError(
                f"ilike pattern on {self.column!r} ends with a lone escape character '\\'",
                field="value",
            )
        return _check_scalar(value, self.column)


@dataclass(frozen=True, slots=True)
class Order:
    """Sort key. NULLs sort last ascending and first descending, as in PostgreSQL."""

    column: str
    descending: bool = False

    def __post_init__(self) -> None:
        _check_identifier(self.column, "column")
        if type(self.descending) is not bool:
            raise InvalidQueryError("Order.descending must be a bool", field="descending")


def _distinct_columns(given: Iterable[Any]) -> tuple[Any, ...]:
    """``given`` without repeats, in order: a repeated name projects nothing new, and thousands
    of repeats cost 100 ms of projection per read. Refused past :data:`MAX_COLUMNS` distinct
    names, counted before any name is checked."""
    distinct: dict[Any, None] = {}
    for name in given:
        if not isinstance(name, Hashable):
            _check_identifier(name, "column")  # raises: no identifier is unhashable
        distinct[name] = None
        if len(distinct) > MAX_COLUMNS:
            raise InvalidQueryError(
                f"columns names more than {MAX_COLUMNS} columns", field="columns"
            )
    return tuple(distinct)


def _checked_order(given: Any) -> tuple[Order, ...]:
    """``given`` as sort keys: at most :data:`MAX_ORDER_KEYS`, each column once (a repeated
    column can never break a tie the first did not), counted before anything else is checked."""
    if isinstance(given, str | bytes) or not isinstance(given, Iterable):
        raise InvalidQueryError(
            f"order must be a sequence of sort keys, not {type(given).__name__}", field="order"
        )
    # One key past the bound is enough to refuse: a huge or endless iterable is never read whole.
    keys = tuple(itertools.islice(given, MAX_ORDER_KEYS + 1))
    if len(keys) > MAX_ORDER_KEYS:
        raise InvalidQueryError(
            f"order has more than {MAX_ORDER_KEYS} sort keys; at most {MAX_ORDER_KEYS}",
            field="order",
        )
    order = tuple(Order(o) if isinstance(o, str) else o for o in keys)
    seen: set[str] = set()
    for item in order:
        if not isinstance(item, Order):
            raise InvalidQueryError(
                f"order must be Order objects or column names, not {type(item).__name__}",
                field="order",
            )
        if item.column in seen:
            raise InvalidQueryError(
                f"order names column {item.column!r} twice; each sort key once", field="order"
            )
        seen.add(item.column)
    return order


def _check_count(value: object, name: str, *, optional: bool) -> None:
    if value is None and optional:
        return
    if type(value) is not int or not 0 <= value <= _MAX_COUNT:
        raise InvalidQueryError(
            f"{name} must be an integer from 0 to 2**63-1, not {brief_repr(value)}", field=name
        )


def _check_flag(value: object, name: str) -> None:
    if type(value) is not bool:
        raise InvalidQueryError(
            f"{name} must be True or False, not {brief_repr(value)}", field=name
        )


@dataclass(frozen=True, slots=True)
class Query:
    """A read: table, filters (ANDed), projected columns, order, and a page window.

    Pages are deterministic: every backend sorts by ``id`` after the requested order.
    """

    table: str
    filters: tuple[Filter, ...] = ()
    columns: tuple[str, ...] | None = None
    order: tuple[Order, ...] = ()
    limit: int | None = None
    offset: int = 0
    #: ``False``: the total may be counted only up to the page's end plus one row (see
    #: :attr:`Page.total_exact`), which spares a count of every match on a large table.
    exact_total: bool = True

    def __post_init__(self) -> None:
        _check_identifier(self.table, "table")
        filters = tuple(self.filters)
        for flt in filters:
            if not isinstance(flt, Filter):
                raise InvalidQueryError(
                    f"filters must be Filter objects, not {type(flt).__name__}", field="filters"
                )
        object.__setattr__(self, "filters", filters)
        if self.columns is not None:
            if isinstance(self.columns, str):
                raise InvalidQueryError(
                    "columns must be a sequence of names, not a str", field="columns"
                )
            columns = _distinct_columns(self.columns)
            if not columns:
                raise InvalidQueryError(
                    "columns, when given, must name at least one column", field="columns"
                )
            for column in columns:
                _check_identifier(column, "column")
            object.__setattr__(self, "columns", columns)
        order = _checked_order(self.order)
        object.__setattr__(self, "order", order)
        _check_count(self.limit, "limit", optional=True)
        _check_count(self.offset, "offset", optional=False)
        _check_flag(self.exact_total, "exact_total")

    @property
    def counts_every_match(self) -> bool:
        """Whether the total must be exact: asked so, or no page bound to count up to."""
        return self.exact_total or self.limit is None

    @property
    def count_bound(self) -> int | None:
        """How far a bounded total counts: the page's end plus one row, which tells whether
        another page follows; ``None`` when every match is counted."""
        if self.counts_every_match:
            return None
        assert self.limit is not None
        return self.offset + self.limit + 1

    def referenced_columns(self) -> frozenset[str]:
        """Every column the query names, for policy and schema checks."""
        names = {f.column for f in self.filters} | {o.column for o in self.order}
        names.update(self.columns or ())
        return frozenset(names)


_QUERY_FIELDS = ("table", "filters", "columns", "order", "limit", "offset", "exact_total")


def _new_query(
    table: str,
    filters: tuple[Filter, ...],
    columns: tuple[str, ...] | None,
    order: tuple[Order, ...],
    limit: int | None,
    offset: int,
    exact_total: bool = True,
) -> Query:
    """A ``Query`` of parts that passed its checks already (the facade's read plans), without
    running them again: a dozen identifier matches per read of a wide table."""
    query = object.__new__(Query)
    for name, value in zip(
        _QUERY_FIELDS, (table, filters, columns, order, limit, offset, exact_total), strict=True
    ):
        object.__setattr__(query, name, value)
    return query


#: The operators whose value ``Filter`` checks only as a scalar (no text, list or flag rule).
_SCALAR_OPS = frozenset({Op.EQ, Op.NEQ, Op.GT, Op.GTE, Op.LT, Op.LTE})
#: Types no scalar check can refuse: not None, not a number with digits to count or a float to
#: test, not text with a length, NUL or surrogate to look for.
_ALWAYS_VALID = frozenset({uuid.UUID, dt.date, dt.datetime, dt.time, bool})


def _replaced_value(flt: Filter, value: Any) -> Filter:
    """``Filter(flt.column, flt.op, value)``; without running its checks again when they cannot
    refuse it (``flt`` passed them, and ``value`` is of a type no scalar check refuses under an
    operator that checks nothing else), the coerced value of every read by uuid or date."""
    if flt.op in _SCALAR_OPS and type(value) in _ALWAYS_VALID:
        new = object.__new__(Filter)
        object.__setattr__(new, "column", flt.column)
        object.__setattr__(new, "op", flt.op)
        object.__setattr__(new, "value", value)
        return new
    return Filter(flt.column, flt.op, value)


@dataclass(frozen=True, slots=True)
class Page:
    """One page of rows and the number of rows matching the filters (not the page length).

    With related rows (``facade.read(..., include=...)``), ``related_capped`` is true when the
    total bound on child rows cut at least one child list (see :mod:`persistence.relations`).
    """

    rows: list[dict[str, Any]] = field(default_factory=list)
    total_count: int = 0
    related_capped: bool = False
    #: ``False`` when ``total_count`` is a lower bound: a read with ``exact_total=False`` counts
    #: the matches only up to ``offset + limit + 1``. It is still exact whenever it is below that
    #: bound, and it exceeds ``offset + len(rows)`` exactly when more rows follow the page.
    total_exact: bool = True
