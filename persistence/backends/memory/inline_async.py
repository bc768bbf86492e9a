"""Awaitable twins for a backend whose reads do no I/O (the memory backend).

Each ``a``-method runs its blocking twin inline, on the event loop's own thread: a read of an
in-process store takes microseconds and waits for nothing, so handing it to a worker thread
would cost more than it saves. The facade finds the twins by name (``aread`` next to
``read``); a backend with real I/O (PostgreSQL, Supabase) has its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from persistence.aggregate import AggregateResult, Metric
from persistence.query import Filter, Page, Query
from persistence.relations import RelatedPlan

__all__ = ["InlineAsyncReads"]


class InlineAsyncReads:
    """Mixin: ``aread``, ``aread_related``, ``acount``, ``aaggregate`` and ``asearch`` as
    their blocking twins, called inline."""

    __slots__ = ()

    async def aread(self, query: Query) -> Page:
        page: Page = self.read(query)  # type: ignore[attr-defined]
        return page

    async def aread_related(self, query: Query, plans: Sequence[RelatedPlan]) -> Page:
        page: Page = self.read_related(query, plans)  # type: ignore[attr-defined]
        return page

    async def acount(self, table: str, filters: Sequence[Filter]) -> int:
        count: int = self.count(table, filters)  # type: ignore[attr-defined]
        return count

    async def aaggregate(
        self, query: Query, group_by: tuple[str, ...], metrics: tuple[Metric, ...], limit: int
    ) -> AggregateResult:
        result: AggregateResult = self.aggregate(query, group_by, metrics, limit)  # type: ignore[attr-defined]
        return result

    async def asearch(self, *args: Any) -> Any:
        return self.search(*args)  # type: ignore[attr-defined]
