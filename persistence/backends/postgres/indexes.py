"""Which index serves which filter: the one rule ``rag-agent doctor`` reports by and the
PostgreSQL backend plans its reads by. Pure functions over catalog facts (no I/O, no psycopg).

An index serves a filter when it is valid, not partial, of the right access method, and its key
is the column (the *leading* key, for a btree), the exact ``lower(col)`` expression, or the
column with the trigram operator class; index names are never trusted.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Collection, Iterable
from typing import NamedTuple

from persistence.query import Filter, Op

__all__ = [
    "IndexFacts",
    "IndexKey",
    "IndexKind",
    "index_kind",
    "served_lookups",
    "serving_index",
    "unique_columns",
    "unique_lookup",
    "unserved",
]


class IndexKey(NamedTuple):
    """One key of an index: ``column`` for a plain column (else ``None``), ``expression`` as
    PostgreSQL prints it (``email``, ``lower(email)``), and its operator class."""

    column: str | None
    expression: str
    opclass: str


class IndexFacts(NamedTuple):
    """An index of a table: access method (``btree``, ``gin``...), its keys in order, whether
    it is valid (built and usable) and partial (has a ``WHERE``)."""

    table: str
    name: str
    method: str
    keys: tuple[IndexKey, ...]
    valid: bool
    partial: bool
    #: A ``UNIQUE`` index (a primary key's among them): no two rows share its key.
    unique: bool = False


class IndexKind(enum.StrEnum):
    """The three index shapes the generated SQL needs."""

    BTREE = "btree"
    LOWER_BTREE = "btree on lower()"
    TRIGRAM = "gin_trgm_ops"


_KIND_OF_OP = {
    Op.EQ: IndexKind.BTREE,
    Op.IN: IndexKind.BTREE,
    Op.GT: IndexKind.BTREE,
    Op.GTE: IndexKind.BTREE,
    Op.LT: IndexKind.BTREE,
    Op.LTE: IndexKind.BTREE,
    Op.IS_NULL: IndexKind.BTREE,
    Op.IEQ: IndexKind.LOWER_BTREE,
    Op.ICONTAINS: IndexKind.TRIGRAM,
    Op.ILIKE: IndexKind.TRIGRAM,
}


def index_kind(flt: Filter) -> IndexKind | None:
    """The index shape that could serve ``flt`` as the backend writes it (``None``: none can,
    as for ``neq``)."""
    return _KIND_OF_OP.get(flt.op)


def unserved(filters: Iterable[Filter], served: Collection[tuple[str, IndexKind]]) -> bool:
    """Whether there are ``filters`` and no index serves any of them (``served``: the table's
    :func:`served_lookups`): the reads whose statement probes (see ``_pg_sql``)."""
    kinds = [(f.column, index_kind(f)) for f in filters]
    return bool(kinds) and not any(kind in served for kind in kinds)


def _is_lower_of(expression: str, column: str) -> bool:
    # pg_get_indexdef prints lower(email), lower((email)::text) for varchar, or quotes a name.
    name = re.escape(column)
    pattern = rf'lower\((?:\(?"?{name}"?\)?(?:::text)?)\)'
    return re.fullmatch(pattern, expression.replace(" ", "")) is not None


def _serves(index: IndexFacts, column: str, kind: IndexKind) -> bool:
    leading = index.keys[0]
    if kind is IndexKind.BTREE:
        return index.method == "btree" and leading.column == column
    if kind is IndexKind.LOWER_BTREE:
        return (
            index.method == "btree"
            and leading.column is None
            and _is_lower_of(leading.expression, column)
        )
    return any(
        key.column == column
        and (index.method, key.opclass) in {("gin", "gin_trgm_ops"), ("gist", "gist_trgm_ops")}
        for key in index.keys
    )


def _usable(indexes: Iterable[IndexFacts]) -> Iterable[IndexFacts]:
    return (i for i in indexes if i.valid and not i.partial and i.keys)


def serving_index(
    table: str, column: str, kind: IndexKind, indexes: Iterable[IndexFacts]
) -> str | None:
    """The name of an index of ``table`` that serves a ``kind`` lookup on ``column``."""
    for index in _usable(indexes):
        if index.table == table and _serves(index, column, kind):
            return index.name
    return None


def unique_columns(table: str, indexes: Iterable[IndexFacts]) -> frozenset[str]:
    """The columns of ``table`` no two rows share a value of: the single plain-column key of a
    valid, whole-table ``UNIQUE`` btree (a primary key's). NULLs may repeat, but no comparison
    matches NULL, so an equality on such a column matches at most one row."""
    return frozenset(
        index.keys[0].column
        for index in _usable(indexes)
        if index.table == table
        and index.unique
        and index.method == "btree"
        and len(index.keys) == 1
        and index.keys[0].column is not None
    )


def unique_lookup(filters: Iterable[Filter], unique: Collection[str]) -> bool:
    """Whether ``filters`` hold an equality on one of the ``unique`` columns (see
    :func:`unique_columns`), so that at most one row matches them all."""
    return any(f.op is Op.EQ and f.column in unique for f in filters)


def served_lookups(
    table: str, columns: Iterable[str], indexes: Iterable[IndexFacts]
) -> frozenset[tuple[str, IndexKind]]:
    """Every ``(column, kind)`` of ``table``'s ``columns`` that one of ``indexes`` serves."""
    mine = [i for i in _usable(indexes) if i.table == table]
    return frozenset(
        (column, kind)
        for column in columns
        for kind in IndexKind
        if any(_serves(index, column, kind) for index in mine)
    )
