"""The in-memory backend's store: ``MemoryStore`` (typed tables of compact rows, hash indexes,
atomic writes, write versions) and the column types of its ``schema=``."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from persistence.backends.memory.table import Layout, RowView, Table, Values, copy_value
from persistence.errors import BackendError, ConfigurationError
from persistence.schema import TABLE_TYPES
from persistence.values.coerce import coerce_value
from persistence.values.column_kinds import ColumnKind, ColumnType, column_type

Row = dict[str, Any]
Types = Mapping[str, ColumnType]
#: The type of a column named without one, or first seen on write: values are kept as given.
UNTYPED = ColumnType(ColumnKind.OTHER, "untyped")
#: The columns indexed when ``indexes=`` is not given: every table's ``email``.
DEFAULT_INDEXED = ("email",)


def _copy_row(row: Mapping[str, Any]) -> Row:
    # Rows are mostly scalars; deep-copying only what is mutable keeps reads of big pages cheap.
    return {k: copy_value(v) for k, v in row.items()}


def _typed(table: str, columns: Iterable[str] | Mapping[str, str | ColumnType]) -> Types:
    """One table of a ``schema=`` argument as column -> type (``UNTYPED`` where none is given)."""
    if isinstance(columns, str):
        raise ConfigurationError(
            f"schema[{table!r}] must list column names or map them to type names, not a str"
        )
    if isinstance(columns, Mapping):
        for name, type_name in columns.items():
            if not isinstance(type_name, str | ColumnType):
                raise ConfigurationError(
                    f"schema[{table!r}][{name!r}] must be a type name such as 'bigint' or a "
                    f"ColumnType, not {type_name!r}"
                )
        return MappingProxyType(
            {
                name: t if isinstance(t, ColumnType) else column_type(t)
                for name, t in columns.items()
            }
        )
    return MappingProxyType(dict.fromkeys(columns, UNTYPED))


class MemoryStore:
    """Tables of rows in process memory. Thread-safe; see the module docstring.

    ``schema`` maps each table to its columns: either their names (untyped), or a mapping from name
    to PostgreSQL type name (``"uuid"``, ``"bigint"``, ``"numeric(12, 2)"``, ``"timestamptz"``...;
    see :func:`persistence.values.types.column_type`) or a
    :class:`~persistence.values.types.ColumnType` (an enum:
    :func:`persistence.values.types.enum_type`). The default is the reference schema's types
    (:data:`persistence.schema.TABLE_TYPES`); ``persistence.schema.SUPABASE_STYLE.types`` is a
    uuid-keyed one. A column first seen on write is learned, untyped. A table whose ``id`` is a
    ``uuid`` gets a random one (as ``gen_random_uuid()``) for a row written without it; otherwise
    the next integer.

    ``indexes`` maps a table to the text columns to index for equality (``eq`` and ``ieq``, both
    O(1) instead of a scan; each costs about 40 bytes a row); a table it does not name gets its
    ``email`` column indexed (:data:`DEFAULT_INDEXED`), and ``{"leads": ()}`` indexes nothing.
    ``id`` is always a hash lookup.

    ``name`` says what the store holds (the CLI names its sample store ``"sample"``); envelopes
    read through it name it as their ``backend.database``.
    """

    def __init__(
        self,
        schema: Mapping[str, Iterable[str] | Mapping[str, str | ColumnType]] = TABLE_TYPES,
        *,
        indexes: Mapping[str, Iterable[str]] | None = None,
        name: str | None = None,
    ) -> None:
        if not isinstance(schema, Mapping):
            raise ConfigurationError(
                f"schema= must map table names to columns, not {type(schema).__name__}"
            )
        self._schema = {table: _typed(table, columns) for table, columns in schema.items()}
        self._indexes = _indexed(indexes)
        self._lock = threading.RLock()
        self._tables: dict[str, Table] = {}
        # Kept through clear(): a version never goes back.
        self._versions: dict[str, int] = {}
        #: What the store holds, in a word (``"sample"``): the database an envelope names.
        self.name = name

    def clear(self) -> None:
        """Remove every row and learned column (ids start again at 1)."""
        with self._lock:
            for table in self._tables:
                self._bump(table)
            self._tables.clear()

    def version(self, table: str) -> int:
        """A number that grows with every change to ``table``'s rows (0 before the first).

        Insert, upsert, delete and :meth:`clear` move it, whoever calls them; it never
        decreases. Cheap (no copy), and read under the store's lock: a version read before
        :meth:`rows` is never newer than the rows.
        """
        with self._lock:
            return self._versions.get(table, 0)

    def _bump(self, table: str) -> None:
        self._versions[table] = self._versions.get(table, 0) + 1

    def tables(self) -> frozenset[str]:
        """Tables with a schema or at least one write."""
        with self._lock:
            return frozenset(self._schema) | frozenset(self._tables)

    def columns(self, table: str) -> tuple[str, ...]:
        """Known columns of ``table`` (empty when the store has never heard of it)."""
        return tuple(self.column_types(table))

    def column_types(self, table: str) -> Types:
        """Known columns of ``table`` and their types (``UNTYPED`` for learned ones), in order;
        empty when the store has never heard of the table. A read-only view."""
        existing = self._tables.get(table)  # one dict read: no lock needed
        if existing is not None:
            return existing.types
        return self._schema.get(table, _NO_TYPES)

    def rows(self, table: str) -> list[Row]:
        """Every row of ``table`` in ``id`` order, as new dicts of every known column (a copy
        of the whole table: for tests and exports, not for queries)."""
        layout, ordered = self._snapshot(table)
        with self._lock:
            state = self._tables.get(table)
            columns = tuple(state.types) if state is not None else ()
        return [layout.as_dict(values, columns) for values in ordered]

    def _snapshot(self, table: str) -> tuple[Layout, list[Values]]:
        """The layout and every row tuple in ``id`` order (shared: never mutate the list)."""
        with self._lock:
            state = self._tables.get(table)
            if state is None:
                return _EMPTY_LAYOUT, []
            return state.layout, state.ordered()

    def _candidates(
        self, table: str, column: str, value: Any
    ) -> tuple[Layout, list[Values]] | None:
        """The rows an index says may hold ``value`` in ``column`` (re-check them), or ``None``
        when no index answers."""
        with self._lock:
            state = self._tables.get(table)
            if state is None:
                return _EMPTY_LAYOUT, []
            found = state.candidates(column, value)
            return None if found is None else (state.layout, found)

    def _ids(self, table: str) -> set[Any]:
        """The ids of ``table``'s rows."""
        with self._lock:
            state = self._tables.get(table)
            return set() if state is None else set(state.by_id)

    def insert(self, table: str, rows: Sequence[Mapping[str, Any]]) -> list[Row]:
        """Insert all ``rows`` or none; a row without ``id`` gets the next integer."""
        return self._write(table, rows, None)

    def upsert(
        self, table: str, rows: Sequence[Mapping[str, Any]], on_conflict: str = "id"
    ) -> list[Row]:
        """Insert ``rows``; where ``on_conflict`` matches a row, update the given columns."""
        return self._write(table, rows, on_conflict)

    def _write(
        self, table: str, rows: Sequence[Mapping[str, Any]], on_conflict: str | None
    ) -> list[Row]:
        """Stage every row, then commit them together: a refused row leaves the table as it was.

        Without ``on_conflict`` (an insert) an ``id`` already present is a duplicate key.
        """
        with self._lock:
            state = self._state(table)
            staged: dict[Any, Row] = {}
            next_id = state.next_id
            for row in rows:
                new = _coerced_row(table, state.types, _copy_row(row))
                if on_conflict is not None:
                    existing = self._find(state, staged, on_conflict, new.get(on_conflict))
                    if existing is not None:
                        merged = {**existing, **new, "id": existing["id"]}
                        staged[merged["id"]] = merged
                        continue
                next_id = self._assign_id(state, staged, new, next_id)
                if on_conflict is None and (new["id"] in state.by_id or new["id"] in staged):
                    raise BackendError(
                        f"duplicate key: {table}.id = {new['id']!r} already exists",
                        backend="memory",
                        operation="insert",
                    )
                staged[new["id"]] = new
            self._commit(state, staged)
            if staged:
                self._bump(table)
            return [self._full_row(state, row) for row in staged.values()]

    def delete(self, table: str, predicate: Callable[[Mapping[str, Any]], bool]) -> int:
        """Delete rows for which ``predicate`` is true (given a read-only mapping of the row);
        return how many."""
        with self._lock:
            state = self._tables.get(table)
            if state is None:
                return 0
            layout = state.layout
            doomed = [k for k, values in state.by_id.items() if predicate(RowView(layout, values))]
            for key in doomed:
                state.remove(key)
            if doomed:
                self._bump(table)
            return len(doomed)

    def _state(self, table: str) -> Table:
        state = self._tables.get(table)
        if state is None:
            types = self._schema.get(table, MappingProxyType({"id": UNTYPED}))
            indexed = self._indexes.get(table, DEFAULT_INDEXED)
            state = self._tables[table] = Table(types, indexed)
        return state

    @staticmethod
    def _assign_id(state: Table, staged: dict[Any, Row], row: Row, next_id: int) -> int:
        """Give ``row`` an id when it has none: a random uuid for a ``uuid`` key, otherwise the
        next free integer; return the next integer candidate."""
        if row.get("id") is None:
            id_type = state.types.get("id")
            if id_type is not None and id_type.kind is ColumnKind.UUID:
                row["id"] = uuid.uuid4()
                return next_id
            while next_id in state.by_id or next_id in staged:
                next_id += 1
            row["id"] = next_id
        return next_id

    @staticmethod
    def _find(state: Table, staged: dict[Any, Row], column: str, value: Any) -> Row | None:
        if value is None:
            return None
        if column == "id":
            return staged.get(value) or state.row(value)
        for row in staged.values():
            if row.get(column) == value:
                return row
        found = state.candidates(column, value)  # an index narrows the search, or None: scan
        if found is not None and len(found) > 1:
            found = None  # several candidates: the first in write order wins, as a scan finds
        position = state.layout.positions.get(column)
        if position is None:
            return None
        for values in state.by_id.values() if found is None else found:
            if values[position] == value:
                return state.row(values[0])
        return None

    @staticmethod
    def _commit(state: Table, staged: dict[Any, Row]) -> None:
        types = state.types
        learned = {c: UNTYPED for row in staged.values() for c in row if c not in types}
        if learned:
            state.relayout(MappingProxyType({**types, **learned}))
        for key, row in staged.items():
            state.put(row)
            if type(key) is int and key >= state.next_id:
                state.next_id = key + 1

    @staticmethod
    def _full_row(state: Table, row: Row) -> Row:
        return _copy_row({column: row.get(column) for column in state.types})


_NO_TYPES: Types = MappingProxyType({})
_EMPTY_LAYOUT = Layout(("id",))


def _indexed(indexes: Mapping[str, Iterable[str]] | None) -> dict[str, tuple[str, ...]]:
    if indexes is None:
        return {}
    if not isinstance(indexes, Mapping):
        raise ConfigurationError(
            f"indexes= must map table names to columns, not {type(indexes).__name__}"
        )
    checked = {}
    for table, columns in indexes.items():
        if isinstance(columns, str) or not all(isinstance(c, str) for c in columns):
            raise ConfigurationError(f"indexes[{table!r}] must list column names")
        checked[table] = tuple(c for c in columns if c != "id")  # id is always a hash lookup
    return checked


def _coerced_row(table: str, types: Types, row: Row) -> Row:
    """``row`` with each value converted to its column's type (NULL and untyped ones as given)."""
    for column, value in row.items():
        ctype = types.get(column)
        if value is not None and ctype is not None and ctype.kind is not ColumnKind.OTHER:
            row[column] = coerce_value(value, ctype, table=table, column=column)
    return row
