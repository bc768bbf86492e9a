"""The I/O of a pipeline run, as requests: what ``RAGAgent.run`` and ``RAGAgent.arun`` share.

The pipeline (:mod:`rag_agent.pipeline.pipeline`) is written once, as generators that ``yield`` a
:class:`Call` wherever they need the outside world (a page, a count, an aggregate, the model's
reading of a question, the fallback) and get its answer back (or its exception, raised where
they asked: see :mod:`persistence.steps`). :func:`perform` answers a call with the blocking
methods (``facade.read``, ``extractor(request)``), :func:`perform_async` with their awaitable
twins (``facade.aread``, ``extractor.acall(request)``). Every check, the cache, the
reformulations, the limiter and the envelope stay in the one pipeline.

A hook without an awaitable twin (a plain function given as ``extractor=`` or ``fallback=``)
is called in a worker thread by :func:`perform_async`, so a blocking model call never stalls
the event loop; the bundled model hooks have ``acall`` and use the model's ``ainvoke``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, Protocol, TypeVar

from persistence import ReadOnlyPersistenceFacade

__all__ = ["PREPARE", "Call", "Steps", "perform", "perform_async"]

T = TypeVar("T")

#: ``prepare`` loads what the facade's checks consult (a backend's catalog) before any of them.
Port = Literal[
    "prepare", "read", "count", "aggregate", "search", "vocabulary", "extract", "fallback"
]
_FACADE_PORTS = frozenset({"read", "count", "aggregate", "search", "vocabulary"})


@dataclass(frozen=True, slots=True)
class Call:
    """One request of the pipeline: which ``port`` and its arguments."""

    port: Port
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


#: The first call of every step: the facade's catalog loaded (a no-op when blocking). Frozen, so
#: one instance serves every run.
PREPARE = Call("prepare")


class Parts(Protocol):
    """What answers the calls: a pipeline's facade and hooks."""

    @property
    def facade(self) -> ReadOnlyPersistenceFacade: ...

    @property
    def extractor(self) -> Callable[..., Any] | None: ...

    @property
    def fallback(self) -> Callable[..., Any] | None: ...


#: A pipeline step that yields :class:`Call` requests and returns a ``T``.
Steps = Generator[Call, Any, T]


def perform(pipeline: Parts, call: Call) -> Any:
    """Answer ``call`` with the blocking methods of ``pipeline``'s parts."""
    if call.port == "prepare":
        return None  # the blocking facade loads its catalog on first use
    if call.port in _FACADE_PORTS:
        return getattr(pipeline.facade, call.port)(*call.args, **call.kwargs)
    return _hook(pipeline, call.port)(*call.args, **call.kwargs)


async def perform_async(pipeline: Parts, call: Call) -> Any:
    """Answer ``call`` with the awaitable twins, on the running loop and in its thread."""
    if call.port == "prepare":
        return await pipeline.facade.aprepare()
    if call.port in _FACADE_PORTS:
        method = getattr(pipeline.facade, "a" + call.port)
        return await method(*call.args, **call.kwargs)
    hook = _hook(pipeline, call.port)
    twin = getattr(hook, "acall", None)
    if callable(twin):
        return await twin(*call.args, **call.kwargs)
    if inspect.iscoroutinefunction(hook):
        return await hook(*call.args, **call.kwargs)
    # A caller's blocking hook (a model call, seconds long): off the loop, in a worker thread.
    return await asyncio.to_thread(hook, *call.args, **call.kwargs)


def _hook(pipeline: Parts, port: str) -> Callable[..., Any]:
    hook = pipeline.extractor if port == "extract" else pipeline.fallback
    if hook is None:  # the pipeline asks only for hooks it has
        raise RuntimeError(f"no {port} hook is configured")
    return hook
