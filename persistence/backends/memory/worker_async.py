"""Awaitable twins for a backend whose reads do no I/O (the memory backend).

Each ``a``-method runs its blocking twin in a worker thread (``asyncio.to_thread``), never on
the event loop's own thread. A read of an in-process store waits for nothing, but it is CPU
work whose cost grows with the rows and the request (a sort, a ranking over every row, an
aggregate), and a coroutine holding the loop for it stalls every other session of a server:
one hostile MCP request once held another session's one-row count for 38 s. The thread hand-off
costs tens of microseconds. The facade finds the twins by name (``aread`` next to ``read``); a
backend with real I/O (PostgreSQL, Supabase) has its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from persistence.aggregate import AggregateResult, Metric
from persistence.query import Filter, Page, Query
from persistence.relations import RelatedPlan

__all__ = ["WorkerAsyncReads"]


class WorkerAsyncReads:
    """Mixin: ``aread``, ``aread_related``, ``acount``, ``aaggregate`` and ``asearch`` as
    their blocking twins, run in a worker thread."""

    __slots__ = ()

    async def aread(self, query: Query) -> Page:
        page: Page = await asyncio.to_thread(self.read, query)  # type: ignore[attr-defined]
        return page

    async def aread_related(self, query: Query, plans: Sequence[RelatedPlan]) -> Page:
        page: Page = await asyncio.to_thread(self.read_related, query, plans)  # type: ignore[attr-defined]
        return page

    async def acount(self, table: str, filters: Sequence[Filter]) -> int:
        count: int = await asyncio.to_thread(self.count, table, filters)  # type: ignore[attr-defined]
        return count

    async def aaggregate(
        self, query: Query, group_by: tuple[str, ...], metrics: tuple[Metric, ...], limit: int
    ) -> AggregateResult:
        result: AggregateResult = await asyncio.to_thread(
            self.aggregate,  # type: ignore[attr-defined]
            query,
            group_by,
            metrics,
            limit,
        )
        return result

    async def asearch(self, *args: Any) -> Any:
        return await asyncio.to_thread(self.search, *args)  # type: ignore[attr-defined]
