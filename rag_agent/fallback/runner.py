"""The runner: one grounded fallback run, and the pipeline hook around it.

:class:`AgentFallback` builds an agent graph (LangChain's ``create_agent``) over the run's own
tools (:mod:`.tools`), waits for it on a worker thread within the overall timeout (the run's LLM
deadline, :mod:`rag_agent.runtime.deadline`: what extraction left of it), and turns the
model's final answer into :class:`FallbackOutcome`: the ledger entries of the rows it cited *and*
read, the number of cited ids dropped because nothing read them, and counters. A model that
raises, the step limit or the timeout give an outcome with ``error``, never an exception.

The worker thread does not outlive the timeout: every model call is given the seconds left as its
request timeout (models that declare a ``timeout`` setting, as ``ChatOpenAI`` does), and every
tool call checks the deadline first, so when the timeout passes the worker's call returns and it
ends; the run waits for that (at most :data:`JOIN_GRACE_SECONDS` more, then logs
``rag.fallback.overrun``: a model that ignores its timeout).
:class:`PipelineFallback` adapts it to the pipeline's :class:`~rag_agent.hooks.FallbackRunner`.
"""

from __future__ import annotations

import asyncio
import contextvars
import datetime as dt
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain.agents.structured_output import ToolStrategy
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, ToolMessage

from persistence import ReadOnlyPersistenceFacade, get_logger
from rag_agent.envelope.assemble import utc_now
from rag_agent.fallback.ledger import LedgerEntry, id_key
from rag_agent.fallback.prompt import FinalAnswer, final_answer, request_message, system_prompt
from rag_agent.fallback.scope import FallbackScope
from rag_agent.fallback.tools import FallbackSession, FallbackStopped, FallbackTimeoutError
from rag_agent.hooks import FallbackCall, FallbackRead, FallbackRequest, FallbackResult
from rag_agent.runtime.deadline import thinking, timeout_kwargs
from rag_agent.settings import RAGSettings

__all__ = [
    "DEFAULT_FALLBACK_TIMEOUT_SECONDS",
    "JOIN_GRACE_SECONDS",
    "AgentFallback",
    "FallbackOutcome",
    "PipelineFallback",
    "create_fallback_runner",
]

#: Overall wall-clock budget of one fallback run built without settings (an agent's fallback
#: gets what is left of ``RAG_LLM_DEADLINE_S`` instead).
DEFAULT_FALLBACK_TIMEOUT_SECONDS = 60.0
#: How long past its timeout a run waits for its worker thread to end. The worker's model call
#: was given the seconds left as its timeout and its next tool call sees the cancellation, so a
#: well-behaved model ends within this; a model that ignores its timeout is left to end on its
#: (daemon) thread rather than hold the caller past its deadline.
JOIN_GRACE_SECONDS = 0.1
_MAX_ERROR_TEXT = 300

_log = get_logger("rag_agent.fallback")

Stopped = Literal["answer", "no_answer", "step_limit", "timeout", "error"]


@dataclass(frozen=True, slots=True)
class FallbackOutcome:
    """What one fallback run produced. ``records`` are ledger entries only, never model text."""

    records: tuple[LedgerEntry, ...] = ()
    answer: str | None = None
    error: str | None = None
    error_type: str | None = None
    #: Ids the final answer cited that no tool call read: dropped (the envelope's
    #: ``metadata.fallback_dropped_ids``).
    dropped_ids: int = 0
    model_calls: int = 0
    tool_calls: int = 0
    refused_tool_calls: int = 0
    rows_read: int = 0
    #: Every read the tools made (table, filters, rows returned), in order.
    calls: tuple[FallbackCall, ...] = ()
    #: What ran, in order: model calls and tool calls, refused ones included (the trace).
    steps: tuple[dict[str, Any], ...] = ()
    stopped: Stopped = "answer"
    exception: BaseException | None = field(default=None, repr=False, compare=False)

    def metadata(self) -> dict[str, Any]:
        """The counters, as the ``rag.fallback.done`` event logs them (``fallback_*`` keys)."""
        return {
            "fallback_model_calls": self.model_calls,
            "fallback_tool_calls": self.tool_calls,
            "fallback_refused_tool_calls": self.refused_tool_calls,
            "fallback_rows_read": self.rows_read,
            "fallback_dropped_ids": self.dropped_ids,
            "fallback_stopped": self.stopped,
        }


class _Budget(AgentMiddleware):
    """Counts model calls against the step limit, checks the deadline before each call and
    gives the call the seconds left as its request timeout."""

    def __init__(self, session: FallbackSession) -> None:
        super().__init__()
        self._session = session

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        bounded = self._bounded(request)
        started = time.perf_counter()
        try:
            response = handler(bounded)
        finally:
            self._traced_model_call(started)
        return self._checked(response)

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        bounded = self._bounded(request)
        started = time.perf_counter()
        try:
            response = await handler(bounded)
        finally:
            self._traced_model_call(started)
        return self._checked(response)

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return self._traced_refusal(request, handler(request))

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        return self._traced_refusal(request, await handler(request))

    def _traced_model_call(self, started: float) -> None:
        self._session.trace({"step": "model", "ms": (time.perf_counter() - started) * 1000})

    def _traced_refusal(self, request: Any, response: Any) -> Any:
        # A call refused before its tool ran (arguments that do not validate, a tool that does
        # not exist) is traced here; the tools trace every call that reached them.
        if isinstance(response, ToolMessage) and response.status == "error":
            name = str(getattr(request, "tool_call", {}).get("name", "?"))[:63]
            self._session.trace(
                {"step": name, "ms": 0.0, "status": "refused", "note": "invalid tool call"}
            )
        return response

    def _checked(self, response: Any) -> Any:
        """End the run when the model's answer asks for more tool calls than one step may make,
        before any of them is parsed or run."""
        messages = getattr(response, "result", None)
        answers = messages if isinstance(messages, list) else [response]
        asked = max((len(getattr(m, "tool_calls", None) or ()) for m in answers), default=0)
        self._session.check_step(asked)
        return response

    def _bounded(self, request: Any) -> Any:
        """Count the call against the budget; give it the seconds left as its request timeout."""
        session = self._session
        session.start_model_call()
        bound = timeout_kwargs(request.model, session.deadline - session.clock())
        if bound:
            request = request.override(model_settings={**request.model_settings, **bound})
        return request


class AgentFallback:
    """Runs the grounded tool-calling agent over a read-only facade.

    Thread-safe: every :meth:`run` builds its own tools, ledger and agent graph, so concurrent
    runs share nothing but the facade and the model (both thread-safe). Limiting how often it
    runs is the caller's job (the pipeline's sliding-window limiter).
    """

    def __init__(
        self,
        facade: ReadOnlyPersistenceFacade,
        llm: BaseChatModel,
        *,
        max_steps: int = 6,
        timeout_seconds: float = DEFAULT_FALLBACK_TIMEOUT_SECONDS,
        max_tool_calls: int = 8,
        debug: bool = False,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], dt.datetime] | None = None,
        scope: FallbackScope | str = "related",
    ) -> None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, not {max_steps}")
        if timeout_seconds <= 0:
            raise ValueError(f"timeout_seconds must be positive, not {timeout_seconds}")
        self._facade = facade
        self._llm = llm
        if max_tool_calls < 1:
            raise ValueError(f"max_tool_calls must be at least 1, not {max_tool_calls}")
        self.max_steps = max_steps
        self.timeout_seconds = timeout_seconds
        #: Tool calls one model step may ask for (RAG_FALLBACK_MAX_TOOL_CALLS).
        self.max_tool_calls = max_tool_calls
        self.debug = debug
        self._clock = clock
        self._now = now or utc_now
        #: Which tables a run may read, given the table asked about (see :mod:`.scope`).
        self.scope = FallbackScope.of(scope)

    def run(
        self,
        text: str,
        *,
        table: str = "leads",
        tried_filters: Mapping[str, Any] | None = None,
        max_steps: int | None = None,
        timeout_seconds: float | None = None,
        history: tuple[str, ...] = (),
    ) -> FallbackOutcome:
        """Let the model look for rows answering ``text``; never raises.

        ``table`` is the table the caller asked about (the default for citations without one);
        ``tried_filters`` are the filters the deterministic steps already tried, as a hint;
        ``max_steps`` overrides the step limit for this run; ``timeout_seconds`` shortens its
        timeout (what is left of the run's deadline); ``history`` are the conversation's earlier
        turns as lines (``Conversation.history``), shown to the model before the request.
        """
        timeout = self._timeout(timeout_seconds)
        session = self._session(table, max_steps, timeout)
        asked = (session, text, table, tried_filters, history)
        work = _Work(contextvars.copy_context(), self._invoke, asked)
        worker = threading.Thread(target=work, name="rag-fallback", daemon=True)
        with thinking("fallback"):
            worker.start()
            finished = work.done.wait(timeout)
        if not finished:
            session.cancelled.set()  # the worker stops at its next model or tool call
            self._join(worker)
            return self._failed(session, FallbackTimeoutError("agent fallback timed out"))
        worker.join()  # it has finished its work: only its exit is left
        if work.error is not None:  # a failing model or graph ends the run, never the caller
            return self._failed(session, work.error)
        return self._result(session, work.output, table)

    @staticmethod
    def _join(worker: threading.Thread) -> None:
        # The worker's model call was given the seconds left as its timeout: it ends now.
        worker.join(JOIN_GRACE_SECONDS)
        if worker.is_alive():
            _log.warning(
                "rag.fallback.overrun",
                reason="the model call had not returned at the deadline (a client's back-off, "
                "or a model ignoring its request timeout); its thread is left to end on its own",
                grace_s=JOIN_GRACE_SECONDS,
            )

    async def arun(
        self,
        text: str,
        *,
        table: str = "leads",
        tried_filters: Mapping[str, Any] | None = None,
        max_steps: int | None = None,
        timeout_seconds: float | None = None,
        history: tuple[str, ...] = (),
    ) -> FallbackOutcome:
        """The awaitable twin of :meth:`run`: the agent graph's ``ainvoke`` (the model's
        ``ainvoke``) on the running loop, cancelled at the deadline; never raises."""
        timeout = self._timeout(timeout_seconds)
        session = self._session(table, max_steps, timeout)
        graph, message = self._graph(session, text, table, tried_filters, history)
        try:
            output = await asyncio.wait_for(graph.ainvoke({"messages": [message]}), timeout)
        except TimeoutError:
            session.cancelled.set()
            return self._failed(session, FallbackTimeoutError("agent fallback timed out"))
        except Exception as exc:  # a failing model or graph ends the run, never the caller
            return self._failed(session, exc)
        return self._result(session, output, table)

    def _timeout(self, timeout_seconds: float | None) -> float:
        """The run's timeout: the fallback's own, shortened to what is left of the deadline."""
        if timeout_seconds is None:
            return self.timeout_seconds
        return max(0.0, min(self.timeout_seconds, timeout_seconds))

    def _session(self, table: str, max_steps: int | None, timeout: float) -> FallbackSession:
        steps = self.max_steps if max_steps is None else max(1, max_steps)
        session = FallbackSession(
            self._facade,
            max_steps=steps,
            deadline=self._clock() + timeout,
            max_calls_per_step=self.max_tool_calls,
            clock=self._clock,
            now=self._now,
            scope=self.scope.tables(table),
        )
        _log.info("rag.fallback.start", table=table, max_steps=steps, timeout_s=round(timeout, 3))
        return session

    def _graph(
        self,
        session: FallbackSession,
        text: str,
        table: str,
        tried: Mapping[str, Any] | None,
        history: tuple[str, ...] = (),
    ) -> tuple[Any, HumanMessage]:
        graph = create_agent(
            self._llm,
            session.tools(),
            system_prompt=system_prompt(session.max_steps),
            middleware=[_Budget(session)],
            response_format=ToolStrategy(FinalAnswer),
        )
        return graph, HumanMessage(request_message(text, table, tried, history))

    def _invoke(
        self,
        session: FallbackSession,
        text: str,
        table: str,
        tried: Mapping[str, Any] | None,
        history: tuple[str, ...],
    ) -> dict[str, Any]:
        graph, message = self._graph(session, text, table, tried, history)
        result: dict[str, Any] = graph.invoke({"messages": [message]})
        return result

    def _result(
        self, session: FallbackSession, output: Mapping[str, Any], table: str
    ) -> FallbackOutcome:
        answer = final_answer(output)
        records: list[LedgerEntry] = []
        seen: set[tuple[str, str]] = set()
        dropped_ids = 0
        for cited in answer.rows if answer else ():
            cited_table = cited.table or table
            key = (cited_table, id_key(cited.id))
            if key in seen:
                continue
            seen.add(key)
            entry = session.ledger.lookup(cited_table, cited.id)
            if entry is None:
                dropped_ids += 1
            else:
                records.append(entry)
        result = FallbackOutcome(
            records=tuple(records),
            answer=answer.answer if answer else None,
            dropped_ids=dropped_ids,
            stopped="answer" if answer else "no_answer",
            **_counters(session),
        )
        _log.info("rag.fallback.done", records=len(records), **result.metadata())
        return result

    def _failed(self, session: FallbackSession, error: Exception) -> FallbackOutcome:
        reason: Literal["step_limit", "timeout", "error"]
        if isinstance(error, FallbackStopped):
            reason, message = error.reason, str(error)
        else:
            reason, message = "error", f"agent fallback failed: {_describe(error)}"
        if self.debug:
            _log.error(
                "rag.fallback.error",
                error=message,
                stopped=reason,
                chain=_chain(error),
                exc_info=error,
            )
        else:
            _log.warning("rag.fallback.error", error=message, stopped=reason)
        return FallbackOutcome(
            error=message,
            error_type=type(error).__name__,
            exception=error,
            stopped=reason,
            **_counters(session),
        )


class _Work:
    """The fallback graph run on the worker thread, in the caller's context."""

    def __init__(
        self, context: contextvars.Context, fn: Callable[..., dict[str, Any]], args: tuple[Any, ...]
    ) -> None:
        self._context, self._fn, self._args = context, fn, args
        self.done = threading.Event()
        self.output: dict[str, Any] = {}
        self.error: Exception | None = None

    def __call__(self) -> None:
        try:
            self.output = self._context.run(self._fn, *self._args)
        except Exception as exc:
            self.error = exc
        finally:
            self.done.set()


class _Counters(TypedDict):
    model_calls: int
    tool_calls: int
    refused_tool_calls: int
    rows_read: int
    calls: tuple[FallbackCall, ...]
    steps: tuple[dict[str, Any], ...]


def _counters(session: FallbackSession) -> _Counters:
    return {
        "model_calls": session.model_calls,
        "tool_calls": session.tool_calls,
        "refused_tool_calls": session.refused,
        "rows_read": session.rows_read,
        "calls": tuple(session.calls),
        "steps": tuple(session.steps),
    }


def _describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= _MAX_ERROR_TEXT else text[: _MAX_ERROR_TEXT - 1] + "…"


def _chain(exc: BaseException) -> list[str]:
    chain: list[str] = []
    current: BaseException | None = exc
    while current is not None and len(chain) < 20:
        chain.append(f"{type(current).__name__}: {current}")
        current = current.__cause__ or current.__context__
    return chain


class PipelineFallback:
    """The pipeline's step-5 hook: runs an :class:`AgentFallback` for a ``FallbackRequest``.

    Built by :func:`create_fallback_runner`, which ``RAGAgent`` calls when it has an LLM.
    It hands back only the rows the final answer cited *and* the tools read (one
    ``FallbackRead`` per row, with that read's time), the number of cited ids dropped, and the
    error that stopped the run. Thread-safe, like ``AgentFallback``.
    """

    def __init__(self, fallback: AgentFallback) -> None:
        self.fallback = fallback

    def __call__(self, request: FallbackRequest) -> FallbackResult:
        """Run the agent for ``request`` within its step budget; never raises."""
        outcome = self.fallback.run(
            request.text,
            table=request.table,
            tried_filters=request.filters or None,
            max_steps=request.max_steps,
            timeout_seconds=request.seconds_left,
            history=request.history,
        )
        return self._answer(outcome)

    async def acall(self, request: FallbackRequest) -> FallbackResult:
        """The awaitable twin of calling the hook (what ``RAGAgent.arun`` awaits)."""
        outcome = await self.fallback.arun(
            request.text,
            table=request.table,
            tried_filters=request.filters or None,
            max_steps=request.max_steps,
            timeout_seconds=request.seconds_left,
            history=request.history,
        )
        return self._answer(outcome)

    @staticmethod
    def _answer(outcome: FallbackOutcome) -> FallbackResult:
        reads = [
            FallbackRead(table=entry.table, rows=[entry.row], retrieved_at=entry.retrieved_at)
            for entry in outcome.records
        ]
        error: BaseException | str | None = outcome.exception or outcome.error
        return FallbackResult(
            reads=reads,
            error=error,
            dropped_ids=outcome.dropped_ids,
            calls=outcome.calls,
            answer=outcome.answer,
            steps=outcome.steps,
        )


def create_fallback_runner(
    facade: ReadOnlyPersistenceFacade,
    llm: BaseChatModel,
    *,
    settings: RAGSettings | None = None,
    timeout_seconds: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    scope: FallbackScope | str | None = None,
) -> PipelineFallback:
    """The fallback hook for ``RAGAgent``: ``RAG_FALLBACK_MAX_STEPS``, ``RAG_FALLBACK_SCOPE``
    (unless ``scope=`` is given) and ``RAG_DEBUG`` apply; the timeout is ``RAG_LLM_DEADLINE_S``
    unless ``timeout_seconds`` is given (each run gets at most what is left of its deadline)."""
    settings = settings if settings is not None else RAGSettings.from_env()
    if timeout_seconds is None:
        timeout_seconds = settings.llm_deadline_s
    return PipelineFallback(
        AgentFallback(
            facade,
            llm,
            max_steps=settings.fallback_max_steps,
            timeout_seconds=timeout_seconds,
            max_tool_calls=settings.fallback_max_tool_calls,
            debug=settings.debug,
            clock=clock,
            scope=settings.fallback_scope if scope is None else scope,
        )
    )
