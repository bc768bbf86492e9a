"""The in-memory backend: the embedded default and the test double for other people's tests.

``MemoryStore`` holds tables of rows; ``MemoryBackend`` serves queries over a store with the same
semantics as PostgreSQL (checked by a differential test): NULL never matches a comparison,
``icontains`` is a literal case-insensitive substring, ``ilike`` takes ``%``/``_`` wildcards and
``\\`` escapes, ``ieq`` is equality after PostgreSQL's ``lower()`` on both sides (see
:func:`persistence.backends._like.fold_case` for the folding and where it can differ), NULLs
sort last ascending and first descending, ``id`` breaks ties.

Columns are typed: a store's schema gives each column a PostgreSQL type (the reference schema's by
default), and every value written is converted to its column's type as PostgreSQL would store it
(:func:`persistence.types.coerce_value`): ``"42"`` on a ``bigint`` column is stored as ``42``,
``"2025-03-01T10:00:00Z"`` on a ``timestamptz`` column as an aware ``datetime``. A value that
cannot be converted is an ``InvalidQueryError`` and the write changes nothing. Columns named
without a type, and columns first seen on write, are untyped: their values are stored as given.

Storage is compact (:mod:`persistence.backends._memory_table`): a tuple per row in the table's
column order, repeated short text shared, about 380 MiB for a million twelve-column leads.
Equality on ``id``, and ``eq``/``ieq`` on an indexed text column (every ``email`` column by
default; see ``indexes=``), is a hash lookup; every other filter scans.

Thread-safety: a store is safe to share between threads. Writes take the store's lock and
replace row tuples rather than mutating them, so a reader filters a consistent snapshot without
holding the lock. Rows are deep-copied in and out: a caller mutating a row it wrote or read
changes nothing stored.

Example::

    store = MemoryStore()
    agent = create_persistence_agent(kind="memory", store=store)
    agent.write("leads", {"email": "a@x.io"})          # gets id 1
    typed = MemoryStore(schema={"events": {"id": "uuid", "at": "timestamptz"}})
"""

from __future__ import annotations

import decimal
import operator
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from persistence._coerce import coerce_filters, coerce_value
from persistence._column_kinds import ColumnKind, ColumnType, column_type
from persistence._options import check_options
from persistence._read_only import refuse_write
from persistence.aggregate import AggregateResult, Metric
from persistence.backends._aggregate_rows import aggregate_rows
from persistence.backends._inline_async import InlineAsyncReads
from persistence.backends._like import text_predicate
from persistence.backends._memory_search import search_rows, vector_cache
from persistence.backends._memory_table import Layout, RowView, Table, Values, copy_value
from persistence.capabilities import Capabilities
from persistence.errors import BackendError, ConfigurationError
from persistence.query import Filter, Op, Order, Page, Query
from persistence.relations import (
    RelatedPlan,
    Relation,
    check_relations,
    fetch_columns,
    parent_keys,
    read_with_related,
)
from persistence.schema import REFERENCE, TABLE_TYPES
from persistence.search import SearchRequest, SearchResult
from persistence.search.embedder import Embedder

__all__ = ["UNTYPED", "MemoryBackend", "MemoryStore", "create_backend", "default_store"]

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

    ``schema`` maps each table to its columns: either their names (untyped), or a mapping from
    name to PostgreSQL type name (``"uuid"``, ``"bigint"``, ``"numeric(12, 2)"``,
    ``"timestamptz"``...; see :func:`persistence.types.column_type`) or a
    :class:`~persistence.types.ColumnType` (an enum: :func:`persistence.types.enum_type`). The
    default is the
    reference schema's types (:data:`persistence.schema.TABLE_TYPES`);
    ``persistence.schema.SUPABASE_STYLE.types`` is a uuid-keyed one. A column first seen on
    write is learned, untyped. A table whose ``id`` is a ``uuid`` gets a random one (as
    ``gen_random_uuid()``) for a row written without it; otherwise the next integer.

    ``indexes`` maps a table to the text columns to index for equality (``eq`` and ``ieq``, both
    O(1) instead of a scan; each costs about 40 bytes a row); a table it does not name gets its
    ``email`` column indexed (:data:`DEFAULT_INDEXED`), and ``{"leads": ()}`` indexes nothing.
    ``id`` is always a hash lookup.
    """

    def __init__(
        self,
        schema: Mapping[str, Iterable[str] | Mapping[str, str | ColumnType]] = TABLE_TYPES,
        *,
        indexes: Mapping[str, Iterable[str]] | None = None,
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


_DEFAULT_STORE = MemoryStore()


def default_store() -> MemoryStore:
    """The process-wide store that ``kind="memory"`` factories share unless given ``store=``."""
    return _DEFAULT_STORE


# --- query evaluation ------------------------------------------------------------------------


def _compare(op: Op, left: Any, right: Any) -> bool:
    if (type(left) is bool) is not (type(right) is bool):
        # Python says True == 1; SQL has no boolean-integer comparison: never a match.
        return False
    try:
        if op is Op.EQ:
            return bool(left == right)
        if op is Op.NEQ:
            return bool(left != right)
        if op is Op.GT:
            return bool(left > right)
        if op is Op.GTE:
            return bool(left >= right)
        if op is Op.LT:
            return bool(left < right)
        return bool(left <= right)
    except TypeError:  # values of incomparable types never match
        return False


def _predicate(flt: Filter, get: Callable[[Any], Any] | None = None) -> Callable[[Any], bool]:
    """The row test for ``flt``; ``get`` reads its column from a row (a getter of the store's
    row tuples; by default ``row.get(column)`` on a mapping)."""
    op, value = flt.op, flt.value
    if get is None:
        get = operator.methodcaller("get", flt.column)
    if op is Op.IS_NULL:
        want_null = bool(value)
        return lambda row: (get(row) is None) is want_null
    if op in (Op.ICONTAINS, Op.ILIKE, Op.IEQ):
        return text_predicate(flt, get)
    if op is Op.IN:
        # A set lookup, not a scan of the list per row: `in` lists are bounded, but 1,000 values
        # times every row was seconds. Keys keep bools apart from ints, as _compare does; equal
        # numbers of other types (1, 1.0, Decimal 1) hash alike and match, as with ==.
        keys = frozenset((type(c) is bool, c) for c in value)

        def member(row: Any) -> bool:
            v = get(row)
            if v is None:
                return False
            try:
                return (type(v) is bool, v) in keys
            except TypeError:  # an unhashable value (a JSON list or object) equals no scalar
                return False

        return member
    return lambda row: (v := get(row)) is not None and _compare(op, v, value)


def _getter(layout: Layout, column: str) -> Callable[[Values], Any]:
    """Reads ``column`` from a row tuple of ``layout`` (always ``None`` for an unknown one)."""
    position = layout.positions.get(column)
    return (lambda _: None) if position is None else operator.itemgetter(position)


def _matching(layout: Layout, rows: list[Values], filters: Sequence[Filter]) -> list[Values]:
    for flt in filters:
        keep = _predicate(flt, _getter(layout, flt.column))
        rows = [row for row in rows if keep(row)]
    return rows


def _sort_key(get: Callable[[Values], Any]) -> Callable[[Values], tuple[bool, str, Any]]:
    def key(row: Values) -> tuple[bool, str, Any]:
        value = get(row)
        if value is None:
            return (True, "", 0)
        return (
            False,
            "" if isinstance(value, int | float | decimal.Decimal) else type(value).__name__,
            value,
        )

    return key


def _sorted(layout: Layout, rows: list[Values], order: Sequence[Order]) -> list[Values]:
    # Stable sorts applied from the last key to the first give a multi-key sort; ``reverse`` keeps
    # stability, and puts NULLs (True sorts after False) first when descending, as PostgreSQL does.
    for item in reversed(order):
        key = _sort_key(_getter(layout, item.column))
        rows = sorted(rows, key=key, reverse=item.descending)
    return rows


def _views(layout: Layout, rows: list[Values]) -> list[RowView]:
    return [RowView(layout, values) for values in rows]


class MemoryBackend(InlineAsyncReads):
    """Serves queries from a :class:`MemoryStore` (``default_store()`` unless given one).

    ``relations`` are the relations ``include`` may follow (a store has no foreign keys): the
    reference schema's by default. Its awaitable reads (``aread`` ...) run inline on the event
    loop, with no thread: they wait for nothing.
    """

    name = "memory"
    #: Every operator.
    capabilities = Capabilities()

    def __init__(
        self,
        store: MemoryStore | None = None,
        relations: Iterable[Relation] = REFERENCE.relations,
        *,
        read_only: bool = False,
    ) -> None:
        self._store = store if store is not None else default_store()
        self._relations = check_relations(relations)
        # Built for a read-only facade, the backend refuses writes itself too, as the PostgreSQL
        # and Supabase ones do: the facade is not the only line of defence.
        self._read_only = read_only

    def _check_writable(self, table: str, operation: str) -> None:
        if self._read_only:
            refuse_write(operation, table, "this memory backend")

    def relations(self) -> tuple[Relation, ...]:
        """The declared relations."""
        return self._relations

    def read_related(self, query: Query, plans: Sequence[RelatedPlan]) -> Page:
        """One page of ``query`` with each row's related rows (see
        :mod:`persistence.relations`)."""
        return read_with_related(self.read, query, plans, self._children)

    def _children(self, plan: RelatedPlan, parents: Sequence[Row], budget: int) -> list[Row]:
        relation = plan.relation
        keys = parent_keys(parents, relation.parent_column)
        wanted = Filter(relation.child_column, Op.IN, tuple(keys)) if keys else None
        if wanted is None:
            return []
        groups: dict[Any, list[RowView]] = {}
        layout, matched = self._matching(relation.child_table, (*plan.filters, wanted))
        for row in _views(layout, matched):
            group = groups.setdefault(row[relation.child_column], [])
            if len(group) <= plan.limit:  # one more than kept: it tells a cut list
                group.append(row)
        ordered = [row for key in keys for row in groups.get(key, ())]
        columns = fetch_columns(plan)
        return [_copy_row({c: row.get(c) for c in columns}) for row in ordered]

    def read(self, query: Query) -> Page:
        """One page of ``query`` and the number of matching rows (rows are copies)."""
        layout, matched = self._matching(query.table, query.filters)
        if query.order:
            # The snapshot is in id order and the sort is stable: id is the tie-breaker.
            matched = _sorted(layout, matched, query.order)
        end = None if query.limit is None else query.offset + query.limit
        window = matched[query.offset : end]
        columns = query.columns or self._store.columns(query.table)
        rows = [layout.as_dict(values, columns) for values in window]
        return Page(rows=rows, total_count=len(matched))

    def search(
        self,
        query: Query,
        request: SearchRequest,
        text_columns: tuple[str, ...],
        embedder: Embedder | None,
    ) -> SearchResult:
        """The rows matching ``query.filters`` ranked by ``request``, exactly (every leg ranks
        every matching row; see :mod:`persistence.backends._memory_search`)."""
        columns = query.columns or self._store.columns(query.table)
        layout, matched = self._matching(query.table, query.filters)
        return search_rows(
            query.table,
            _views(layout, matched),
            request,
            text_columns,
            embedder,
            project=lambda row: _copy_row({c: row.get(c) for c in columns}),
            cache=vector_cache(self._store),
        )

    def count(self, table: str, filters: Sequence[Filter]) -> int:
        """How many rows of ``table`` match ``filters``."""
        return len(self._matching(table, filters)[1])

    def aggregate(
        self, query: Query, group_by: tuple[str, ...], metrics: tuple[Metric, ...], limit: int
    ) -> AggregateResult:
        """``metrics`` per group of the matching rows (:mod:`persistence.aggregate`)."""
        layout, matched = self._matching(query.table, query.filters)
        types = self._store.column_types(query.table)
        return aggregate_rows(_views(layout, matched), group_by, metrics, types, limit)

    def _matching(self, table: str, filters: Sequence[Filter]) -> tuple[Layout, list[Values]]:
        """The layout and the row tuples matching every filter, in ``id`` order."""
        # The facade has coerced the values already (then this returns the same filters); a
        # backend used on its own applies the same rule.
        typed = coerce_filters(table, filters, self._store.column_types(table))
        for flt in typed:
            # An index narrows the rows to a few candidates; every filter still checks them.
            if flt.op is Op.EQ or (flt.op is Op.IEQ and flt.column != "id"):
                found = self._store._candidates(table, flt.column, flt.value)
                if found is not None:
                    return found[0], _matching(found[0], found[1], typed)
        layout, rows = self._store._snapshot(table)
        return layout, _matching(layout, rows, typed)

    def data_version(self, table: str) -> int:
        """The store's write version of ``table`` (:meth:`MemoryStore.version`)."""
        return self._store.version(table)

    def columns(self, table: str) -> frozenset[str] | None:
        """The store's known columns of ``table`` (its schema plus any learned on write)."""
        return frozenset(self._store.column_types(table))

    def column_types(self, table: str) -> Types:
        """The store's known columns of ``table`` and their types (see
        :meth:`MemoryStore.column_types`)."""
        return self._store.column_types(table)

    def insert(self, table: str, rows: Sequence[Mapping[str, Any]]) -> list[Row]:
        """Insert ``rows`` atomically; see :meth:`MemoryStore.insert`."""
        self._check_writable(table, "insert")
        return self._store.insert(table, rows)

    def upsert(
        self, table: str, rows: Sequence[Mapping[str, Any]], on_conflict: str = "id"
    ) -> list[Row]:
        """Insert or update ``rows``; see :meth:`MemoryStore.upsert`."""
        self._check_writable(table, "upsert")
        return self._store.upsert(table, rows, on_conflict)

    def delete(self, table: str, filters: Sequence[Filter]) -> int:
        """Delete the rows matching every filter; return how many."""
        self._check_writable(table, "delete")
        typed = coerce_filters(table, filters, self._store.column_types(table))
        predicates = [_predicate(f) for f in typed]
        return self._store.delete(table, lambda row: all(p(row) for p in predicates))

    def close(self) -> None:
        """Nothing to release; the store outlives its backends."""


def create_backend(
    *,
    read_only: bool = True,
    store: MemoryStore | None = None,
    relations: Iterable[Relation] = REFERENCE.relations,
    **options: Any,
) -> MemoryBackend:
    """Factory hook for ``kind="memory"``; ``store=`` picks a store other than the default,
    ``relations=`` the relations ``include`` follows (the reference schema's by default)."""
    check_options("kind='memory'", options, ["store", "relations"])
    if store is not None and not isinstance(store, MemoryStore):
        raise ConfigurationError(f"store= must be a MemoryStore, not {type(store).__name__}")
    return MemoryBackend(store, relations, read_only=read_only)
