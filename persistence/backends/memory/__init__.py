"""The in-memory backend: the embedded default and the test double for other people's tests.

``MemoryStore`` holds tables of rows; ``MemoryBackend`` serves queries over a store with the same
semantics as PostgreSQL (checked by a differential test): NULL never matches a comparison,
``icontains`` is a literal case-insensitive substring, ``ilike`` takes ``%``/``_`` wildcards and
``\\`` escapes, ``ieq`` is equality after PostgreSQL's ``lower()`` on both sides (see
:func:`persistence.values.like.fold_case` for the folding and where it can differ), NULLs
sort last ascending and first descending, ``id`` breaks ties.

Columns are typed: a store's schema gives each column a PostgreSQL type (the reference schema's by
default), and every value written is converted to its column's type as PostgreSQL would store it
(:func:`persistence.values.types.coerce_value`): ``"42"`` on a ``bigint`` column is stored as
``42``, ``"2025-03-01T10:00:00Z"`` on a ``timestamptz`` column as an aware ``datetime``. A value
that cannot be converted is an ``InvalidQueryError`` and the write changes nothing. Columns named
without a type, and columns first seen on write, are untyped: their values are stored as given.

Storage is compact (:mod:`persistence.backends.memory.table`): a tuple per row in the table's
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

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from persistence.aggregate import AggregateResult, Metric
from persistence.backends.memory.evaluate import _matching, _predicate, _sorted, _views
from persistence.backends.memory.search import search_rows, vector_cache
from persistence.backends.memory.store import DEFAULT_INDEXED as DEFAULT_INDEXED
from persistence.backends.memory.store import (
    UNTYPED,
    MemoryStore,
    Row,
    Types,
    _copy_row,
)
from persistence.backends.memory.table import Layout, RowView, Values
from persistence.backends.memory.worker_async import WorkerAsyncReads
from persistence.capabilities import Capabilities
from persistence.errors import ConfigurationError
from persistence.options import check_options
from persistence.query import Filter, Op, Page, Query
from persistence.read_only import refuse_write
from persistence.relations import (
    RelatedPlan,
    Relation,
    check_relations,
    fetch_columns,
    parent_keys,
    read_with_related,
)
from persistence.schema import REFERENCE
from persistence.search import SearchRequest, SearchResult
from persistence.search.embedder import Embedder
from persistence.values.aggregate_rows import aggregate_rows
from persistence.values.coerce import coerce_filters

__all__ = ["UNTYPED", "MemoryBackend", "MemoryStore", "create_backend", "default_store"]

_DEFAULT_STORE = MemoryStore()


def default_store() -> MemoryStore:
    """The process-wide store that ``kind="memory"`` factories share unless given ``store=``."""
    return _DEFAULT_STORE


class MemoryBackend(WorkerAsyncReads):
    """Serves queries from a :class:`MemoryStore` (``default_store()`` unless given one).

    ``relations`` are the relations ``include`` may follow (a store has no foreign keys): the
    reference schema's by default. Its awaitable reads (``aread`` ...) run in a worker thread: they
    wait for nothing, but their CPU work must not hold an event loop other sessions share.
    """

    name = "memory"
    #: Its columns are known without I/O: the facade checks redaction rules against them at
    #: start.
    catalog_in_process = True
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

    @property
    def database(self) -> str | None:
        """The store's ``name``: what envelopes name as their database."""
        return self._store.name

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
        every matching row; see :mod:`persistence.backends.memory.search`)."""
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
            # Corrections come from words of rows inside the filters only (all rows without).
            every_row=None if query.filters else lambda: _views(*self._matching(query.table, ())),
            correct_from_rows=bool(query.filters),
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
