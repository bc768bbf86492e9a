"""The async twins of ``RAGAgent``'s methods: the same pipeline, its I/O awaited."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Unpack, overload

from persistence import Filter, Include, Metric, Order, get_logger
from persistence.search import DEFAULT_K
from persistence.steps import adrive
from rag_agent.agent_options import _RunOptions
from rag_agent.envelope import Envelope
from rag_agent.pipeline.pipeline import Pipeline
from rag_agent.pipeline.ranking import DEFAULT_MODE, search_steps
from rag_agent.runtime.effects import perform_async
from rag_agent.specs import Condition

_log = get_logger("rag_agent")


class AsyncTwins:
    """``RAGAgent``'s async twins: ``arun``, ``aread``, ``aaggregate``, ``asearch``, each the
    same steps as its blocking method, its I/O awaited."""

    _pipeline: Pipeline

    if TYPE_CHECKING:

        def error_envelope(self, table: object, error: BaseException | str) -> Envelope: ...

    @overload
    async def arun(
        self, text: str, *, return_json: Literal[False] = ..., **options: Unpack[_RunOptions]
    ) -> Envelope: ...

    @overload
    async def arun(
        self, text: str, *, return_json: Literal[True], **options: Unpack[_RunOptions]
    ) -> dict[str, Any]: ...

    async def arun(
        self,
        text: str,
        *,
        table: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
        include_raw: bool = False,
        filters: Mapping[str, Any] | Sequence[Condition] | None = None,
        count_only: bool | None = None,
        include: Sequence[str | Include] | None = None,
        return_json: bool = False,
    ) -> Envelope | dict[str, Any]:
        """The async twin of :meth:`run`: the same arguments, steps and envelope, its I/O
        awaited on the running event loop (the facade's ``aread``/``acount``/``aaggregate``,
        the model's ``ainvoke``) instead of blocking it. Never raises for bad input or a
        failing backend::

            envelope = await rag.arun("find leads at acme")
        """
        page = (limit, offset, include_raw)
        return await self._aanswer(
            table,
            return_json,
            lambda log: self._pipeline.arun(log, text, table, filters, page, count_only, include),
        )

    async def aread(
        self,
        table: str,
        filters: Iterable[Filter] = (),
        *,
        columns: Sequence[str] | None = None,
        order: Iterable[Order | str] = (),
        limit: int | None = None,
        offset: int | None = None,
        include_raw: bool = False,
        count_only: bool = False,
        include: Sequence[str | Include] = (),
        return_json: bool = False,
    ) -> Envelope | dict[str, Any]:
        """The async twin of :meth:`read`; never raises."""
        page = (limit, offset, include_raw)
        return await self._aanswer(
            table,
            return_json,
            lambda log: self._pipeline.aread(
                log, table, filters, columns, order, page, count_only, include
            ),
        )

    async def aaggregate(
        self,
        table: str,
        filters: Iterable[Filter] = (),
        *,
        group_by: Sequence[str] = (),
        metrics: Sequence[Metric | str] = ("count",),
        limit: int | None = None,
        return_json: bool = False,
    ) -> Envelope | dict[str, Any]:
        """The async twin of :meth:`aggregate`; never raises."""
        return await self._aanswer(
            table,
            return_json,
            lambda log: self._pipeline.aaggregate(log, table, filters, group_by, metrics, limit),
        )

    async def asearch(
        self,
        table: str,
        text: str,
        filters: Iterable[Filter] = (),
        *,
        k: int | None = None,
        offset: int | None = None,
        mode: str = DEFAULT_MODE.value,
        include_raw: bool = False,
        return_json: bool = False,
    ) -> Envelope | dict[str, Any]:
        """The async twin of :meth:`search` (the facade's ``asearch``); never raises."""
        page = (DEFAULT_K if k is None else k, offset, include_raw)
        pipeline = self._pipeline
        return await self._aanswer(
            table,
            return_json,
            lambda log: adrive(
                search_steps(pipeline, log, table, text, filters, page, mode),
                functools.partial(perform_async, pipeline),
            ),
        )

    async def _aanswer(
        self, table: object, return_json: object, body: Callable[[Any], Awaitable[Envelope]]
    ) -> Envelope | dict[str, Any]:
        log = _log.bind()
        try:
            envelope = await body(log)
            return envelope.to_json() if return_json else envelope
        except Exception as exc:  # the contract: arun() reports, it does not raise
            self._pipeline.log_error(log, "rag.error", exc, step="envelope")
            envelope = self.error_envelope(table, exc)
            return envelope.to_json() if return_json else envelope
