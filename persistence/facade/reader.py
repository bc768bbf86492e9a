"""The reads both facades share, in one class: ``_Reader``.

Its state (the backend, the policies, the embeddings, the read plans, the learned vocabulary),
the checks every read goes through (:meth:`_Reader._checked_facts`), the reads themselves
(columns and types, ``read`` with relations, ``count``, ``aggregate``, ``search``) and their
awaited twins, which run the same checks and differ only in the backend's I/O.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any, Unpack, cast

from persistence.aggregate import (
    AggregateResult,
    DistinctValues,
    Metric,
    check_aggregate,
    check_kinds,
)
from persistence.backends.base import Backend
from persistence.capabilities import Capabilities
from persistence.closing import Closing
from persistence.errors import (
    ColumnNotAllowedError,
    InvalidQueryError,
    UnsupportedOperatorError,
)
from persistence.facade.calls import (
    ROW_CALLS,
    AggregateOptions,
    BackendCall,
    ReadOptions,
    SearchOptions,
    check_options,
    checked_replace,
    filters_of,
    names_of,
)
from persistence.facade.read_plans import ReadPlan, ReadPlans, read_shape, statement_key
from persistence.facade.versions import data_target, process_versions
from persistence.policy import AccessPolicy
from persistence.query import Filter, Op, Order, Page, Query, _check_count, _check_flag, _new_query
from persistence.redaction import RedactionPolicy
from persistence.relations import Include, RelatedPlan, Relation, plan_includes
from persistence.search import SearchMode, SearchRequest, SearchResult
from persistence.search.embedder import Embedder
from persistence.values.column_kinds import ColumnKind
from persistence.values.types import ColumnType, coerce_filters
from persistence.vocabulary import SchemaVocabulary

#: A learned vocabulary is learned again after this long even when no write was seen (another
#: process may have written the database).
VOCABULARY_TTL_SECONDS = 300.0

#: A table's catalog facts: its columns (``None`` when the backend cannot tell) and their types.
Facts = tuple[frozenset[str] | None, Mapping[str, ColumnType]]


class _Reader(Closing):
    """The backend, policies and embeddings both facades hold, the checks of every read, and
    the reads. Thread-safe when the backend is (all bundled ones are)."""

    __slots__ = (
        "__backend", "__embedder", "__policy", "__redaction", "__tables", "_plans",
        "_vocabulary", "_vocabulary_lock",
    )  # fmt: skip

    def __init__(
        self,
        backend: Backend,
        policy: AccessPolicy,
        *,
        embeddings: Any = None,
        redaction: RedactionPolicy | None = None,
    ) -> None:
        self.__backend = backend
        self.__policy = policy
        # The policy is immutable: its tables are sorted once (every run asks for them).
        self.__tables = tuple(sorted(policy.read_tables))
        #: The checked shapes of reads (see persistence.facade.read_plans).
        self._plans = ReadPlans()
        #: The learned vocabulary and what it was learned at (see :meth:`vocabulary`).
        self._vocabulary: tuple[SchemaVocabulary, tuple[int, ...], float] | None = None
        self._vocabulary_lock = threading.Lock()
        # Applied to every row before it leaves the facade (see persistence.redaction).
        self.__redaction = redaction
        if redaction is not None and getattr(backend, "catalog_in_process", False):
            # A misspelt rule is an error at start where the catalog costs no I/O; elsewhere
            # on the first read of its table (_checked_facts).
            redaction.check_columns(policy.read_tables, backend.columns)
        self.__embedder = (
            None
            if embeddings is None
            else embeddings
            if isinstance(embeddings, Embedder)
            else Embedder(embeddings)
        )

    # --- what the facade holds ------------------------------------------------------------------

    @property
    def embedder(self) -> Embedder | None:
        """The embeddings the semantic leg of :meth:`search` uses, or ``None``."""
        return self.__embedder

    @property
    def redaction(self) -> RedactionPolicy | None:
        """The (immutable) redaction policy applied to rows before they leave, or ``None``."""
        return self.__redaction

    @property
    def capabilities(self) -> Capabilities:
        """What the underlying backend declares it can do."""
        return self.__backend.capabilities

    @property
    def policy(self) -> AccessPolicy:
        """The (immutable) access policy this facade enforces."""
        return self.__policy

    @property
    def backend_name(self) -> str:
        """The backend's short name (``"memory"``, ``"postgres"``, ``"supabase"``)."""
        return self.__backend.name

    @property
    def backend_database(self) -> str | None:
        """The database the backend reads, named without any secret, or ``None``.

        PostgreSQL: the database name of the DSN (never its user, password or host); Supabase:
        the project's host name; memory: the store's ``name`` (``"sample"`` for the CLI's
        bundled sample). It lets an answer say where it came from: a script that forgot its DSN
        sees ``sample`` rather than getting the sample's rows silently.
        """
        database = getattr(self.__backend, "database", None)
        return database if isinstance(database, str) and database else None

    def _backend(self) -> Backend:
        return self.__backend

    # --- tables, columns, versions, vocabulary -------------------------------------------------

    def tables(self) -> tuple[str, ...]:
        """The readable tables, sorted."""
        return self.__tables

    def columns(self, table: str) -> tuple[str, ...]:
        """The readable columns of ``table``, sorted (empty when the backend cannot tell)."""
        table = self.__policy.check_read(table, "columns")
        known = self._known(table)[0] or frozenset()
        allowed = self.__policy.allowed_columns(table)
        return tuple(sorted(known if allowed is None else known & allowed))

    def column_types(self, table: str) -> Mapping[str, ColumnType]:
        """The readable columns of ``table`` and their types, in table order.

        Only columns the policy allows and the backend knows; an empty mapping when the backend
        cannot tell (a Supabase project that hides its API description). Filter values on these
        columns are coerced to these types (see :mod:`persistence.values.types`).

        >>> facade.column_types("leads")["created_at"].kind
        <ColumnKind.TIMESTAMPTZ: 'timestamptz'>
        """
        table = self.__policy.check_read(table, "column_types")
        types = self.__backend.column_types(table) or {}
        allowed = self.__policy.allowed_columns(table)
        if allowed is None:  # a copy (a snapshot, never a live view) made in C
            return MappingProxyType(dict(types))
        return MappingProxyType({c: t for c, t in types.items() if c in allowed})

    def redacted_columns(self, table: str) -> Mapping[str, str]:
        """The redacted columns of ``table`` the policy lets a read return: column -> how
        (``"mask:email"``, ``"hash"``, ``"drop"``, ...); empty without redaction."""
        table = self.__policy.check_read(table, "columns")
        if self.__redaction is None:
            return MappingProxyType({})
        return self.__redaction.specs(table, self.__policy.allowed_columns(table))

    def data_version(self, table: str) -> int:
        """A number that changes whenever rows of ``table`` are written, for cache keys.

        It never decreases and costs no I/O. Memory backend: the ``MemoryStore``'s write
        counter, so every write to that store counts, through any facade or ``store.insert``.
        PostgreSQL and Supabase: a counter of this process for the backend's database (host,
        port, database and schema of the DSN) or project URL, bumped after every write of a
        ``PersistenceAgent`` in this process; writes by other processes are not seen, so a
        cache keyed by it still needs a TTL. Read it *before* the data it keys::

            key = (table, facade.data_version(table), filters)
            page = cache.get(key) or cache.setdefault(key, facade.read(table, filters))
        """
        return self._version(self.__policy.check_read(table, "data_version"))

    def _version(self, table: str) -> int:
        """:meth:`data_version` of a table the allow-list has accepted."""
        own = getattr(self.__backend, "data_version", None)
        if callable(own):
            return int(own(table))
        return process_versions().get(data_target(self.__backend), table)

    def _versions(self, tables: tuple[str, ...]) -> tuple[int, ...]:
        """:meth:`_version` of every one of ``tables`` (allowed ones), read at once: the
        vocabulary's check at every step of a run costs one look-up per table, not a call."""
        own = getattr(self.__backend, "data_version", None)
        if callable(own):
            return tuple([int(own(table)) for table in tables])
        return process_versions().many(data_target(self.__backend), tables)

    def _note_write(self, table: str) -> None:
        """Move ``table``'s version on after a write (a backend counting its own writes, as the
        memory store does, needs nothing)."""
        if not callable(getattr(self.__backend, "data_version", None)):
            process_versions().bump(data_target(self.__backend), table)

    def vocabulary(self, *, refresh: bool = False) -> SchemaVocabulary:
        """The database's vocabulary (:class:`~persistence.vocabulary.SchemaVocabulary`):
        learned on first use through this facade's own reads, then kept while no table was
        written (its ``data_version``) and for at most :data:`VOCABULARY_TTL_SECONDS`;
        ``refresh=True`` learns it again now."""
        tables = self.tables()
        # The allow-list's own tables: their versions need no check of it (a run asks for the
        # vocabulary at every step; the reads that learn it are checked as any other).
        versions = self._versions(tables)
        now = time.monotonic()
        with self._vocabulary_lock:
            kept = None if refresh else self._kept_vocabulary(versions, now)
            if kept is not None:
                return kept
            learned = SchemaVocabulary.learn(self, tables=tables)
            self._vocabulary = (learned, versions, now)
            return learned

    async def avocabulary(self, *, refresh: bool = False) -> SchemaVocabulary:
        """:meth:`vocabulary`, awaited: the kept one when it is still current (no I/O, so no
        worker thread: a run asks at every step), else learned in a worker thread, never on
        the event loop."""
        if not refresh:
            # Read without the lock (a learning thread holds it during I/O, which the loop must
            # not wait for): the kept tuple is swapped whole, so this is the old one or the new.
            kept = self._kept_vocabulary(self._versions(self.tables()), time.monotonic())
            if kept is not None:
                return kept
        return await asyncio.to_thread(self.vocabulary, refresh=refresh)

    def _kept_vocabulary(self, versions: tuple[int, ...], now: float) -> SchemaVocabulary | None:
        """The kept vocabulary if no table was written since it was learned (``versions``) and
        it is younger than :data:`VOCABULARY_TTL_SECONDS` at ``now``, else ``None``."""
        kept = self._vocabulary
        if kept is not None and kept[1] == versions and now - kept[2] < VOCABULARY_TTL_SECONDS:
            return kept[0]
        return None

    # --- the checks of every read --------------------------------------------------------------

    def check_filters(self, table: str, filters: Iterable[Filter]) -> tuple[Filter, ...]:
        """``filters`` as a read of ``table`` would send them: checked, values coerced.

        The same checks, in the same order, and the same errors as :meth:`read`: the table is
        allowed, every column is allowed by the policy and known to the backend, every operator
        is declared by the backend's capabilities, and every value is coerced to its column's
        type (``InvalidQueryError`` naming the column and type when it cannot be). No row is
        read: only the backend's cached catalog is consulted, so it is cheap enough to call once
        per condition, and its answer depends only on its arguments and the catalog.

        >>> facade.check_filters("leads", [Filter("id", Op.EQ, "42")])
        (Filter(column='id', op=<Op.EQ: 'eq'>, value=42),)
        """
        table = self.__policy.check_read(table, "read")
        return self._checked(Query(table, filters=filters_of(filters)), "read")[0].filters

    def _known(self, table: str) -> Facts:
        """The backend's columns of ``table`` (``None`` when it cannot tell) and their types
        (empty when it cannot tell); asked once per call, since a Supabase backend may ask its
        server."""
        types = self.__backend.column_types(table)
        if types is not None:
            return frozenset(types), types
        return self.__backend.columns(table), {}

    def _policy_columns(self, table: str, known: frozenset[str] | None) -> tuple[str, ...] | None:
        """The columns a read naming none may return: ``None`` (all) unless the policy restricts.

        Without this, a read that names no columns would return columns the policy forbids.
        ``known`` is the backend's column set for ``table`` (``None`` when it cannot tell).
        """
        allowed = self.__policy.allowed_columns(table)
        if allowed is None:
            return None
        readable = allowed if known is None else allowed & known
        if not readable:
            raise ColumnNotAllowedError(
                f"the access policy allows no column of {table!r}", table=table, operation="read"
            )
        return tuple(sorted(readable))

    def _checked(self, query: Query, operation: str) -> tuple[Query, frozenset[str] | None]:
        """``query`` with its filter values coerced, once the policy and the backend accept it;
        with the backend's known columns. Every read, count and delete goes through here."""
        query, known, _ = self._checked_facts(query, operation)
        return query, known

    def _checked_facts(
        self, query: Query, operation: str, facts: Facts | None = None
    ) -> tuple[Query, frozenset[str] | None, Mapping[str, ColumnType]]:
        """:meth:`_checked`, with the catalog facts it was checked on (``facts`` when given,
        else the backend's, asked once the policy accepts the columns)."""
        table = query.table
        referenced = query.referenced_columns()
        self.__policy.check_columns(table, referenced, operation)
        known, types = self._known(table) if facts is None else facts
        if known is not None:
            for column in sorted(referenced - known):
                raise ColumnNotAllowedError(
                    f"table {table!r} has no column {column!r}",
                    table=table,
                    column=column,
                    operation=operation,
                )
        for flt in query.filters:
            self._require(self.__backend.capabilities.supports(flt.op), flt.op.value)
        if self.__redaction is not None:
            self.__redaction.check_table(table, known)
            self.__redaction.check_query(table, query.filters, query.order, operation)
        filters = coerce_filters(table, query.filters, types)
        # By identity: Filter("x", EQ, 1) == Filter("x", EQ, True), yet only one is a boolean.
        if any(new is not old for new, old in zip(filters, query.filters, strict=True)):
            query = checked_replace(query, filters=filters)
        return query, known, types

    def _require(self, served: bool, operator: str, what: str | None = None) -> None:
        """``UnsupportedOperatorError`` unless the backend serves ``operator`` (``what`` says
        what it cannot do; by default, support the operator)."""
        if not served:
            name = self.__backend.name
            raise UnsupportedOperatorError(
                f"backend {name!r} {what or f'does not support operator {operator!r}'}",
                operator=operator,
                backend=name,
            )

    # --- read ----------------------------------------------------------------------------------

    def read(
        self,
        table: str,
        filters: Iterable[Filter] = (),
        *,
        columns: Sequence[str] | None = None,
        order: Iterable[Order | str] = (),
        limit: int | None = None,
        offset: int = 0,
        include: Iterable[str | Include] = (),
        exact_total: bool = True,
    ) -> Page:
        """One page of ``table`` matching all ``filters``, with the total number of matches.

        ``exact_total=False`` counts the matches only up to ``offset + limit + 1``: on a large
        match set the count then stops there instead of reading every match. The page's
        ``total_count`` is exact below that bound; at it, ``total_exact`` is false and the total
        is a lower bound that still exceeds the page's end (another page follows). A backend may
        count exactly anyway (the memory backend does), and says so in ``total_exact``.

        Filter values are coerced to their columns' types first (see :meth:`check_filters`).
        ``include`` names relations (:meth:`relations`) whose rows each parent row carries under
        the relation's name, e.g. ``("conversations", "conversations.messages")`` or
        :class:`~persistence.relations.Include` objects with child filters and a per-parent
        limit; bounded per parent and in total (see :mod:`persistence.relations`). The child
        table must be allowed too, its column policy applies, and its filter values are coerced
        like any other.

        >>> facade.read("leads", [Filter("company_name", Op.ICONTAINS, "acme")], limit=20)
        >>> facade.read("leads", [Filter("id", Op.EQ, 7)], include=["conversations"]).rows[0][
        ...     "conversations"]
        """
        options: ReadOptions = {
            "columns": columns, "order": order, "limit": limit, "offset": offset,
            "include": include, "exact_total": exact_total,
        }  # fmt: skip
        page: Page = self._perform(self._read_call(table, filters, options))
        return page

    async def aread(
        self, table: str, filters: Iterable[Filter] = (), **options: Unpack[ReadOptions]
    ) -> Page:
        """:meth:`read`, awaited: the same checks, the backend's I/O on the running loop."""
        check_options("aread", options, ReadOptions)
        await self.aprepare()
        page: Page = await self._perform_async(self._read_call(table, filters, options))
        return page

    def _read_call(
        self, table: str, filters: Iterable[Filter], options: ReadOptions
    ) -> BackendCall:
        """The checks of :meth:`read` and the backend call they lead to."""
        table = self.__policy.check_read(table, "read")
        filters = filters_of(filters)
        columns, order = options.get("columns"), options.get("order", ())
        window = (options.get("limit"), options.get("offset", 0), options.get("exact_total", True))
        include = options.get("include", ())
        if include == ():
            shape = read_shape(table, filters, columns, order)
            if shape is not None:
                query, reader = self._planned(shape, table, filters, columns, order, window)
                return BackendCall("read", (query,), reader)
        query, known, _ = self._checked_read(table, filters, columns, order, window)
        # The default: no relation to resolve (nor the backend's relations to list).
        plans = () if include == () else self._plans_of(table, include, query.columns, known)
        if not plans:
            return BackendCall("read", (query,))
        served = callable(getattr(self.__backend, "read_related", None))
        self._require(served, "include", "cannot read related rows")
        return BackendCall("read_related", (query, plans))

    def _checked_read(
        self,
        table: str,
        filters: tuple[Filter, ...],
        columns: Sequence[str] | None,
        order: Iterable[Order | str],
        window: tuple[int | None, int, bool],
        facts: Facts | None = None,
    ) -> tuple[Query, frozenset[str] | None, Mapping[str, ColumnType]]:
        """Every check of a read of the allowed ``table``: the query as the backend gets it,
        and the catalog facts it was checked on (``facts``, when the caller asked already)."""
        query = Query(
            table,
            filters=filters,
            columns=None if columns is None else names_of(columns, "columns"),
            order=names_of(order, "order"),  # Query turns names into Order
            limit=window[0],
            offset=window[1],
            exact_total=window[2],
        )
        query, known, types = self._checked_facts(query, "read", facts)
        if columns is None:
            # The policy's columns the backend knows: allowed and known by construction.
            readable = self._policy_columns(table, known)
            if readable is not None:
                query = checked_replace(query, columns=readable)
        return query, known, types

    def _planned(
        self,
        shape: Hashable,
        table: str,
        filters: tuple[Filter, ...],
        columns: Sequence[str] | None,
        order: Iterable[Order | str],
        window: tuple[int | None, int, bool],
    ) -> tuple[Query, Any]:
        """:meth:`_checked_read` by the shape's plan: the shape's decisions made once, the
        values checked and coerced on every call (see :mod:`persistence.facade.read_plans`);
        with the backend's reader of the shape, if it has one."""
        plan = self._plans.get(shape)
        facts = None
        if plan is not None:
            # The policy accepted this shape already: the backend may be asked first.
            facts = self._known(table)
            if plan.current(*facts):
                # Query's own checks of the values, in its order: limit, offset, the filters'.
                limit, offset, exact = window
                _check_count(limit, "limit", optional=True)
                _check_count(offset, "offset", optional=False)
                _check_flag(exact, "exact_total")
                coerced = coerce_filters(plan.table, filters, facts[1])
                query = _new_query(
                    plan.table, coerced, plan.columns, plan.order, limit, offset, exact
                )
                reader = plan.reader
                if reader is not None and statement_key(query) != plan.reader_key:
                    reader = None  # another statement: the backend's read plans it
                return query, reader
        query, known, types = self._checked_read(table, filters, columns, order, window, facts)
        prepare = getattr(self.__backend, "read_statement", None)
        # The first read of a shape goes through the backend's own read (and its checks).
        reader = prepare(query) if callable(prepare) else None
        key = statement_key(query)
        plan = ReadPlan(query.table, query.columns, query.order, known, types, reader, key)
        self._plans.put(shape, plan)
        return query, None

    # --- relations -----------------------------------------------------------------------------

    def relations(self, table: str) -> tuple[Relation, ...]:
        """The relations ``include`` may follow from ``table``: the backend's (foreign keys of
        the catalog, or declared ones) whose child table is allowed and whose join columns the
        policies allow on both sides."""
        table = self.__policy.check_read(table, "relations")
        return tuple(r for r in self._relations() if r.parent_table == table and self._open(r))

    def _relations(self) -> tuple[Relation, ...]:
        own = getattr(self.__backend, "relations", None)
        return tuple(own()) if callable(own) else ()

    def _open(self, relation: Relation) -> bool:
        policy = self.__policy
        if relation.child_table not in policy.read_tables:
            return False
        parent = policy.allowed_columns(relation.parent_table)
        child = policy.allowed_columns(relation.child_table)
        return (parent is None or relation.parent_column in parent) and (
            child is None or relation.child_column in child
        )

    def _plans_of(
        self,
        table: str,
        include: Iterable[str | Include],
        columns: Sequence[str] | None,
        known: frozenset[str] | None,
    ) -> tuple[RelatedPlan, ...]:
        """``include`` checked and resolved into plans, one per relation of each level."""
        shown = frozenset(columns) if columns is not None else known
        # Relations to a table outside the allow-list are not offered (nor named in errors).
        readable = [r for r in self._relations() if r.child_table in self.__policy.read_tables]
        return plan_includes(table, include, shown, readable, self._child)

    def _child(
        self, relation: Relation, filters: tuple[Filter, ...]
    ) -> tuple[tuple[Filter, ...], tuple[str, ...]]:
        """The child table of ``relation`` checked like a read of it (allowed, join column
        and filter columns allowed and known, values coerced): the filters and the columns."""
        child = self.__policy.check_read(relation.child_table, "read")
        probe = Query(child, filters=filters, columns=(relation.child_column,))
        checked, known = self._checked(probe, "read")
        types = self.__backend.column_types(child)
        return checked.filters, self._policy_columns(child, known) or tuple(
            types or sorted(known or ())
        )

    # --- count ---------------------------------------------------------------------------------

    def count(self, table: str, filters: Iterable[Filter] = ()) -> int:
        """How many rows of ``table`` match all ``filters`` (values coerced as by :meth:`read`)."""
        count: int = self._perform(self._count_call(table, filters))
        return count

    async def acount(self, table: str, filters: Iterable[Filter] = ()) -> int:
        """:meth:`count`, awaited."""
        await self.aprepare()
        count: int = await self._perform_async(self._count_call(table, filters))
        return count

    def _count_call(self, table: str, filters: Iterable[Filter]) -> BackendCall:
        table = self.__policy.check_read(table, "count")
        query, _ = self._checked(Query(table, filters=filters_of(filters)), "count")
        return BackendCall("count", (table, query.filters))

    # --- aggregate -----------------------------------------------------------------------------

    def aggregate(
        self,
        table: str,
        filters: Iterable[Filter] = (),
        *,
        group_by: Iterable[str] = (),
        metrics: Iterable[Metric | str] = ("count",),
        limit: int | None = None,
    ) -> AggregateResult:
        """``metrics`` per group of the rows of ``table`` matching all ``filters``.

        Metrics are ``"count"`` or ``"<function>:<column>"`` (``count_distinct``, ``sum``,
        ``avg``, ``min``, ``max``) or :class:`~persistence.aggregate.Metric` objects; at most
        three ``group_by`` columns; groups in key order, at most ``limit`` of them (100 by
        default, at most 1000), ``capped`` when more existed. Grouped and aggregated columns
        pass the same policy and catalog checks as read columns, filters the same checks and
        coercion as :meth:`read`; a metric the column's type cannot take (``sum`` of text) is an
        ``InvalidQueryError``, one the backend does not serve an ``UnsupportedOperatorError``.
        Result types and NULL handling: :mod:`persistence.aggregate`.

        >>> facade.aggregate("leads", group_by=["status"], metrics=["count", "avg:score"])
        """
        options: AggregateOptions = {"group_by": group_by, "metrics": metrics, "limit": limit}
        result: AggregateResult = self._perform(self._aggregate_call(table, filters, options))
        return result

    async def aaggregate(
        self, table: str, filters: Iterable[Filter] = (), **options: Unpack[AggregateOptions]
    ) -> AggregateResult:
        """:meth:`aggregate`, awaited."""
        check_options("aaggregate", options, AggregateOptions)
        await self.aprepare()
        call = self._aggregate_call(table, filters, options)
        result: AggregateResult = await self._perform_async(call)
        return result

    def _aggregate_call(
        self, table: str, filters: Iterable[Filter], options: AggregateOptions
    ) -> BackendCall:
        table = self.__policy.check_read(table, "aggregate")
        names, parsed, cap = check_aggregate(
            options.get("group_by", ()), options.get("metrics", ("count",)), options.get("limit")
        )
        measured = [m.column for m in parsed if m.column is not None]
        columns = tuple(dict.fromkeys((*names, *measured)))
        query = Query(table, filters=filters_of(filters), columns=columns or None)
        query, _, types = self._checked_facts(query, "aggregate")
        if self.__redaction is not None:
            self.__redaction.check_aggregate(
                table, names, [(m.function, m.column) for m in parsed if m.column is not None]
            )
        check_kinds(table, names, parsed, types)
        capabilities = self.__backend.capabilities
        for metric in parsed:
            served = capabilities.aggregates_with(metric.function)
            self._require(served, metric.function, f"cannot compute {metric.function!r}")
        return BackendCall("aggregate", (replace(query, columns=None), names, parsed, cap))

    # --- distinct values -------------------------------------------------------------------------

    def distinct_values(
        self, table: str, column: str, *, limit: int | None = None
    ) -> DistinctValues:
        """The distinct non-NULL values of ``table.column`` in key order, when there are at most
        ``limit`` of them (100 by default, at most 1000); else ``capped``, with no value.

        The column passes the checks of a group-by column (policy, catalog, its type, and a
        redaction rule refuses it). Cheaper than ``aggregate(group_by=[column])`` on a column
        of many values: PostgreSQL stops after the table's first rows show more than ``limit``
        (see :class:`~persistence.aggregate.DistinctValues`).

        >>> facade.distinct_values("leads", "status").values
        ('lost', 'new', 'won')
        """
        call = self._distinct_call(table, column, limit)
        return _distinct_result(column, self._perform(call))

    async def adistinct_values(
        self, table: str, column: str, *, limit: int | None = None
    ) -> DistinctValues:
        """:meth:`distinct_values`, awaited."""
        await self.aprepare()
        call = self._distinct_call(table, column, limit)
        return _distinct_result(column, await self._perform_async(call))

    def _distinct_call(self, table: str, column: str, limit: int | None) -> BackendCall:
        table = self.__policy.check_read(table, "distinct_values")
        if not isinstance(column, str):
            raise InvalidQueryError(
                f"column must be a column name, not {type(column).__name__}", field="column"
            )
        names, _, cap = check_aggregate((column,), ("count",), limit)
        if self.__redaction is not None:  # first: the filter below is ours, not the caller's
            self.__redaction.check_aggregate(table, names, ())
        query = Query(table, filters=(Filter(column, Op.IS_NULL, False),), columns=names)
        query, _, types = self._checked_facts(query, "distinct_values")
        check_kinds(table, names, (), types)
        if callable(getattr(self.__backend, "distinct_values", None)):
            return BackendCall("distinct_values", (table, column, cap))
        # Any backend can group: the non-NULL rows by the column, one count each.
        metrics = (Metric("count"),)
        return BackendCall("aggregate", (replace(query, columns=None), names, metrics, cap))

    # --- search --------------------------------------------------------------------------------

    def search(
        self,
        table: str,
        text: str,
        *,
        filters: Iterable[Filter] = (),
        k: int = 10,
        offset: int = 0,
        mode: SearchMode | str = SearchMode.HYBRID,
        exact_total: bool = False,
    ) -> SearchResult:
        """The ``k`` rows of ``table`` matching all ``filters`` that best match ``text``, best
        first, from rank ``offset`` on (see :mod:`persistence.search`).

        Filters are hard constraints inside every leg: when at least ``offset + k`` rows match
        them, exactly ``k`` come back. Only text columns the policy allows are searched, and
        rows carry only allowed columns. Without embeddings, ``hybrid`` runs the keyword leg and
        says so in ``degraded``; ``semantic`` without embeddings is an ``InvalidQueryError``.

        ``total_count`` is the number of rows matching the filters, counted by default only up
        to a bound of the backend's (at least ``offset + k + 1``): at it, ``total_exact`` is
        false and the total is a lower bound that still exceeds the page's end.
        ``exact_total=True`` counts every match (on a large table, the search's costliest
        statement).

        >>> facade.search("inquiries", "customers who want to stop paying", k=5).rows
        """
        options: SearchOptions = {
            "filters": filters, "k": k, "offset": offset, "mode": mode, "exact_total": exact_total,
        }  # fmt: skip
        result: SearchResult = self._perform(self._search_call(table, text, options))
        return result

    async def asearch(
        self, table: str, text: str, **options: Unpack[SearchOptions]
    ) -> SearchResult:
        """:meth:`search`, awaited (a backend without an awaitable search runs in a worker
        thread)."""
        check_options("asearch", options, SearchOptions)
        await self.aprepare()
        result: SearchResult = await self._perform_async(self._search_call(table, text, options))
        return result

    def _search_call(self, table: str, text: str, options: SearchOptions) -> BackendCall:
        table = self.__policy.check_read(table, "search")
        # SearchRequest validates the mode, turning a string into a SearchMode or refusing it.
        mode = cast(SearchMode, options.get("mode", SearchMode.HYBRID))
        request = SearchRequest(
            text,
            mode,
            options.get("k", 10),
            options.get("offset", 0),
            options.get("exact_total", False),
        )
        query = Query(table, filters=filters_of(options.get("filters", ())))
        # The catalog is asked once: a Supabase backend may ask its server.
        query, known, types = self._checked_facts(query, "search")
        readable = self._policy_columns(table, known)
        if readable is not None:
            query = replace(query, columns=readable)
        visible = set(types) if readable is None else set(readable)
        # A redacted column is not ranked by: its rank would tell what it holds.
        hidden = self.__redaction.columns(table) if self.__redaction is not None else {}
        # In table order whatever the policy: the keyword leg's text is these columns joined,
        # and an index on that expression (what doctor prints) serves it only in that order.
        text_columns = tuple(
            c
            for c, ctype in types.items()
            if c in visible and ctype.kind is ColumnKind.TEXT and c not in hidden
        )
        if not text_columns:
            raise InvalidQueryError(f"table {table!r} has no text column this search may rank by")
        request.runnable_mode(self.__embedder is not None)  # refuses semantic without embeddings
        self._require(callable(getattr(self.__backend, "search", None)), "search", "cannot search")
        return BackendCall("search", (query, request, text_columns, self.__embedder))

    # --- the backend call, blocking or awaited -------------------------------------------------

    async def aprepare(self) -> None:
        """Load, without blocking the running loop, what the checks of every read consult (a
        backend's catalog); the ``a``-methods call it, so calling it first is optional.

        The checks themselves (allow-list, column policy, operators, coercion) are the blocking
        methods' own code, run on cached facts: only the backend's I/O differs.
        """
        prepare = getattr(self.__backend, "aprepare", None)
        if callable(prepare):
            await prepare()

    def _perform(self, call: BackendCall) -> Any:
        return self._redacted(call, self._call_backend(call))

    async def _perform_async(self, call: BackendCall) -> Any:
        if call.reader is not None:
            return self._redacted(call, await call.reader.aread(*call.args))
        twin = getattr(self.__backend, "a" + call.method, None)
        if callable(twin):
            return self._redacted(call, await twin(*call.args))
        # A backend without awaitable reads (a caller's own): off the loop, in a worker thread.
        return self._redacted(call, await asyncio.to_thread(self._call_backend, call))

    def _call_backend(self, call: BackendCall) -> Any:
        if call.reader is not None:
            return call.reader.read(*call.args)
        return getattr(self.__backend, call.method)(*call.args)

    def _redacted(self, call: BackendCall, result: Any) -> Any:
        """``result`` as it may leave the facade: rows redacted, when a redaction policy applies
        (see :mod:`persistence.redaction`); counts and aggregates carry no row."""
        redaction = self.__redaction
        if redaction is None or call.method not in ROW_CALLS:
            return result
        table = call.args[0].table  # every row call starts with its Query
        if call.method == "search":
            if not redaction.applies(table):
                return result
            hits = tuple(replace(h, row=redaction.redact_row(table, h.row)) for h in result.hits)
            return replace(result, hits=hits)
        return redaction.redact_page(table, result)

    # --- closing -------------------------------------------------------------------------------

    def close(self) -> None:
        """Release the backend's connections."""
        self.__backend.close()

    async def aclose(self) -> None:
        """Release the backend's connections, its awaitable ones (opened by the
        ``a``-methods, on this loop) included."""
        close = getattr(self.__backend, "aclose", None)
        if callable(close):
            await close()
        self.__backend.close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(backend={self.__backend.name!r}, tables={list(self.tables())})"
        )


def _distinct_result(column: str, result: DistinctValues | AggregateResult) -> DistinctValues:
    """What :meth:`_Reader.distinct_values` answers, from the backend's own answer or from the
    aggregate it was asked instead."""
    if isinstance(result, AggregateResult):
        return DistinctValues.from_groups(column, result)
    return result
