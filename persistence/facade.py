"""The facades callers hold: ``ReadOnlyPersistenceFacade`` for agents, ``PersistenceAgent`` for
trusted writers.

Every read goes through the same checks, in this order, before a backend is touched: table in
the allow-list (exactly), query well-formed, columns allowed by the policy and known to the
backend, operators declared by the backend's capabilities; then every filter value is coerced to
its column's type from the backend's catalog (:mod:`persistence.types`), so no backend ever sees
a ``"42"`` meant for a ``bigint``. ``check_filters`` runs exactly these steps without reading.
The backend itself is private: no public attribute hands it out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import fields, replace
from types import MappingProxyType
from typing import Any, NamedTuple, NoReturn, cast

from persistence._closing import Closing
from persistence._column_kinds import ColumnKind
from persistence._read_only import refuse_write
from persistence._versions import process_versions
from persistence.aggregate import AggregateResult, Metric, check_aggregate, check_kinds
from persistence.backends.base import Backend
from persistence.capabilities import Capabilities
from persistence.errors import (
    ColumnNotAllowedError,
    InvalidQueryError,
    UnsupportedOperatorError,
)
from persistence.policy import AccessPolicy
from persistence.query import Filter, Order, Page, Query
from persistence.redaction import RedactionPolicy
from persistence.relations import Include, RelatedPlan, Relation, plan_includes
from persistence.search import SearchMode, SearchRequest, SearchResult
from persistence.search.embedder import Embedder
from persistence.types import ColumnType, coerce_filters

__all__ = ["PersistenceAgent", "ReadOnlyPersistenceFacade"]

Row = dict[str, Any]


class _Reader(Closing):
    """Reads shared by both facades. Thread-safe when the backend is (all bundled ones are)."""

    __slots__ = ("__backend", "__embedder", "__policy", "__redaction")

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
        # Applied to every row before it leaves the facade (see persistence.redaction).
        self.__redaction = redaction
        self.__embedder = (
            None
            if embeddings is None
            else embeddings
            if isinstance(embeddings, Embedder)
            else Embedder(embeddings)
        )

    @property
    def embedder(self) -> Embedder | None:
        """The embeddings the semantic leg of :meth:`search` uses, or ``None``."""
        return self.__embedder

    @property
    def redaction(self) -> RedactionPolicy | None:
        """The (immutable) redaction policy applied to rows before they leave, or ``None``."""
        return self.__redaction

    def redacted_columns(self, table: str) -> Mapping[str, str]:
        """The redacted columns of ``table`` the policy lets a read return: column -> how
        (``"mask:email"``, ``"hash"``, ``"drop"``, ...); empty without redaction."""
        table = self.__policy.check_read(table, "columns")
        if self.__redaction is None:
            return MappingProxyType({})
        return self.__redaction.specs(table, self.__policy.allowed_columns(table))

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

    def tables(self) -> tuple[str, ...]:
        """The readable tables, sorted."""
        return tuple(sorted(self.__policy.read_tables))

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
        columns are coerced to these types (see :mod:`persistence.types`).

        >>> facade.column_types("leads")["created_at"].kind
        <ColumnKind.TIMESTAMPTZ: 'timestamptz'>
        """
        table = self.__policy.check_read(table, "column_types")
        types = self.__backend.column_types(table) or {}
        allowed = self.__policy.allowed_columns(table)
        return MappingProxyType({c: t for c, t in types.items() if allowed is None or c in allowed})

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
        return self._checked(Query(table, filters=_filters(filters)), "read")[0].filters

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
    ) -> Page:
        """One page of ``table`` matching all ``filters``, with the total number of matches.

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
        page: Page = self._perform(
            self._read_call(table, filters, columns, order, limit, offset, include)
        )
        return page

    async def aread(
        self,
        table: str,
        filters: Iterable[Filter] = (),
        *,
        columns: Sequence[str] | None = None,
        order: Iterable[Order | str] = (),
        limit: int | None = None,
        offset: int = 0,
        include: Iterable[str | Include] = (),
    ) -> Page:
        """:meth:`read`, awaited: the same checks, the backend's I/O on the running loop."""
        await self.aprepare()
        page: Page = await self._perform_async(
            self._read_call(table, filters, columns, order, limit, offset, include)
        )
        return page

    def _read_call(
        self,
        table: str,
        filters: Iterable[Filter],
        columns: Sequence[str] | None,
        order: Iterable[Order | str],
        limit: int | None,
        offset: int,
        include: Iterable[str | Include],
    ) -> _BackendCall:
        """The checks of :meth:`read` and the backend call they lead to."""
        table = self.__policy.check_read(table, "read")
        query = Query(
            table,
            filters=_filters(filters),
            columns=None if columns is None else _names(columns, "columns"),
            order=_names(order, "order"),  # Query turns names into Order
            limit=limit,
            offset=offset,
        )
        query, known = self._checked(query, "read")
        if columns is None:
            # The policy's columns the backend knows: allowed and known by construction.
            readable = self._policy_columns(table, known)
            if readable is not None:
                query = _checked_replace(query, columns=readable)
        # The default: no relation to resolve (nor the backend's relations to list).
        plans = () if include == () else self._plans(table, include, query.columns, known)
        if not plans:
            return _BackendCall("read", (query,))
        if not callable(getattr(self.__backend, "read_related", None)):
            raise UnsupportedOperatorError(
                f"backend {self.__backend.name!r} cannot read related rows",
                operator="include",
                backend=self.__backend.name,
            )
        return _BackendCall("read_related", (query, plans))

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

    def _plans(
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
        table = self.__policy.check_read(table, "data_version")
        own = getattr(self.__backend, "data_version", None)
        if callable(own):
            return int(own(table))
        return process_versions().get(_data_target(self.__backend), table)

    def _note_write(self, table: str) -> None:
        """Move ``table``'s version on after a write (a backend counting its own writes, as the
        memory store does, needs nothing)."""
        if not callable(getattr(self.__backend, "data_version", None)):
            process_versions().bump(_data_target(self.__backend), table)

    def count(self, table: str, filters: Iterable[Filter] = ()) -> int:
        """How many rows of ``table`` match all ``filters`` (values coerced as by :meth:`read`)."""
        count: int = self._perform(self._count_call(table, filters))
        return count

    async def acount(self, table: str, filters: Iterable[Filter] = ()) -> int:
        """:meth:`count`, awaited."""
        await self.aprepare()
        count: int = await self._perform_async(self._count_call(table, filters))
        return count

    def _count_call(self, table: str, filters: Iterable[Filter]) -> _BackendCall:
        table = self.__policy.check_read(table, "count")
        query, _ = self._checked(Query(table, filters=_filters(filters)), "count")
        return _BackendCall("count", (table, query.filters))

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
        result: AggregateResult = self._perform(
            self._aggregate_call(table, filters, group_by, metrics, limit)
        )
        return result

    async def aaggregate(
        self,
        table: str,
        filters: Iterable[Filter] = (),
        *,
        group_by: Iterable[str] = (),
        metrics: Iterable[Metric | str] = ("count",),
        limit: int | None = None,
    ) -> AggregateResult:
        """:meth:`aggregate`, awaited."""
        await self.aprepare()
        result: AggregateResult = await self._perform_async(
            self._aggregate_call(table, filters, group_by, metrics, limit)
        )
        return result

    def _aggregate_call(
        self,
        table: str,
        filters: Iterable[Filter],
        group_by: Iterable[str],
        metrics: Iterable[Metric | str],
        limit: int | None,
    ) -> _BackendCall:
        table = self.__policy.check_read(table, "aggregate")
        names, parsed, cap = check_aggregate(group_by, metrics, limit)
        measured = [m.column for m in parsed if m.column is not None]
        columns = tuple(dict.fromkeys((*names, *measured)))
        query = Query(table, filters=_filters(filters), columns=columns or None)
        query, _ = self._checked(query, "aggregate")
        if self.__redaction is not None:
            self.__redaction.check_aggregate(
                table, names, [(m.function, m.column) for m in parsed if m.column is not None]
            )
        check_kinds(table, names, parsed, self._known(table)[1])
        capabilities = self.__backend.capabilities
        for metric in parsed:
            if not capabilities.aggregates_with(metric.function):
                raise UnsupportedOperatorError(
                    f"backend {self.__backend.name!r} cannot compute {metric.function!r}",
                    operator=metric.function,
                    backend=self.__backend.name,
                )
        return _BackendCall("aggregate", (replace(query, columns=None), names, parsed, cap))

    def search(
        self,
        table: str,
        text: str,
        *,
        filters: Iterable[Filter] = (),
        k: int = 10,
        offset: int = 0,
        mode: SearchMode | str = SearchMode.HYBRID,
    ) -> SearchResult:
        """The ``k`` rows of ``table`` matching all ``filters`` that best match ``text``, best
        first, from rank ``offset`` on (see :mod:`persistence.search`).

        Filters are hard constraints inside every leg: when at least ``offset + k`` rows match
        them, exactly ``k`` come back. Only text columns the policy allows are searched, and
        rows carry only allowed columns. Without embeddings, ``hybrid`` runs the keyword leg and
        says so in ``degraded``; ``semantic`` without embeddings is an ``InvalidQueryError``.

        >>> facade.search("inquiries", "customers who want to stop paying", k=5).rows
        """
        result: SearchResult = self._perform(
            self._search_call(table, text, filters, k, offset, mode)
        )
        return result

    async def asearch(
        self,
        table: str,
        text: str,
        *,
        filters: Iterable[Filter] = (),
        k: int = 10,
        offset: int = 0,
        mode: SearchMode | str = SearchMode.HYBRID,
    ) -> SearchResult:
        """:meth:`search`, awaited (a backend without an awaitable search runs in a worker
        thread)."""
        await self.aprepare()
        call = self._search_call(table, text, filters, k, offset, mode)
        result: SearchResult = await self._perform_async(call)
        return result

    def _search_call(
        self,
        table: str,
        text: str,
        filters: Iterable[Filter],
        k: int,
        offset: int,
        mode: SearchMode | str,
    ) -> _BackendCall:
        table = self.__policy.check_read(table, "search")
        # SearchRequest validates the mode, turning a string into a SearchMode or refusing it.
        request = SearchRequest(text, cast(SearchMode, mode), k, offset)
        query, known = self._checked(Query(table, filters=_filters(filters)), "search")
        readable = self._policy_columns(table, known)
        if readable is not None:
            query = replace(query, columns=readable)
        types = self._known(table)[1]
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
        if request.mode is SearchMode.SEMANTIC and self.__embedder is None:
            raise InvalidQueryError(
                "semantic search needs embeddings: pass embeddings= to the factory "
                "or set RAG_EMBEDDINGS"
            )
        if not callable(getattr(self.__backend, "search", None)):
            raise UnsupportedOperatorError(
                f"backend {self.__backend.name!r} cannot search",
                operator="search",
                backend=self.__backend.name,
            )
        return _BackendCall("search", (query, request, text_columns, self.__embedder))

    # --- the backend call, blocking or awaited -------------------------------------------------

    def _perform(self, call: _BackendCall) -> Any:
        return self._redacted(call, self._call_backend(call))

    async def _perform_async(self, call: _BackendCall) -> Any:
        twin = getattr(self.__backend, "a" + call.method, None)
        if callable(twin):
            return self._redacted(call, await twin(*call.args))
        # A backend without awaitable reads (a caller's own): off the loop, in a worker thread.
        return self._redacted(call, await asyncio.to_thread(self._call_backend, call))

    def _call_backend(self, call: _BackendCall) -> Any:
        return getattr(self.__backend, call.method)(*call.args)

    def _redacted(self, call: _BackendCall, result: Any) -> Any:
        """``result`` as it may leave the facade: rows redacted, when a redaction policy applies
        (see :mod:`persistence.redaction`); counts and aggregates carry no row."""
        redaction = self.__redaction
        if redaction is None or call.method not in _ROW_CALLS:
            return result
        table = call.args[0].table  # every row call starts with its Query
        if call.method == "search":
            if not redaction.applies(table):
                return result
            hits = tuple(replace(h, row=redaction.redact_row(table, h.row)) for h in result.hits)
            return replace(result, hits=hits)
        return redaction.redact_page(table, result)

    async def aprepare(self) -> None:
        """Load, without blocking the running loop, what the checks of every read consult (a
        backend's catalog); the ``a``-methods call it, so calling it first is optional.

        The checks themselves (allow-list, column policy, operators, coercion) are the blocking
        methods' own code, run on cached facts: only the backend's I/O differs.
        """
        prepare = getattr(self.__backend, "aprepare", None)
        if callable(prepare):
            await prepare()

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

    def _known(self, table: str) -> tuple[frozenset[str] | None, Mapping[str, ColumnType]]:
        """The backend's columns of ``table`` (``None`` when it cannot tell) and their types
        (empty when it cannot tell); asked once per call, since a Supabase backend may ask its
        server."""
        types = self.__backend.column_types(table)
        if types is not None:
            return frozenset(types), types
        return self.__backend.columns(table), {}

    def _checked(self, query: Query, operation: str) -> tuple[Query, frozenset[str] | None]:
        """``query`` with its filter values coerced, once the policy and the backend accept it;
        with the backend's known columns. Every read, count and delete goes through here."""
        table = query.table
        referenced = query.referenced_columns()
        self.__policy.check_columns(table, referenced, operation)
        known, types = self._known(table)
        if known is not None:
            for column in sorted(referenced - known):
                raise ColumnNotAllowedError(
                    f"table {table!r} has no column {column!r}",
                    table=table,
                    column=column,
                    operation=operation,
                )
        capabilities = self.__backend.capabilities
        for flt in query.filters:
            if not capabilities.supports(flt.op):
                raise UnsupportedOperatorError(
                    f"backend {self.__backend.name!r} does not support operator {flt.op.value!r}",
                    operator=flt.op.value,
                    backend=self.__backend.name,
                )
        if self.__redaction is not None:
            self.__redaction.check_query(table, query.filters, query.order, operation)
        filters = coerce_filters(table, query.filters, types)
        # By identity: Filter("x", EQ, 1) == Filter("x", EQ, True), yet only one is a boolean.
        if any(new is not old for new, old in zip(filters, query.filters, strict=True)):
            query = _checked_replace(query, filters=filters)
        return query, known

    def _backend(self) -> Backend:
        return self.__backend

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


#: The backend calls that return rows: what redaction applies to.
_ROW_CALLS = frozenset({"read", "read_related", "search"})


class _BackendCall(NamedTuple):
    """The backend method a checked request leads to (``read``, ``count``, ...) and its
    arguments: what :meth:`_Reader._perform` calls, or awaits as its ``a``-twin."""

    method: str
    args: tuple[Any, ...]


def _data_target(backend: Backend) -> Hashable:
    """The store a backend writes to: its ``data_target`` when it declares one, else its name
    (all backends of that name then share one version per table: too many cache misses at
    worst, never a stale hit)."""
    target = getattr(backend, "data_target", None)
    return target if isinstance(target, Hashable) and target is not None else (backend.name,)


_QUERY_FIELDS = tuple(f.name for f in fields(Query))


def _checked_replace(query: Query, **changes: Any) -> Query:
    """``replace(query, **changes)`` for values checked already, without checking them again.

    Only for what a ``Query`` would accept as given: coerced ``Filter`` objects (built, so
    validated), or the policy's columns (identifiers, checked when the policy was made) as a
    tuple. ``replace`` would run every check of the query anew, a dozen identifier matches for
    a wide table, on every read.
    """
    new = object.__new__(Query)
    for name in _QUERY_FIELDS:
        object.__setattr__(new, name, changes[name] if name in changes else getattr(query, name))
    return new


def _filters(filters: Iterable[Filter]) -> tuple[Filter, ...]:
    if isinstance(filters, Filter | str | Mapping) or not isinstance(filters, Iterable):
        raise InvalidQueryError(
            "filters must be a sequence of Filter objects, e.g. [Filter('email', Op.EQ, 'a@x.io')]",
            field="filters",
        )
    return tuple(filters)


def _names(values: Iterable[Any], what: str) -> tuple[Any, ...]:
    # tuple(5) would raise a bare TypeError, and tuple("email") would split the name into
    # letters: say what was expected instead.
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise InvalidQueryError(
            f"{what} must be a sequence of column names, not {type(values).__name__}, "
            f"e.g. {what}=['email']",
            field=what,
        )
    return tuple(values)


def _refusing(
    operation: str,
    doc: str = "Always raises: the facade is read-only.",
    *,
    names_table: bool = True,
) -> Callable[..., NoReturn]:
    """A write-shaped method that refuses ``operation``, naming the table it was given unless
    ``names_table`` is false (``rpc`` and ``execute`` take a function or a statement)."""

    def refuse(self: object, table: object = None, *args: object, **kwargs: object) -> NoReturn:
        refuse_write(operation, table if names_table else None, "this facade")

    refuse.__name__ = refuse.__qualname__ = operation
    refuse.__doc__ = doc
    return refuse


class ReadOnlyPersistenceFacade(_Reader):
    """Reads allow-listed tables; every write-shaped method raises ``PersistencePermissionError``.

    Built by :func:`persistence.create_read_only_facade` with an empty write allow-list::

        facade = create_read_only_facade(kind="memory")
        page = facade.read("leads", [Filter("email", Op.EQ, "a@x.io")], limit=10)
    """

    __slots__ = ()

    write = _refusing("write")
    insert = _refusing("insert")
    upsert = _refusing("upsert")
    update = _refusing("update")
    delete = _refusing("delete")
    batch = _refusing("batch")
    rpc = _refusing(
        "rpc",
        "Always raises: no stored procedure is callable through the facade.",
        names_table=False,
    )
    execute = _refusing(
        "execute",
        "Always raises: no raw statement is executable through the facade.",
        names_table=False,
    )


class PersistenceAgent(_Reader):
    """Reads and writes within its write allow-list (business tables minus governance tables).

    For seeding data and trusted callers; never hand one to an LLM.
    """

    __slots__ = ()

    def write(self, table: str, row: Mapping[str, Any]) -> Row:
        """Insert one row; return it as stored (with its ``id``)."""
        return self.batch(table, [row])[0]

    def batch(self, table: str, rows: Iterable[Mapping[str, Any]]) -> list[Row]:
        """Insert ``rows`` atomically (all or none); return them as stored."""
        table = self.policy.check_write(table, "batch")
        checked = self._checked_rows(table, rows, "batch")
        if not checked:
            return []
        try:
            return self._backend().insert(table, checked)
        finally:
            # Even after a failure: the write may have happened before the error reached us.
            self._note_write(table)

    def upsert(
        self,
        table: str,
        rows: Mapping[str, Any] | Iterable[Mapping[str, Any]],
        *,
        on_conflict: str = "id",
    ) -> list[Row]:
        """Insert, or update the given columns where ``on_conflict`` matches an existing row."""
        table = self.policy.check_write(table, "upsert")
        items = [rows] if isinstance(rows, Mapping) else rows
        checked = self._checked_rows(table, items, "upsert")
        self.policy.check_columns(table, [on_conflict], "upsert")
        if not checked:
            return []
        try:
            return self._backend().upsert(table, checked, on_conflict)
        finally:
            self._note_write(table)

    def delete(self, table: str, filters: Iterable[Filter]) -> int:
        """Delete the rows matching ``filters`` (at least one: no table is emptied by accident)."""
        table = self.policy.check_write(table, "delete")
        query = Query(table, filters=_filters(filters))
        if not query.filters:
            raise InvalidQueryError("delete needs at least one filter", field="filters")
        query, _ = self._checked(query, "delete")
        try:
            return self._backend().delete(table, query.filters)
        finally:
            self._note_write(table)

    def _checked_rows(
        self, table: str, rows: Iterable[Mapping[str, Any]], operation: str
    ) -> list[Row]:
        checked: list[Row] = []
        for row in rows:
            if not isinstance(row, Mapping):
                raise InvalidQueryError(
                    f"{operation} takes mappings, not {type(row).__name__}", field="rows"
                )
            self.policy.check_columns(table, row.keys(), operation)
            checked.append(dict(row))
        return checked
