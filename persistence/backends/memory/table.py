"""The memory store's compact table: one tuple per row, a shared column layout, hash indexes.

A dict per row costs about 1.6 KB for a twelve-column lead; a tuple in the table's column order
costs a fifth of the container, and the column names live once, in the :class:`Layout`. Short
text and integers that repeat (a status, a company name, a campaign id) are interned per column,
so a million rows share a few thousand objects; a column whose values turn out to be nearly all
distinct (an email, an id) stops being interned, so the pool never costs more than it saves.

Indexes make equality O(1): rows are held by ``id`` (the primary key), and an indexed column
maps each text value, folded as :func:`~persistence.values.like.fold_case` folds it, to the
ids holding it — one map serves ``eq`` (the candidates are re-checked exactly) and ``ieq``.
Other filters, and ``icontains``, scan.

Not thread-safe by itself: :class:`~persistence.backends.memory.MemoryStore` calls it under its
lock. Tuples are immutable and the id-ordered snapshot list is replaced, never changed, so a
reader holding a snapshot filters it without the lock.
"""

from __future__ import annotations

import copy
import datetime as dt
import decimal
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from persistence.values.column_kinds import ColumnType
from persistence.values.like import fold_case

__all__ = ["Layout", "RowView", "Table", "copy_value", "id_key"]

Values = tuple[Any, ...]
_IMMUTABLE = (
    str,
    int,
    float,
    bool,
    type(None),
    decimal.Decimal,
    dt.date,
    dt.datetime,
    dt.time,
    uuid.UUID,
)
_PLAIN = frozenset(_IMMUTABLE)  # exact types: one set lookup instead of ten isinstance checks
#: A column's interning pool is dropped once it holds this many strings and more than half as
#: many as the table has rows: its values are mostly distinct, sharing them saves nothing.
_POOL_PROBATION = 65_536


def copy_value(value: Any) -> Any:
    """``value`` itself when immutable (most are), else a deep copy: callers may mutate rows."""
    if type(value) in _PLAIN or isinstance(value, _IMMUTABLE):
        return value
    return copy.deepcopy(value)


def id_key(values: Values) -> tuple[str, Any]:
    """The sort key of a row in ``id`` order (``id`` is always position 0)."""
    value = values[0]
    return (type(value).__name__, value)


class Layout:
    """A table's columns in order and each one's position in a row tuple (``id`` first)."""

    __slots__ = ("columns", "positions")

    def __init__(self, columns: tuple[str, ...]) -> None:
        self.columns = columns
        self.positions = {column: i for i, column in enumerate(columns)}

    def as_dict(self, values: Values, columns: tuple[str, ...] | None = None) -> dict[str, Any]:
        """A fresh dict of ``columns`` (all by default; an unknown one is ``None``), values
        copied where mutable."""
        if columns is None:
            columns = self.columns
        positions, plain = self.positions, _PLAIN
        row = {c: None if (i := positions.get(c)) is None else values[i] for c in columns}
        for column, value in row.items():
            if type(value) not in plain:
                row[column] = copy_value(value)
        return row


class RowView(Mapping[str, Any]):
    """A read-only mapping over one row tuple, for code written against dict rows (search,
    aggregates, relations): no copy, so never hand it to a caller."""

    __slots__ = ("_layout", "_values")

    def __init__(self, layout: Layout, values: Values) -> None:
        self._layout = layout
        self._values = values

    def get(self, key: str, default: Any = None) -> Any:
        i = self._layout.positions.get(key)
        return default if i is None else self._values[i]

    def __getitem__(self, key: str) -> Any:
        return self._values[self._layout.positions[key]]

    def __iter__(self) -> Iterator[str]:
        return iter(self._layout.columns)

    def __len__(self) -> int:
        return len(self._values)


class Table:
    """One table's rows (see the module docstring); ``types`` is replaced, never mutated."""

    __slots__ = ("by_id", "indexes", "layout", "next_id", "pools", "snapshot", "types")

    def __init__(self, types: Mapping[str, ColumnType], indexed: tuple[str, ...]) -> None:
        self.types = types
        self.layout = Layout(_id_first(types))
        self.by_id: dict[Any, Values] = {}
        self.next_id = 1
        self.snapshot: list[Values] | None = None
        # column -> folded text -> one id, or a list of ids when several rows share the value.
        self.indexes: dict[str, dict[str, Any]] = {c: {} for c in indexed}
        # position -> interning pool; None once the column proved to be mostly distinct.
        self.pools: dict[int, dict[Any, Any] | None] = {}

    def row(self, key: Any) -> dict[str, Any] | None:
        """The row with id ``key`` as a plain dict (values shared: copy before handing out)."""
        values = self.by_id.get(key)
        return None if values is None else dict(zip(self.layout.columns, values, strict=True))

    def ordered(self) -> list[Values]:
        """Every row tuple in ``id`` order: a list shared until the next write."""
        if self.snapshot is None:
            self.snapshot = sorted(self.by_id.values(), key=id_key)
        return self.snapshot

    def relayout(self, types: Mapping[str, ColumnType]) -> None:
        """Adopt ``types`` (the old columns plus learned ones): rows widen with NULLs."""
        self.types = types
        layout = Layout(_id_first(types))
        extra = (None,) * (len(layout.columns) - len(self.layout.columns))
        self.layout = layout
        if extra:
            self.by_id = {key: values + extra for key, values in self.by_id.items()}
            self.snapshot = None

    def put(self, row: Mapping[str, Any]) -> None:
        """Store ``row`` (all of its columns known to the layout) under its id, replacing and
        unindexing any row with that id."""
        key = row["id"]
        old = self.by_id.get(key)
        if old is not None:
            self._unindex(old)
        values = tuple(self._shared(i, row.get(c)) for i, c in enumerate(self.layout.columns))
        self.by_id[key] = values
        self._index(values)
        self.snapshot = None

    def remove(self, key: Any) -> None:
        """Forget the row with id ``key`` (present)."""
        self._unindex(self.by_id.pop(key))
        self.snapshot = None

    def candidates(self, column: str, value: Any) -> list[Values] | None:
        """The rows that may hold ``value`` in ``column`` (a superset of the ``eq`` and ``ieq``
        matches, in ``id`` order), or ``None`` when no index answers (then scan)."""
        if column == "id":
            try:
                found = self.by_id.get(value)
            except TypeError:  # an unhashable value equals no key
                return []
            return [] if found is None else [found]
        index = self.indexes.get(column)
        if index is None or not isinstance(value, str):
            return None
        ids = index.get(fold_case(value))
        if ids is None:
            return []
        if not isinstance(ids, list):
            return [self.by_id[ids]]
        return sorted((self.by_id[i] for i in ids), key=id_key)

    def _shared(self, position: int, value: Any) -> Any:
        kind = type(value)
        # Exact types only: a bool is no int here, and a str subclass keeps its class.
        if not ((kind is str and len(value) <= 64) or kind is int):
            return value
        pool = self.pools.get(position, {})
        if pool is None:
            return value
        found = pool.get(value)
        if found is not None:
            return found
        pool[value] = value
        if len(pool) == 1:
            self.pools[position] = pool
        elif len(pool) > _POOL_PROBATION and len(pool) * 2 > len(self.by_id):
            self.pools[position] = None
        return value

    def _index(self, values: Values) -> None:
        for index, key in self._keys(values):
            held = index.get(key)
            if held is None:
                index[key] = values[0]
            elif isinstance(held, list):
                held.append(values[0])
            else:
                index[key] = [held, values[0]]

    def _unindex(self, values: Values) -> None:
        for index, key in self._keys(values):
            held = index.get(key)
            if isinstance(held, list):
                held.remove(values[0])
                if len(held) == 1:
                    index[key] = held[0]
            elif held is not None:
                del index[key]

    def _keys(self, values: Values) -> Iterator[tuple[dict[str, Any], str]]:
        """Each index, with the key ``values`` has in it: its column's text, case-folded."""
        positions = self.layout.positions
        for column, index in self.indexes.items():
            i = positions.get(column)
            text = None if i is None else values[i]
            if isinstance(text, str):
                folded = fold_case(text)
                # Keep one string where folding changes nothing (an email usually).
                yield index, text if folded == text else folded


def _id_first(types: Mapping[str, ColumnType]) -> tuple[str, ...]:
    columns = tuple(types)
    if "id" not in types:
        return ("id", *columns)
    return ("id", *(c for c in columns if c != "id"))
