"""Query value objects: what callers ask for, validated once, on construction.

Backends translate these objects; they never see a raw string from a user or an LLM as
anything but a bound value. Example::

    Query("leads", filters=(Filter("company_name", Op.ICONTAINS, "acme"),), limit=50)
"""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import math
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from persistence.errors import InvalidQueryError

__all__ = [
    "IDENTIFIER_PATTERN",
    "MAX_IN_VALUES",
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

Scalar = str | int | float | bool | decimal.Decimal | dt.date | dt.datetime | dt.time | uuid.UUID
_SCALAR_TYPES = (str, int, float, bool, decimal.Decimal, dt.date, dt.datetime, dt.time, uuid.UUID)
# A lone surrogate is what undecodable bytes become (``surrogateescape``); no UTF-8 store holds it.
_SURROGATE = re.compile("[\ud800-\udfff]")
# PostgreSQL's LIMIT and OFFSET are bigint: a larger page window is a mistake, refused as one.
_MAX_COUNT = 2**63 - 1


def is_identifier(name: object) -> bool:
    """True when ``name`` is a ``str`` that matches :data:`IDENTIFIER_PATTERN` exactly."""
    return type(name) is str and IDENTIFIER_PATTERN.fullmatch(name) is not None


def _check_identifier(name: object, what: str) -> str:
    if not is_identifier(name):
        raise InvalidQueryError(
            f"{what} {name!r} is not a valid identifier: use lower-case ASCII letters, digits "
            "and '_', starting with a letter or '_', at most 63 characters",
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


def _check_scalar(value: object, column: str) -> Scalar:
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
    if isinstance(value, str) and len(value) > MAX_TEXT_VALUE_LENGTH:
        raise InvalidQueryError(
            f"filter on {column!r} has a text value of {len(value)} characters; at most "
            f"{MAX_TEXT_VALUE_LENGTH}",
            field="value",
        )
    if isinstance(value, str) and "\x00" in value:
        raise InvalidQueryError(f"filter on {column!r} has a NUL character", field="value")
    if isinstance(value, str) and _SURROGATE.search(value):
        raise InvalidQueryError(
            f"filter on {column!r} has a lone surrogate (text that is not valid Unicode)",
            field="value",
        )
    return value


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
        try:
            op = Op(self.op)
        except ValueError:
            known = ", ".join(o.value for o in Op)
            raise InvalidQueryError(
                f"unknown operator {self.op!r}; expected one of {known}", field="op"
            ) from None
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "value", self._checked_value(op))

    def _checked_value(self, op: Op) -> Any:
        value = self.value
        if op is Op.IS_NULL:
            if type(value) is not bool:
                raise InvalidQueryError(
                    f"is_null on {self.column!r} takes True or False, not {value!r}", field="value"
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


def _check_count(value: object, name: str, *, optional: bool) -> None:
    if value is None and optional:
        return
    if type(value) is not int or not 0 <= value <= _MAX_COUNT:
        raise InvalidQueryError(
            f"{name} must be an integer from 0 to 2**63-1, not {value!r}", field=name
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
            columns = tuple(self.columns)
            if not columns:
                raise InvalidQueryError(
                    "columns, when given, must name at least one column", field="columns"
                )
            for column in columns:
                _check_identifier(column, "column")
            object.__setattr__(self, "columns", columns)
        order = tuple(Order(o) if isinstance(o, str) else o for o in self.order)
        for item in order:
            if not isinstance(item, Order):
                raise InvalidQueryError(
                    f"order must be Order objects or column names, not {type(item).__name__}",
                    field="order",
                )
        object.__setattr__(self, "order", order)
        _check_count(self.limit, "limit", optional=True)
        _check_count(self.offset, "offset", optional=False)

    def referenced_columns(self) -> frozenset[str]:
        """Every column the query names, for policy and schema checks."""
        names = {f.column for f in self.filters} | {o.column for o in self.order}
        names.update(self.columns or ())
        return frozenset(names)


_QUERY_FIELDS = ("table", "filters", "columns", "order", "limit", "offset")


def _new_query(
    table: str,
    filters: tuple[Filter, ...],
    columns: tuple[str, ...] | None,
    order: tuple[Order, ...],
    limit: int | None,
    offset: int,
) -> Query:
    """A ``Query`` of parts that passed its checks already (the facade's read plans), without
    running them again: a dozen identifier matches per read of a wide table."""
    query = object.__new__(Query)
    for name, value in zip(
        _QUERY_FIELDS, (table, filters, columns, order, limit, offset), strict=True
    ):
        object.__setattr__(query, name, value)
    return query


@dataclass(frozen=True, slots=True)
class Page:
    """One page of rows and the number of rows matching the filters (not the page length).

    With related rows (``facade.read(..., include=...)``), ``related_capped`` is true when the
    total bound on child rows cut at least one child list (see :mod:`persistence.relations`).
    """

    rows: list[dict[str, Any]] = field(default_factory=list)
    total_count: int = 0
    related_capped: bool = False
