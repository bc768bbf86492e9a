"""The backend interface: a handful of reads, plus the writes ``PersistenceAgent`` needs.

Backends receive validated :class:`~persistence.query.Query` objects and table names the
facade has already checked against its policy. They translate their own exceptions into the
``BackendError`` family at their boundary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from persistence.aggregate import AggregateResult, Metric
from persistence.capabilities import Capabilities
from persistence.query import Filter, Page, Query
from persistence.search import SearchRequest, SearchResult
from persistence.search.embedder import Embedder
from persistence.values.types import ColumnType

__all__ = ["AsyncReads", "Backend", "SearchingBackend"]


@runtime_checkable
class Backend(Protocol):
    """What the facade needs of a store."""

    #: Short name used in errors and logs, e.g. ``"memory"``.
    name: str

    @property
    def capabilities(self) -> Capabilities: ...

    def read(self, query: Query) -> Page:
        """One page of ``query`` and the total number of matching rows."""
        ...

    def count(self, table: str, filters: Sequence[Filter]) -> int:
        """How many rows of ``table`` match ``filters``."""
        ...

    def aggregate(
        self, query: Query, group_by: tuple[str, ...], metrics: tuple[Metric, ...], limit: int
    ) -> AggregateResult:
        """``metrics`` per group of the rows matching ``query.filters`` (see
        :mod:`persistence.aggregate` for the order, the cap and the result types); at most
        ``limit`` groups. Only the metric functions in ``capabilities.aggregates`` are asked."""
        ...

    def columns(self, table: str) -> frozenset[str] | None:
        """The table's known columns, or ``None`` when the backend cannot tell."""
        ...

    def column_types(self, table: str) -> Mapping[str, ColumnType] | None:
        """The table's known columns and their types, in table order, or ``None`` when the
        backend cannot tell (the facade then asks :meth:`columns` and coerces nothing).

        Called before every read, so it must be cheap: cache what a server says.
        """
        ...

    def insert(self, table: str, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Insert ``rows`` atomically; return them as stored (with ``id``)."""
        ...

    def upsert(
        self, table: str, rows: Sequence[Mapping[str, Any]], on_conflict: str = "id"
    ) -> list[dict[str, Any]]:
        """Insert ``rows`` or update the given columns where ``on_conflict`` matches."""
        ...

    def delete(self, table: str, filters: Sequence[Filter]) -> int:
        """Delete matching rows (``filters`` is never empty); return how many."""
        ...

    def close(self) -> None:
        """Release connections; the backend may not be used afterwards."""
        ...


class SearchingBackend(Backend, Protocol):
    """A backend that can rank rows (:meth:`ReadOnlyPersistenceFacade.search`); optional, found by
    ``getattr`` like ``read_related``."""

    def search(
        self,
        query: Query,
        request: SearchRequest,
        text_columns: tuple[str, ...],
        embedder: Embedder | None,
    ) -> SearchResult:
        """The rows of ``query.table`` matching ``query.filters`` (hard constraints in every leg),
        ranked by ``request`` over ``text_columns`` (allowed text columns; the keyword leg reads
        them, the semantic leg embeds them when the backend keeps no stored vectors), each row
        carrying ``query.columns`` (all when ``None``). Without ``embedder`` a hybrid request
        runs the keyword leg alone and says so in ``degraded``."""
        ...


class AsyncReads(Protocol):
    """The awaitable twins a backend may add next to its blocking reads, found by name like
    ``read_related`` (``aread`` next to ``read``...): the facade's ``aread``, ``acount``,
    ``aaggregate`` await them on the running loop. A backend without them still serves those
    methods, its blocking reads then running in a worker thread. Each twin takes the blocking
    method's arguments and answers alike; ``aread_related`` and ``asearch`` follow the same
    rule. See docs/async.md."""

    async def aprepare(self) -> None:
        """Load what :meth:`Backend.column_types` and :meth:`Backend.columns` answer from (a
        catalog), so the facade's checks never wait on I/O."""
        ...

    async def aread(self, query: Query) -> Page: ...

    async def acount(self, table: str, filters: Sequence[Filter]) -> int: ...

    async def aaggregate(
        self, query: Query, group_by: tuple[str, ...], metrics: tuple[Metric, ...], limit: int
    ) -> AggregateResult: ...

    async def aclose(self) -> None:
        """Release the awaitable connections (on the loop that opened them)."""
        ...
