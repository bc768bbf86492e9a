"""The trace of one run (``run(..., trace=True)``): each step, each backend read, their timings.

A :class:`Trace` is made per traced run and made current (a context variable, so an awaited run
and its worker threads see their own). The pipeline's calls are timed where they are answered
(:func:`traced_perform`, :func:`traced_perform_async`): every read, count, search, aggregate, the
vocabulary, the model's extraction and the fallback, whose own steps (each model call, each tool
call, refused ones included) come back with its result. Steps that are not calls (the rules'
reading) time themselves with :func:`timed`.

What a step shows is bounded and holds no value: a table, conditions as ``column op``, row
counts, a reason; never a filter's value, a row or a secret. At most :data:`MAX_TRACE_STEPS` steps
are kept; the others are counted (``omitted``).

Thread-safety: a trace belongs to one run; its list is appended under a lock (a fallback's tool
calls may run in parallel threads).
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any

from rag_agent.runtime.effects import Call

__all__ = [
    "MAX_TRACE_STEPS",
    "Trace",
    "current_trace",
    "timed",
    "traced_perform",
    "traced_perform_async",
    "tracing",
]

#: Steps one trace keeps (a fallback's inner steps count as one with it).
MAX_TRACE_STEPS = 64

_CURRENT: contextvars.ContextVar[Trace | None] = contextvars.ContextVar("rag_trace", default=None)


class Trace:
    """The steps of one run, in the order they ended, and its start."""

    def __init__(self, timer: Callable[[], float] = time.perf_counter) -> None:
        self.timer = timer
        self.started = timer()
        self.steps: list[dict[str, Any]] = []
        self.omitted = 0
        self._lock = threading.Lock()

    def add(self, step: dict[str, Any]) -> None:
        """Keep ``step`` (``{"step": name, "ms": …, …}``), or count it once the trace is full."""
        with self._lock:
            if len(self.steps) < MAX_TRACE_STEPS:
                self.steps.append(step)
            else:
                self.omitted += 1

    def note_last(self, note: str) -> None:
        """Say why the last step ran (a reformulation's reason)."""
        with self._lock:
            if self.steps:
                self.steps[-1]["note"] = note

    def finish(self) -> dict[str, Any]:
        """The trace as ``metadata.trace`` takes it, its total time measured now."""
        with self._lock:
            return {
                "total_ms": (self.timer() - self.started) * 1000,
                "steps": list(self.steps),
                "omitted": self.omitted,
            }


def current_trace() -> Trace | None:
    """The trace of the run in progress, if it is traced."""
    return _CURRENT.get()


@contextlib.contextmanager
def tracing(trace: Trace | None) -> Iterator[None]:
    """Make ``trace`` current for the block (nothing changes for ``None``)."""
    if trace is None:
        yield
        return
    token = _CURRENT.set(trace)
    try:
        yield
    finally:
        _CURRENT.reset(token)


@contextlib.contextmanager
def timed(step: str, **detail: Any) -> Iterator[None]:
    """Time the block as ``step`` in the current trace (free when the run is not traced)."""
    trace = _CURRENT.get()
    if trace is None:
        yield
        return
    started = trace.timer()
    try:
        yield
    finally:
        trace.add({"step": step, "ms": (trace.timer() - started) * 1000, **detail})


def traced_perform(perform: Callable[[Call], Any], trace: Trace) -> Callable[[Call], Any]:
    """``perform`` with each call timed into ``trace``."""

    def answer(call: Call) -> Any:
        started = trace.timer()
        with _recorded(trace, call, started) as record:
            record.result = perform(call)
        return record.result

    return answer


def traced_perform_async(
    perform: Callable[[Call], Awaitable[Any]], trace: Trace
) -> Callable[[Call], Awaitable[Any]]:
    """The awaitable twin of :func:`traced_perform`."""

    async def answer(call: Call) -> Any:
        started = trace.timer()
        with _recorded(trace, call, started) as record:
            record.result = await perform(call)
        return record.result

    return answer


class _Record:
    result: Any = None


@contextlib.contextmanager
def _recorded(trace: Trace, call: Call, started: float) -> Iterator[_Record]:
    """Add ``call``'s step to ``trace`` when the block ends: its result's sizes, or its error."""
    record = _Record()
    try:
        yield record
    except Exception as exc:
        trace.add(_step(call, None, trace.timer() - started, exc))
        raise
    trace.add(_step(call, record.result, trace.timer() - started))


def _step(
    call: Call, result: Any, seconds: float, error: Exception | None = None
) -> dict[str, Any]:
    step: dict[str, Any] = {"step": call.port, "ms": seconds * 1000}
    if call.port in ("read", "count", "aggregate", "search") and call.args:
        table = call.args[0]
        step["table"] = table if isinstance(table, str) else "?"
        filters = call.args[1] if len(call.args) > 1 else call.kwargs.get("filters", ())
        step["conditions"] = _conditions(filters or call.kwargs.get("filters", ()))
    elif call.port in ("extract", "fallback") and call.args:
        step["table"] = getattr(call.args[0], "table", None)
    if error is not None:
        step["status"] = "error"
        step["note"] = type(error).__name__
        return step
    step.update(_sizes(call.port, result))
    return step


def _conditions(filters: object) -> list[str]:
    if not isinstance(filters, Sequence):
        return []
    shown = []
    for flt in filters[:16]:
        op = getattr(getattr(flt, "op", None), "value", getattr(flt, "op", "?"))
        shown.append(f"{getattr(flt, 'column', '?')} {op}")
    return shown


def _sizes(port: str, result: Any) -> Mapping[str, Any]:
    if port == "read":
        return {"rows": len(result.rows), "total": result.total_count}
    if port == "count":
        return {"total": int(result)}
    if port == "aggregate":
        return {"rows": len(result.groups), "total": result.matched}
    if port == "search":
        return {"rows": len(result.hits), "total": result.total_count}
    if port == "fallback":
        inner = [dict(step) for step in getattr(result, "steps", ())]
        rows = sum(len(read.rows) for read in getattr(result, "reads", ()))
        return {"rows": rows, "steps": inner, **({"status": "error"} if result.error else {})}
    return {}
