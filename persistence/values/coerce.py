"""Value coercion: one rule per column kind, the same on every backend.

The public names are re-exported by :mod:`persistence.values.types`, whose docstring gives the
rules.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NoReturn

from persistence.errors import InvalidQueryError, brief_repr
from persistence.query import Filter, Op, _replaced_value
from persistence.values.column_kinds import (
    MAX_NUMERIC_DIGITS,
    MAX_VALUE_LENGTH,
    ColumnKind,
    ColumnType,
)
from persistence.values.enum_filters import enum_filter, exact_label

__all__ = ["coerce_filter", "coerce_filters", "coerce_value"]


class _Refused(Exception):
    """Raised by a coercer; :func:`coerce_value` turns it into an ``InvalidQueryError``."""

    def __init__(self, reason: str = "") -> None:
        super().__init__(reason)
        self.reason = reason


_WHITESPACE = " \t\n\r\f\v"
_UTC = dt.UTC
_MIDNIGHT = dt.time(0)
_INT_RANGES = {bits: (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) for bits in (16, 32, 64)}
_NUMERIC_INT_LIMIT = 10**MAX_NUMERIC_DIGITS
# PostgreSQL numeric: at most 131072 digits before the decimal point and 16383 after.
_NUMERIC_MAX_ADJUSTED = 131071
_NUMERIC_MIN_EXPONENT = -16383
_MAX_OFFSET = dt.timedelta(hours=15, minutes=59, seconds=59)
_TRUE = frozenset({"true", "t", "yes", "y", "on", "1"})
_FALSE = frozenset({"false", "f", "no", "n", "off", "0"})
# fromisoformat alone also takes week dates, basic format, any separator, ',' fractions and
# truncates a 7th fractional digit PostgreSQL would round: the shape is checked first.
_TIME_PART = r"[0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]{1,6})?)?"
_TIMESTAMP_SHAPE = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}"
    rf"(?:[Tt ]{_TIME_PART}(?:Z|[+-][0-9]{{2}}(?::?[0-9]{{2}}(?::?[0-9]{{2}})?)?)?)?",
    re.ASCII,
)
_TIME_SHAPE = re.compile(_TIME_PART, re.ASCII)


def _typed_text(value: str) -> str:
    """The stripped string of a non-text value, bounded before anything parses it."""
    if len(value) > MAX_VALUE_LENGTH:
        raise _Refused(f"longer than {MAX_VALUE_LENGTH} characters")
    return str.strip(value, _WHITESPACE)


def _to_uuid(value: Any, ctype: ColumnType) -> uuid.UUID:
    if type(value) is uuid.UUID:
        return value
    if isinstance(value, uuid.UUID):
        return uuid.UUID(int=value.int)
    if not isinstance(value, str):
        raise _Refused()
    text = _typed_text(value)
    if text[:1] == "{" and text[-1:] == "}":
        text = text[1:-1]
    if len(text) == 36 and text[8] == text[13] == text[18] == text[23] == "-":
        text = text.replace("-", "")
    # isalnum + isascii leaves [0-9A-Za-z]; int(..., 16) refuses g-z. int() alone would take
    # '_', signs and whitespace, uuid.UUID() alone 'urn:uuid:' and hyphens anywhere.
    if len(text) != 32 or not (text.isascii() and text.isalnum()):
        raise _Refused()
    return uuid.UUID(int=int(text, 16))


def _integral(value: Any) -> int:
    kind = type(value)
    if kind is int:
        return value  # type: ignore[no-any-return]
    if kind is bool:
        raise _Refused("a boolean is not a number here")
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not value.is_integer():  # also False for inf and nan
            raise _Refused()
        return int(value)
    if isinstance(value, decimal.Decimal):
        if not value.is_finite() or value != value.to_integral_value():
            raise _Refused()
        return int(value)
    if isinstance(value, str):
        text = _typed_text(value)
        # int() would also take '1_000' and non-ASCII digits ('٤٢').
        if not text.isascii() or "_" in text:
            raise _Refused()
        return int(text)
    raise _Refused()


def _to_integer(value: Any, ctype: ColumnType) -> int:
    number = _integral(value)
    low, high = _INT_RANGES[ctype.bits or 64]
    if not low <= number <= high:
        raise _Refused(f"out of range for {ctype.name} ({low} to {high})")
    return number


def _check_decimal(number: decimal.Decimal) -> decimal.Decimal:
    if not number.is_finite():
        raise _Refused("not finite")
    shape = number.as_tuple()
    if len(shape.digits) > MAX_NUMERIC_DIGITS:
        raise _Refused(f"more than {MAX_NUMERIC_DIGITS} digits")
    exponent = shape.exponent
    assert isinstance(exponent, int)  # finite, so never 'n'/'N'/'F'
    if number.adjusted() > _NUMERIC_MAX_ADJUSTED or exponent < _NUMERIC_MIN_EXPONENT:
        raise _Refused("outside numeric's range")
    return number


def _to_numeric(value: Any, ctype: ColumnType) -> decimal.Decimal:
    if type(value) is decimal.Decimal:
        return _check_decimal(value)
    if isinstance(value, bool):
        raise _Refused("a boolean is not a number here")
    if isinstance(value, int):
        if not -_NUMERIC_INT_LIMIT < value < _NUMERIC_INT_LIMIT:
            raise _Refused(f"more than {MAX_NUMERIC_DIGITS} digits")
        return decimal.Decimal(int(value))
    if isinstance(value, float):
        # repr is the shortest string that reads back as this float: what the caller wrote.
        return _check_decimal(decimal.Decimal(repr(value)))
    if isinstance(value, decimal.Decimal):
        return _check_decimal(decimal.Decimal(value))
    if isinstance(value, str):
        text = _typed_text(value)
        if not text.isascii() or "_" in text:
            raise _Refused()
        return _check_decimal(decimal.Decimal(text))
    raise _Refused()


def _to_float(value: Any, ctype: ColumnType) -> float:
    if type(value) is float:
        number = value
    elif isinstance(value, bool):
        raise _Refused("a boolean is not a number here")
    elif isinstance(value, int | float | decimal.Decimal):
        number = float(value)
    elif isinstance(value, str):
        text = _typed_text(value)
        if not text.isascii() or "_" in text:
            raise _Refused()
        number = float(text)
        if number == 0.0 and any(c in "123456789" for c in text.lower().partition("e")[0]):
            raise _Refused("too small for double precision")  # PostgreSQL refuses underflow
    else:
        raise _Refused()
    if number - number != 0.0:  # inf or nan, without a function call
        raise _Refused("not finite")
    return number


def _to_boolean(value: Any, ctype: ColumnType) -> bool:
    if value is True or value is False:
        return value
    if type(value) is int and (value == 0 or value == 1):
        return value == 1
    if isinstance(value, str) and len(value) <= MAX_VALUE_LENGTH:
        word = str.strip(value, _WHITESPACE).lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
    raise _Refused()


def _parse_timestamp(value: str) -> dt.datetime:
    text = _typed_text(value)
    if _TIMESTAMP_SHAPE.fullmatch(text) is None:
        raise _Refused()
    parsed = dt.datetime.fromisoformat(text)
    offset = parsed.utcoffset()
    if offset is not None and abs(offset) > _MAX_OFFSET:
        raise _Refused("its UTC offset is beyond ±15:59:59")
    return parsed


def _to_date(value: Any, ctype: ColumnType) -> dt.date:
    if type(value) is dt.date:
        return value
    if isinstance(value, str):
        text = _typed_text(value)
        if len(text) == 10:
            if _TIMESTAMP_SHAPE.fullmatch(text) is None:
                raise _Refused()
            return dt.date.fromisoformat(text)
        value = _parse_timestamp(text)
    if isinstance(value, dt.datetime):
        if value.time() != _MIDNIGHT:
            raise _Refused("it is not at midnight")
        return value.date()
    if isinstance(value, dt.date):
        return dt.date(value.year, value.month, value.day)
    raise _Refused()


def _to_datetime(value: Any) -> dt.datetime:
    if isinstance(value, dt.datetime):
        return value
    if isinstance(value, str):
        return _parse_timestamp(value)
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day)
    raise _Refused()


def _to_timestamptz(value: Any, ctype: ColumnType) -> dt.datetime:
    moment = _to_datetime(value)
    if moment.tzinfo is None:
        return moment.replace(tzinfo=_UTC)
    if moment.tzinfo is _UTC:
        return moment
    return moment.astimezone(_UTC)


def _to_timestamp(value: Any, ctype: ColumnType) -> dt.datetime:
    moment = _to_datetime(value)
    if moment.tzinfo is None:
        return moment
    return moment.astimezone(_UTC).replace(tzinfo=None)


def _to_time(value: Any, ctype: ColumnType) -> dt.time:
    if isinstance(value, str):
        text = _typed_text(value)
        if _TIME_SHAPE.fullmatch(text) is None:
            raise _Refused()
        return dt.time.fromisoformat(text)
    if isinstance(value, dt.time):
        if value.tzinfo is not None:
            raise _Refused("it has a time zone; time columns have none")
        return value
    raise _Refused()


def _to_text(value: Any, ctype: ColumnType) -> str:
    if type(value) is str:
        text: str = value
    elif isinstance(value, str):
        text = str.__str__(value)  # a StrEnum member: its plain value
    else:
        raise _Refused("pass it as a str")
    if "\x00" in text:
        raise _Refused("it contains a NUL character")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise _Refused("it contains a lone surrogate") from None
    return text


def _unchanged(value: Any, ctype: ColumnType) -> Any:
    return value


_COERCERS: dict[ColumnKind, Callable[[Any, ColumnType], Any]] = {
    ColumnKind.UUID: _to_uuid,
    ColumnKind.INTEGER: _to_integer,
    ColumnKind.NUMERIC: _to_numeric,
    ColumnKind.FLOAT: _to_float,
    ColumnKind.BOOLEAN: _to_boolean,
    ColumnKind.DATE: _to_date,
    ColumnKind.TIMESTAMP: _to_timestamp,
    ColumnKind.TIMESTAMPTZ: _to_timestamptz,
    ColumnKind.TIME: _to_time,
    ColumnKind.TEXT: _to_text,
    ColumnKind.JSON: _unchanged,
    ColumnKind.OTHER: _unchanged,
}
_NOUNS = {
    ColumnKind.UUID: "a uuid",
    ColumnKind.INTEGER: "an integer",
    ColumnKind.NUMERIC: "a number",
    ColumnKind.FLOAT: "a number",
    ColumnKind.BOOLEAN: "a boolean (true/false, t/f, yes/no, y/n, on/off, 1/0)",
    ColumnKind.DATE: "a date (YYYY-MM-DD)",
    ColumnKind.TIMESTAMP: "an ISO 8601 timestamp",
    ColumnKind.TIMESTAMPTZ: "an ISO 8601 timestamp",
    ColumnKind.TIME: "a time of day (HH:MM[:SS[.ffffff]])",
    ColumnKind.TEXT: "text",
}
# Operators whose value is text matched against text ("ieq" is the planned case-insensitive
# equality; naming it by value keeps this module independent of when it lands). Members, not
# values, so the per-call check is one hash look-up.
_TEXT_ONLY_OPS = frozenset(op for op in Op if op.value in {"icontains", "ilike", "ieq"})


def _shown(value: object) -> str:
    # Never repr() a caller's value whole: an integer past 4,300 digits raises ValueError there.
    return brief_repr(value)


def _refuse(value: object, ctype: ColumnType, table: str, column: str, reason: str) -> NoReturn:
    noun = _NOUNS.get(ctype.kind, ctype.kind.value)
    message = f"{table}.{column} is {ctype.name}; {_shown(value)} is not {noun}"
    if reason:
        message += f": {reason}"
    raise InvalidQueryError(message, field="value")


def coerce_value(value: Any, column_type: ColumnType, *, table: str, column: str) -> Any:
    """``value`` converted to the Python type of a ``column_type`` column (rules: module doc).

    Raises :class:`~persistence.errors.InvalidQueryError` (``field="value"``) naming
    ``table.column`` and the type when it cannot be converted, or when it is ``None`` (use
    ``Op.IS_NULL``). Idempotent: coercing a coerced value returns an equal value.

    Text columns take a ``str`` only. Stringifying ``42`` would guess (``"42"``? ``"42.0"``?
    and a ``UUID``'s case?), and the backends disagree on the unguessed value today:
    PostgreSQL refuses ``text = integer``, memory matches nothing, PostgREST matches ``'42'``.

    >>> coerce_value("abc", column_type("uuid"), table="leads", column="id")
    Traceback (most recent call last):
    ...
    persistence.errors.InvalidQueryError: leads.id is uuid; 'abc' is not a uuid
    """
    if value is None:
        raise InvalidQueryError(
            f"{table}.{column} compared with None, which never matches in SQL; use Op.IS_NULL",
            field="value",
        )
    if column_type.labels is not None:
        # Exactly a label, as PostgreSQL stores it; filters map other spellings first.
        return exact_label(value, column_type, table=table, column=column)
    try:
        return _COERCERS[column_type.kind](value, column_type)
    except _Refused as refused:
        _refuse(value, column_type, table, column, refused.reason)
    except (ValueError, TypeError, ArithmeticError):
        # int(), Decimal(), fromisoformat(), astimezone() on a value of the right shape but
        # not of the type (month 13, year 10000 after conversion...).
        _refuse(value, column_type, table, column, "")


def coerce_filter(flt: Filter, column_type: ColumnType, *, table: str) -> Filter:
    """``flt`` with its value coerced to ``column_type`` by :func:`coerce_value`.

    ``is_null`` is returned as is; ``in`` has each element coerced; ``icontains``/``ilike`` need
    a text column (otherwise ``InvalidQueryError`` with ``field="op"``). A filter on an enum
    column becomes an equality on its labels (:mod:`persistence.values.enum_filters`). The same
    ``Filter`` is returned when nothing changed, so a second pass costs no allocation.

    >>> coerce_filter(Filter("id", Op.IN, ["7", 8]), column_type("bigint"), table="leads")
    Filter(column='id', op=<Op.IN: 'in'>, value=(7, 8))
    """
    op = flt.op
    if op is Op.IS_NULL:
        return flt
    if column_type.labels is not None:
        return enum_filter(flt, column_type, table=table)
    if op in _TEXT_ONLY_OPS and column_type.kind is not ColumnKind.TEXT:
        raise InvalidQueryError(
            f"{op.value} on {table}.{flt.column} needs a text column, not {column_type.name}",
            field="op",
        )
    column = flt.column
    if op is Op.IN:
        values = flt.value
        coerced = tuple(coerce_value(v, column_type, table=table, column=column) for v in values)
        if all(new is old for new, old in zip(coerced, values, strict=True)):
            return flt
        return Filter(column, op, coerced)
    value = coerce_value(flt.value, column_type, table=table, column=column)
    if value is flt.value:
        return flt
    return _replaced_value(flt, value)


def coerce_filters(
    table: str, filters: Iterable[Filter], types: Mapping[str, ColumnType]
) -> tuple[Filter, ...]:
    """Every filter coerced to its column's type in ``types`` by :func:`coerce_filter`.

    A column missing from ``types``, or of kind ``other`` (untyped in memory; arrays, ``inet``...
    elsewhere), keeps its filter as given: the backend, or the server, decides. This is the one
    rule the facade and the backends share.

    >>> coerce_filters("leads", [Filter("id", Op.EQ, "7")], {"id": column_type("bigint")})
    (Filter(column='id', op=<Op.EQ: 'eq'>, value=7),)
    """
    coerced = []
    for flt in filters:
        ctype = types.get(flt.column)
        if ctype is not None and ctype.kind is not ColumnKind.OTHER:
            flt = coerce_filter(flt, ctype, table=table)
        coerced.append(flt)
    return tuple(coerced)
