"""Column types and value coercion: one rule per type, the same on every backend.

A filter value is converted to the Python type of its column before any backend sees it, so
``"42"`` on a ``bigint`` column, ``"6F1C…"`` on a ``uuid`` column or ``"2025-03-01"`` on a
``timestamptz`` column mean the same thing on memory, PostgreSQL and PostgREST. A value that cannot
be converted is an :class:`~persistence.errors.InvalidQueryError` (``field="value"``) naming the
column and its type; the server is never left to guess, and no backend answers differently.

>>> from persistence.types import column_type, coerce_value
>>> coerce_value("42", column_type("int8"), table="leads", column="id")
42
>>> coerce_value("2025-03-01", column_type("timestamp with time zone"), table="leads",
...              column="created_at")
datetime.datetime(2025, 3, 1, 0, 0, tzinfo=datetime.timezone.utc)

The rules, per :class:`ColumnKind` (strings are stripped of surrounding ASCII whitespace first,
except for ``text``):

* ``uuid`` → :class:`uuid.UUID`: a ``UUID``, or 32 hex digits, hyphenated 8-4-4-4-12 or not,
  optionally in braces, any case.
* ``integer`` → ``int`` within the column's range (``smallint`` 16, ``integer`` 32, ``bigint`` 64
  bits): an ``int``, an integral ``float``/``Decimal``, or optionally signed ASCII decimal digits.
  ``bool`` is refused; so are ``"42.0"``, ``"1e3"``, ``"1_000"`` (PostgreSQL refuses them too).
* ``numeric`` → :class:`~decimal.Decimal`: ``int``, ``Decimal``, ``float`` (as its shortest repr:
  ``0.1`` is ``Decimal("0.1")``), or a decimal string; finite and within PostgreSQL's numeric range.
* ``float`` (``real``, ``double precision``) → ``float``: finite numbers and decimal strings.
* ``boolean`` → ``bool``: ``True``/``False``, the ints ``0``/``1``, and (any case) ``true false
  t f yes no y n on off 1 0``.
* ``date`` → :class:`~datetime.date`: a ``date``, ``YYYY-MM-DD``, or a ``datetime`` (object or ISO
  string) whose time is exactly midnight (its date as written, whatever its zone).
* ``timestamptz`` → an aware ``datetime`` in UTC. **A naive value is taken as UTC** (PostgreSQL
  would read it in the session's ``TimeZone``, which differs per server; Python cannot compare it
  with an aware value at all). A ``date`` is midnight UTC.
* ``timestamp`` → a naive ``datetime``. **An aware value is converted to UTC and its zone dropped**
  (PostgreSQL would drop the zone without converting, silently moving the instant).
* ``time`` → a naive :class:`~datetime.time`: ``HH:MM[:SS[.ffffff]]`` or a ``time`` without zone.
* ``text`` (``text``, ``varchar``, ``char``, ``name``, ``citext``, enums) → ``str``, unchanged;
  anything but a ``str`` is refused (see :func:`coerce_value` for why).
* ``json`` and ``other`` (arrays, ``timetz``, ``interval``, ``inet``, unknown types): unchanged;
  the server decides.

Timestamp strings are ISO 8601 as PostgreSQL also reads them: ``YYYY-MM-DD``, then optionally
``T``/``t``/space and ``HH:MM[:SS[.ffffff]]``, then optionally ``Z`` or ``±HH[[:]MM[[:]SS]]`` (at
most ±15:59:59). Every string this module accepts for a non-text kind, PostgreSQL's own input
function accepts with the same value, except that we strip whitespace around a uuid (PostgreSQL
refuses it) and convert an offset on a ``timestamp`` to UTC (PostgreSQL ignores it); the
reverse does not hold: locale formats, week dates, ``24:00``, hex integers and the like are refused.

Thread-safety: pure functions over immutable values; :func:`column_type` keeps a bounded cache.
"""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import functools
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from persistence.errors import InvalidQueryError
from persistence.query import Filter, Op

__all__ = [
    "MAX_NUMERIC_DIGITS",
    "MAX_VALUE_LENGTH",
    "ColumnKind",
    "ColumnType",
    "coerce_filter",
    "coerce_value",
    "column_kind",
    "column_type",
]

#: A string longer than this is refused for every kind but ``text``, before it is parsed.
MAX_VALUE_LENGTH = 1024
#: A ``numeric`` value with more significant digits than this is refused.
MAX_NUMERIC_DIGITS = 1000


class ColumnKind(enum.StrEnum):
    """The closed set of kinds a column's type maps to; each has one coercion rule."""

    UUID = "uuid"
    INTEGER = "integer"
    NUMERIC = "numeric"
    FLOAT = "float"
    BOOLEAN = "boolean"
    DATE = "date"
    TIMESTAMP = "timestamp"
    TIMESTAMPTZ = "timestamptz"
    TIME = "time"
    TEXT = "text"
    JSON = "json"
    OTHER = "other"


_BITS_BY_KIND: dict[ColumnKind, tuple[int, ...]] = {
    ColumnKind.INTEGER: (16, 32, 64),
    ColumnKind.FLOAT: (32, 64),
}


@dataclass(frozen=True, slots=True)
class ColumnType:
    """A column's type: its :class:`ColumnKind`, a name for messages, and a bit width.

    ``name`` is the SQL spelling used in error messages (``"bigint"``, ``"timestamptz"``...;
    for ``other`` the type as given). ``bits`` is 16/32/64 for ``integer``, 32/64 for ``float``,
    ``None`` otherwise. Build one with :func:`column_type`; ``ColumnType(ColumnKind.UUID, "uuid")``
    works too.
    """

    kind: ColumnKind
    name: str
    bits: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", ColumnKind(self.kind))
        allowed = _BITS_BY_KIND.get(self.kind)
        if (self.bits is None) != (allowed is None) or (allowed and self.bits not in allowed):
            raise ValueError(f"a {self.kind} column type cannot have bits={self.bits!r}")

    @property
    def is_text(self) -> bool:
        """True for ``text`` kinds: the only ones ``icontains``/``ilike`` apply to."""
        return self.kind is ColumnKind.TEXT


_K = ColumnKind
_UUID = ColumnType(_K.UUID, "uuid")
_INT2 = ColumnType(_K.INTEGER, "smallint", 16)
_INT4 = ColumnType(_K.INTEGER, "integer", 32)
_INT8 = ColumnType(_K.INTEGER, "bigint", 64)
_NUMERIC = ColumnType(_K.NUMERIC, "numeric")
_FLOAT4 = ColumnType(_K.FLOAT, "real", 32)
_FLOAT8 = ColumnType(_K.FLOAT, "double precision", 64)
_BOOL = ColumnType(_K.BOOLEAN, "boolean")
_DATE = ColumnType(_K.DATE, "date")
_TIMESTAMP = ColumnType(_K.TIMESTAMP, "timestamp")
_TIMESTAMPTZ = ColumnType(_K.TIMESTAMPTZ, "timestamptz")
_TIME = ColumnType(_K.TIME, "time")
_TEXT = ColumnType(_K.TEXT, "text")
_VARCHAR = ColumnType(_K.TEXT, "varchar")
_CHAR = ColumnType(_K.TEXT, "char")

# Every spelling of the three vocabularies: pg_type.typname, SQL DDL, PostgREST OpenAPI formats.
_NAMES: dict[str, ColumnType] = {
    "uuid": _UUID,
    "int2": _INT2,
    "smallint": _INT2,
    "smallserial": _INT2,
    "serial2": _INT2,
    "int4": _INT4,
    "int": _INT4,
    "integer": _INT4,
    "serial": _INT4,
    "serial4": _INT4,
    "int8": _INT8,
    "bigint": _INT8,
    "bigserial": _INT8,
    "serial8": _INT8,
    "numeric": _NUMERIC,
    "decimal": _NUMERIC,
    "float4": _FLOAT4,
    "real": _FLOAT4,
    "float8": _FLOAT8,
    "float": _FLOAT8,
    "double precision": _FLOAT8,
    "bool": _BOOL,
    "boolean": _BOOL,
    "date": _DATE,
    "timestamp": _TIMESTAMP,
    "timestamp without time zone": _TIMESTAMP,
    "timestamptz": _TIMESTAMPTZ,
    "timestamp with time zone": _TIMESTAMPTZ,
    "time": _TIME,
    "time without time zone": _TIME,
    "timetz": ColumnType(_K.OTHER, "timetz"),
    "time with time zone": ColumnType(_K.OTHER, "timetz"),
    "text": _TEXT,
    "varchar": _VARCHAR,
    "character varying": _VARCHAR,
    "char varying": _VARCHAR,
    "bpchar": _CHAR,
    "char": _CHAR,
    "character": _CHAR,
    "name": ColumnType(_K.TEXT, "name"),
    "citext": ColumnType(_K.TEXT, "citext"),
    "json": ColumnType(_K.JSON, "json"),
    "jsonb": ColumnType(_K.JSON, "jsonb"),
}
_MAX_WORDS = max(name.count(" ") + 1 for name in _NAMES)
# Type modifiers ("(20)", "(10, 2)", "(3)") carry nothing coercion needs, except float(p).
_MODIFIER = re.compile(r"\s*\(([^)]*)\)")


@functools.lru_cache(maxsize=1024)
def column_type(type_name: str, *, category: str | None = None) -> ColumnType:
    """The :class:`ColumnType` for a type name as a catalog, a DDL or PostgREST spells it.

    Understands ``pg_type.typname`` (``int8``, ``timestamptz``, ``bpchar``...), SQL DDL (trailing
    constraints and modifiers ignored: ``"bigint generated by default as identity primary key"``,
    ``"character varying(20) not null"``, ``"timestamp(3) with time zone"``) and PostgREST's
    OpenAPI ``format`` (``"timestamp with time zone"``, ``"double precision"``...). Arrays
    (``int4[]``, ``_int4``, ``integer array``) and anything unknown are ``other``.

    ``category`` is ``pg_type.typcategory`` where known: ``'E'`` (enum) and ``'S'`` (string, e.g. a
    domain over text) are ``text``; ``'A'`` (array) is ``other``. PostgREST callers may pass
    ``'E'`` for a property that lists ``enum`` values.

    >>> column_type("character varying(20)")
    ColumnType(kind=<ColumnKind.TEXT: 'text'>, name='varchar', bits=None)
    """
    if category == "A":
        return ColumnType(_K.OTHER, type_name)
    spelled = " ".join(type_name.lower().split())
    if spelled.startswith("pg_catalog."):
        spelled = spelled[len("pg_catalog.") :]
    if "[" in spelled or spelled.endswith(" array") or " array " in spelled:
        return ColumnType(_K.OTHER, type_name)
    modifier = _MODIFIER.search(spelled)
    words = _MODIFIER.sub("", spelled).split()
    for size in range(min(_MAX_WORDS, len(words)), 0, -1):
        found = _NAMES.get(" ".join(words[:size]))
        if found is not None:
            if found is _FLOAT8 and words[0] == "float" and modifier:
                # SQL float(p): real up to 24 binary digits of precision, double above.
                precision = modifier.group(1).strip()
                if precision.isdigit() and int(precision) <= 24:
                    return _FLOAT4
            return found
    if category in ("E", "S"):
        return ColumnType(_K.TEXT, type_name)
    return ColumnType(_K.OTHER, type_name)


def column_kind(type_name: str, *, category: str | None = None) -> ColumnKind:
    """The :class:`ColumnKind` of a type name (see :func:`column_type`)."""
    return column_type(type_name, category=category).kind


# --- coercion -------------------------------------------------------------------------------------


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
    if isinstance(value, str) and len(value) > 60:
        return f"a {len(value)}-character string"
    shown = repr(value)
    return shown if len(shown) <= 60 else f"{shown[:57]}..."


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
    a text column (otherwise ``InvalidQueryError`` with ``field="op"``). The same ``Filter`` is
    returned when nothing changed, so a second pass costs no allocation.

    >>> coerce_filter(Filter("id", Op.IN, ["7", 8]), column_type("bigint"), table="leads")
    Filter(column='id', op=<Op.IN: 'in'>, value=(7, 8))
    """
    op = flt.op
    if op is Op.IS_NULL:
        return flt
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
    return Filter(column, op, value)
