"""Column types and value coercion: one rule per type, the same on every backend.

A filter value is converted to the Python type of its column before any backend sees it, so
``"42"`` on a ``bigint`` column, ``"6F1C…"`` on a ``uuid`` column or ``"2025-03-01"`` on a
``timestamptz`` column mean the same thing on memory, PostgreSQL and PostgREST. A value that cannot
be converted is an :class:`~persistence.errors.InvalidQueryError` (``field="value"``) naming the
column and its type; the server is never left to guess, and no backend answers differently.

>>> from persistence.values.types import column_type, coerce_value
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

from persistence.values.coerce import coerce_filter, coerce_filters, coerce_value
from persistence.values.column_kinds import (
    MAX_NUMERIC_DIGITS,
    MAX_VALUE_LENGTH,
    ColumnKind,
    ColumnType,
    column_kind,
    column_type,
    enum_type,
)

__all__ = [
    "MAX_NUMERIC_DIGITS",
    "MAX_VALUE_LENGTH",
    "ColumnKind",
    "ColumnType",
    "coerce_filter",
    "coerce_filters",
    "coerce_value",
    "column_kind",
    "column_type",
    "enum_type",
]
