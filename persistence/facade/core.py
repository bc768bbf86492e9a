"""The state every facade holds and the checks every read goes through: ``_ReaderCore``."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import fields, replace
from types import MappingProxyType
from typing import Any, NamedTuple

from persistence.backends.base import Backend
from persistence.capabilities import Capabilities
from persistence.closing import Closing
from persistence.errors import (
    ColumnNotAllowedError,
    InvalidQueryError,
    UnsupportedOperatorError,
)
from persistence.facade.read_plans import ReadPlans
from persistence.facade.versions import process_versions
from persistence.policy import AccessPolicy
from persistence.query import Filter, Query
from persistence.redaction import RedactionPolicy
from persistence.search.embedder import Embedder
from persistence.values.types import ColumnType, coerce_filters
from persistence.vocabulary import SchemaVocabulary

#: A learned vocabulary is learned again after this long even when no write was seen (another
#: process may have written the database).
VOCABULARY_TTL_SECONDS = 300.0


class _ReaderCore(Closing):
    """The backend, policies and embeddings both facades hold, and the checks of every read.
    Thread-safe when the backend is (all bundled ones are)."""

    __slots__ = (
        "__backend", "__embedder", "__policy", "__redaction", "_plans", "_vocabulary",
        "_vocabulary_lock",
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

    def vocabulary(self, *, refresh: bool = False) -> SchemaVocabulary:
        """The database's vocabulary (:class:`~persistence.vocabulary.SchemaVocabulary`):
        learned on first use through this facade's own reads, then kept while no table was
        written (its ``data_version``) and for at most :data:`VOCABULARY_TTL_SECONDS`;
        ``refresh=True`` learns it again now."""
        tables = self.tables()
        versions = tuple(self.data_version(t) for t in tables)
        now = time.monotonic()
        with self._vocabulary_lock:
            kept = self._vocabulary
            if (
                not refresh
                and kept is not None
                and kept[1] == versions
                and now - kept[2] < VOCABULARY_TTL_SECONDS
            ):
                return kept[0]
            learned = SchemaVocabulary.learn(self, tables=tables)  # type: ignore[arg-type]
            self._vocabulary = (learned, versions, now)
            return learned

    async def avocabulary(self, *, refresh: bool = False) -> SchemaVocabulary:
        """:meth:`vocabulary`, awaited: learned in a worker thread, never on the event loop."""
        return await asyncio.to_thread(self.vocabulary, refresh=refresh)

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

    def tables(self) -> tuple[str, ...]:
        """The readable tables, sorted."""
        return tuple(sorted(self.__policy.read_tables))

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

    # --- the backend call, blocking or awaited -------------------------------------------------

    def _perform(self, call: _BackendCall) -> Any:
        return self._redacted(call, self._call_backend(call))

    async def _perform_async(self, call: _BackendCall) -> Any:
        if call.reader is not None:
            return self._redacted(call, await call.reader.aread(*call.args))
        twin = getattr(self.__backend, "a" + call.method, None)
        if callable(twin):
            return self._redacted(call, await twin(*call.args))
        # A backend without awaitable reads (a caller's own): off the loop, in a worker thread.
        return self._redacted(call, await asyncio.to_thread(self._call_backend, call))

    def _call_backend(self, call: _BackendCall) -> Any:
        if call.reader is not None:
            return call.reader.read(*call.args)
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
        query, known, _ = self._checked_facts(query, operation)
        return query, known

    def _checked_facts(
        self,
        query: Query,
        operation: str,
        facts: tuple[frozenset[str] | None, Mapping[str, ColumnType]] | None = None,
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
        capabilities = self.__backend.capabilities
        for flt in query.filters:
            if not capabilities.supports(flt.op):
                raise UnsupportedOperatorError(
                    f"backend {self.__backend.name!r} does not support operator {flt.op.value!r}",
                    operator=flt.op.value,
                    backend=self.__backend.name,
                )
        if self.__redaction is not None:
            self.__redaction.check_table(table, known)
            self.__redaction.check_query(table, query.filters, query.order, operation)
        filters = coerce_filters(table, query.filters, types)
        # By identity: Filter("x", EQ, 1) == Filter("x", EQ, True), yet only one is a boolean.
        if any(new is not old for new, old in zip(filters, query.filters, strict=True)):
            query = _checked_replace(query, filters=filters)
        return query, known, types

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
    arguments: what :meth:`_ReaderCore._perform` calls, or awaits as its ``a``-twin."""

    method: str
    args: tuple[Any, ...]
    #: A read plan's backend reader (see persistence.facade.read_plans): ``read``/``aread`` it
    #: instead of the backend's method.
    reader: Any = None


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
