"""Column kinds: what a catalog, a DDL or PostgREST calls a type, in one closed vocabulary.

The public names are re-exported by :mod:`persistence.values.types`, whose docstring gives the
rules.
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "MAX_NUMERIC_DIGITS",
    "MAX_VALUE_LENGTH",
    "ColumnKind",
    "ColumnType",
    "column_kind",
    "column_type",
    "enum_type",
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
    """A column's type: its :class:`ColumnKind`, a name for messages, a bit width, and an
    enum's labels.

    ``name`` is the SQL spelling used in error messages (``"bigint"``, ``"timestamptz"``...;
    for ``other`` the type as given). ``bits`` is 16/32/64 for ``integer``, 32/64 for ``float``,
    ``None`` otherwise. ``labels`` is set for a PostgreSQL enum (``create type ... as enum``):
    its labels in declaration order (``pg_enum.enumsortorder``), on a ``text`` kind; ``None``
    for every other type. Build one with :func:`column_type` or :func:`enum_type`;
    ``ColumnType(ColumnKind.UUID, "uuid")`` works too.
    """

    kind: ColumnKind
    name: str
    bits: int | None = None
    labels: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", ColumnKind(self.kind))
        allowed = _BITS_BY_KIND.get(self.kind)
        if (self.bits is None) != (allowed is None) or (allowed and self.bits not in allowed):
            raise ValueError(f"a {self.kind} column type cannot have bits={self.bits!r}")
        if self.labels is not None:
            labels = tuple(self.labels)
            if self.kind is not ColumnKind.TEXT or not labels:
                raise ValueError("enum labels need a text kind and at least one label")
            if not all(type(label) is str for label in labels) or len(set(labels)) != len(labels):
                raise ValueError(f"enum labels must be distinct strings, not {labels!r}")
            object.__setattr__(self, "labels", labels)

    @property
    def is_enum(self) -> bool:
        """True for a PostgreSQL enum: values are one of :attr:`labels`."""
        return self.labels is not None

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


def enum_type(name: str, labels: Iterable[str]) -> ColumnType:
    """The type of a column of the enum ``name`` with ``labels`` in declaration order.

    >>> enum_type("lead_status", ["new", "qualified"]).labels
    ('new', 'qualified')
    """
    return ColumnType(ColumnKind.TEXT, name, labels=tuple(labels))


def column_kind(type_name: str, *, category: str | None = None) -> ColumnKind:
    """The :class:`ColumnKind` of a type name (see :func:`column_type`)."""
    return column_type(type_name, category=category).kind
