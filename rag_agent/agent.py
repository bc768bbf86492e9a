"""``RAGAgent``: free text in, an envelope of records with provenance out.

The pipeline of :meth:`RAGAgent.run`:

1. rules: :func:`~rag_agent.understanding.filters.understand` (conditions, the table named, count or
rows);
2. nothing found (or only weak evidence) and an LLM configured: the **extraction hook**
   (``extractor``), metered by the agent's limiter when the agent builds it;
   then every condition, whatever its source, goes through the facade's own checks: applied
   with its value coerced to the column's type, or reported in ``metadata.ignored``;
3. a paginated, cached read (or a count) through the read-only facade;
4. zero rows: deterministic reformulations (:mod:`rag_agent.pipeline.reformulation`);
5. still zero, or no filter at all: the **fallback hook** (``fallback``), if configured and the
   sliding-window limiter allows it;
6. the envelope (:func:`rag_agent.envelope.assemble.assemble`).

:meth:`RAGAgent.read` is step 3 alone for a plain filtered read of any allow-listed table (what
the ``query_table`` tool does): the same window clamping, cache, records, summary and envelope.

The two LLM steps are seams. ``extractor`` (a ``ConditionExtractor``) is any
``Callable[[ExtractionRequest], Understanding]`` (:mod:`rag_agent.specs`); its conditions go
through the facade's checks like any other, and an extractor that raises or answers something
else counts as having understood nothing. ``fallback`` is any
:class:`~rag_agent.hooks.FallbackRunner`: it gets a ``FallbackRequest`` and returns a
``FallbackResult`` listing the rows its tool calls actually read. With ``llm=`` and no explicit
hooks, the agent builds them with
:class:`~rag_agent.understanding.llm.extract.SchemaFilterExtractor` (metered by the agent's limiter,
cached per question) and :func:`~rag_agent.fallback.create_fallback_runner`; without ``llm`` (and no
explicit hook) a step is disabled.

This module is the public class, its wiring (:func:`wire_pipeline`) and its async twins; the
steps are :class:`rag_agent.pipeline.pipeline.Pipeline`.

A :class:`~rag_agent.conversation.Conversation` (``rag.conversation()``) given to ``run`` or
``arun`` makes a question a follow-up of the answers before it ("only the qualified ones", "what
about their conversations?"); ``trace=True`` adds ``metadata.trace``, each step with its time.

:meth:`RAGAgent.arun`, :meth:`RAGAgent.aread` and :meth:`RAGAgent.aaggregate` are their async
twins: the same pipeline (one implementation, see :mod:`rag_agent.runtime.effects`), its I/O
awaited.

Thread-safety: ``run`` and ``read`` may be called from many threads at once. The agent's own
state is its cache and limiter, both thread-safe; the facade's backends are thread-safe.
"""

from __future__ import annotations

import datetime as dt
import functools
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, TypedDict, Unpack, overload

from persistence import (
    Closing,
    Filter,
    Include,
    Metric,
    Order,
    ReadOnlyPersistenceFacade,
    get_logger,
)
from persistence.search import DEFAULT_K
from persistence.steps import adrive, drive
from rag_agent.conversation import Conversation
from rag_agent.envelope import Envelope
from rag_agent.envelope.assemble import utc_now
from rag_agent.fallback import create_fallback_runner
from rag_agent.fallback.scope import FallbackScope
from rag_agent.hooks import FallbackRunner
from rag_agent.pipeline.pipeline import Pipeline
from rag_agent.pipeline.ranking import DEFAULT_MODE, search_steps
from rag_agent.runtime.cache import QueryCache
from rag_agent.runtime.effects import perform, perform_async
from rag_agent.runtime.ratelimit import RateLimiter, create_limiter
from rag_agent.settings import RAGSettings
from rag_agent.specs import Condition
from rag_agent.understanding.llm.extract import SchemaFilterExtractor
from rag_agent.understanding.request import ConditionExtractor

__all__ = ["RAGAgent", "wire_pipeline"]

_log = get_logger("rag_agent")


# The keyword options of the methods, for the overloads type checkers read.
class _PageOptions(TypedDict, total=False):
    limit: int | None
    offset: int | None
    include_raw: bool


class _RunOptions(_PageOptions, total=False):
    table: str | None
    conversation: Conversation | None
    trace: bool
    filters: Mapping[str, Any] | Sequence[Condition] | None
    count_only: bool | None
    include: Sequence[str | Include] | None


class _ReadOptions(_PageOptions, total=False):
    columns: Sequence[str] | None
    order: Iterable[Order | str]
    count_only: bool
    include: Sequence[str | Include]


class _SearchOptions(TypedDict, total=False):
    k: int | None
    offset: int | None
    mode: str
    include_raw: bool


class _AggregateOptions(TypedDict, total=False):
    group_by: Sequence[str]
    metrics: Sequence[Metric | str]
    limit: int | None


class RAGAgent(Closing):
    """Adaptive retrieval over a :class:`~persistence.ReadOnlyPersistenceFacade`.

    Usually built by :func:`rag_agent.create_rag_agent`::

        rag = create_rag_agent(kind="memory")
        envelope = rag.run("find leads at acme")
        envelope.metadata.total_count, envelope.records[0].provenance.row_hash

    ``fallback_scope`` (default ``RAG_FALLBACK_SCOPE``, ``"related"``) says which tables the
    LLM fallback may read for a question about a table: only it (``"table"``), it and its
    related tables except the governance tables (``"related"``), or those too
    (``"related+governance"``); a :class:`~rag_agent.fallback.scope.FallbackScope` may declare
    its own relations. It applies to the fallback the agent builds from ``llm``.

    ``clock`` (monotonic seconds) drives the cache's TTL and the in-memory limiter; ``now``
    (aware UTC datetimes) stamps ``retrieved_at``. Both exist so tests can move time.
    """

    def __init__(
        self,
        facade: ReadOnlyPersistenceFacade,
        *,
        settings: RAGSettings | None = None,
        llm: Any = None,
        extractor: ConditionExtractor | None = None,
        fallback: FallbackRunner | None = None,
        limiter: RateLimiter | None = None,
        cache: QueryCache | None = None,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], dt.datetime] = utc_now,
        fallback_scope: FallbackScope | str | None = None,
    ) -> None:
        if not isinstance(facade, ReadOnlyPersistenceFacade):
            raise TypeError(
                "RAGAgent reads through a ReadOnlyPersistenceFacade "
                "(see persistence.create_read_only_facade), "
                f"not {type(facade).__name__}"
            )
        settings = settings if settings is not None else RAGSettings.from_env()
        self.llm = llm
        self._pipeline = wire_pipeline(
            facade,
            settings,
            llm=llm,
            extractor=extractor,
            fallback=fallback,
            limiter=limiter,
            cache=cache,
            clock=clock,
            now=now,
            fallback_scope=fallback_scope,
        )

    @property
    def settings(self) -> RAGSettings:
        """The settings this agent runs with: those given, else those of the environment."""
        return self._pipeline.settings

    @property
    def facade(self) -> ReadOnlyPersistenceFacade:
        """The read-only facade this agent reads through (safe to hand to LLM tools)."""
        return self._pipeline.facade

    @property
    def cache(self) -> QueryCache:
        """The agent's query cache (``clear()`` it after seeding new data)."""
        return self._pipeline.cache

    @property
    def limiter(self) -> RateLimiter:
        """The sliding-window limiter that meters the fallback."""
        return self._pipeline.limiter

    # The overloads only tell type checkers what ``return_json`` returns; the options are those
    # of the implementation below.
    @overload
    def run(
        self, text: str, *, return_json: Literal[False] = ..., **options: Unpack[_RunOptions]
    ) -> Envelope: ...

    @overload
    def run(
        self, text: str, *, return_json: Literal[True], **options: Unpack[_RunOptions]
    ) -> dict[str, Any]: ...

    def run(
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
        conversation: Conversation | None = None,
        trace: bool = False,
        return_json: bool = False,
    ) -> Envelope | dict[str, Any]:
        """Answer ``text``: an ``Envelope`` (a JSON-ready dict with ``return_json=True``).

        ``table`` defaults to the table the text names ("campaigns of client 7"), else
        ``leads``. ``limit`` defaults to ``RAG_DEFAULT_LIMIT`` and is clamped to
        ``RAG_MAX_LIMIT``; ``offset`` defaults to 0. ``filters`` — the keys ``id``, ``email``,
        ``company``, ``client_id``, or a sequence of :class:`~rag_agent.specs.Condition` — are
        applied with what the rules read in ``text`` (the given ones win), with no LLM step.
        ``count_only=True`` answers the number of matches only (``records`` empty); by default
        the text decides ("how many …"). ``metadata.filters`` lists every applied condition and
        its source, ``metadata.ignored`` what was understood but not applied. ``include``
        names the relations whose rows each record carries under ``related`` (see
        ``facade.read``); by default the text decides ("lead 7 with its conversations").

        With a ``conversation`` (:meth:`conversation`) the text is read against its last answer
        — a refinement, the rows related to it, one of its records, its next page — unless
        ``table`` or ``filters`` are given, and the run is appended to it as a turn;
        ``metadata.context`` says how it was read. ``trace=True`` adds ``metadata.trace``: each
        step, each backend read and the fallback's model and tool calls, with their times.
        Never raises for bad input or a failing backend: the envelope's ``metadata.error`` says
        what went wrong.
        """
        page = (limit, offset, include_raw)
        return self._answer(
            table,
            return_json,
            lambda log: self._pipeline.run(
                log,
                text,
                table,
                filters,
                page,
                count_only,
                include,
                conversation=conversation,
                trace=trace,
            ),
        )

    def conversation(self, *, id: str | None = None) -> Conversation:
        """A new conversation with this agent's bounds (``RAG_CONVERSATION_MAX_TURNS``,
        ``RAG_CONVERSATION_MAX_TOKENS``), to pass to :meth:`run` turn after turn::

            conversation = rag.conversation()
            rag.run("leads at Globex", conversation=conversation)
            rag.run("only the qualified ones", conversation=conversation)

        ``Conversation.to_json()``/``Conversation.from_json()`` carry it between requests.
        """
        settings = self.settings
        return Conversation(
            id=id,
            max_turns=settings.conversation_max_turns,
            max_history_tokens=settings.conversation_max_tokens,
        )

    @overload
    def read(
        self,
        table: str,
        filters: Iterable[Filter] = ...,
        *,
        return_json: Literal[False] = ...,
        **options: Unpack[_ReadOptions],
    ) -> Envelope: ...

    @overload
    def read(
        self,
        table: str,
        filters: Iterable[Filter] = ...,
        *,
        return_json: Literal[True],
        **options: Unpack[_ReadOptions],
    ) -> dict[str, Any]: ...

    def read(
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
        """One page of ``table`` matching all ``filters``, as an envelope (no text, no LLM).

        ``filters`` are persistence ``Filter`` objects (ANDed; at most one per column and
        operator), ``columns`` project, ``order`` sorts (``Order`` objects or column names).
        The window is clamped and the page cached as in :meth:`run`; ``metadata.query_filters``
        shows the filters as ``{column: {op: value}}``; ``count_only=True`` answers only the
        number of matches (``records`` empty); ``include`` adds related rows under each
        record's ``related``. Values are read as their columns' types (a
        date string on a ``timestamptz`` column, a uuid string on a ``uuid`` one). Never raises:
        the envelope's ``metadata.error`` says what went wrong::

            rag.read("leads", [Filter("score", Op.GTE, 8)], order=[Order("score", True)], limit=10)
        """
        return self._answer(
            table,
            return_json,
            lambda log: self._pipeline.read(
                log,
                table,
                filters,
                columns,
                order,
                (limit, offset, include_raw),
                count_only,
                include,
            ),
        )

    @overload
    def aggregate(
        self,
        table: str,
        filters: Iterable[Filter] = ...,
        *,
        return_json: Literal[False] = ...,
        **options: Unpack[_AggregateOptions],
    ) -> Envelope: ...

    @overload
    def aggregate(
        self,
        table: str,
        filters: Iterable[Filter] = ...,
        *,
        return_json: Literal[True],
        **options: Unpack[_AggregateOptions],
    ) -> dict[str, Any]: ...

    def aggregate(
        self,
        table: str,
        filters: Iterable[Filter] = (),
        *,
        group_by: Sequence[str] = (),
        metrics: Sequence[Metric | str] = ("count",),
        limit: int | None = None,
        return_json: bool = False,
    ) -> Envelope | dict[str, Any]:
        """Counts and metrics per group of ``table``'s rows matching ``filters``, as an envelope
        (the plain, structured twin of :meth:`read`; no text, no LLM).

        ``metrics`` are ``"count"`` or ``"<function>:<column>"`` (``count_distinct``, ``sum``,
        ``avg``, ``min``, ``max``); at most three ``group_by`` columns; at most ``limit`` groups
        (100 by default, at most 1000). The envelope has no records: ``total_count`` is the rows
        matched and ``metadata.aggregates`` the groups (``{group_by, metrics, groups: [{keys,
        values}], capped, total_groups}``), exact numbers as decimal strings. Cached like reads.
        Never raises::

            rag.aggregate("leads", [Filter("client_id", Op.EQ, 7)], group_by=["campaign_id"])
        """
        return self._answer(
            table,
            return_json,
            lambda log: self._pipeline.aggregate(log, table, filters, group_by, metrics, limit),
        )

    @overload
    def search(
        self,
        table: str,
        text: str,
        filters: Iterable[Filter] = ...,
        *,
        return_json: Literal[False] = ...,
        **options: Unpack[_SearchOptions],
    ) -> Envelope: ...

    @overload
    def search(
        self,
        table: str,
        text: str,
        filters: Iterable[Filter] = ...,
        *,
        return_json: Literal[True],
        **options: Unpack[_SearchOptions],
    ) -> dict[str, Any]: ...

    def search(
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
        """The ``k`` rows of ``table`` matching all ``filters`` that best match ``text``, best
        first, from rank ``offset`` on, as an envelope (see
        :meth:`~persistence.ReadOnlyPersistenceFacade.search`; no rules, no LLM).

        ``mode`` is ``hybrid`` (both legs; ``keyword`` alone without embeddings, said in
        ``metadata.ranking.degraded``), ``keyword`` or ``semantic``; ``k`` defaults to 10
        (at most 100). Filters are hard constraints: when at least ``offset + k`` rows match,
        exactly ``k`` come back. ``metadata.ranking`` says how the rows were ranked and each
        record's ``provenance.relevance`` its score and per-leg ranks. Cached like reads. Never
        raises: the envelope's ``metadata.error`` says what went wrong::

            rag.search("inquiries", "want to stop paying", [Filter("client_id", Op.EQ, 7)])
        """
        page = (DEFAULT_K if k is None else k, offset, include_raw)
        pipeline = self._pipeline
        return self._answer(
            table,
            return_json,
            lambda log: drive(
                search_steps(pipeline, log, table, text, filters, page, mode),
                functools.partial(perform, pipeline),
            ),
        )

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
        conversation: Conversation | None = None,
        trace: bool = False,
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
            lambda log: self._pipeline.arun(
                log,
                text,
                table,
                filters,
                page,
                count_only,
                include,
                conversation=conversation,
                trace=trace,
            ),
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

    def error_envelope(self, table: object, error: BaseException | str) -> Envelope:
        """An envelope with no records reporting ``error`` for a request about ``table``.

        What the tools answer to input they cannot read, stamped by this agent's clock.
        """
        return self._pipeline.error_envelope(table, error)

    def _answer(
        self, table: object, return_json: object, body: Callable[[Any], Envelope]
    ) -> Envelope | dict[str, Any]:
        # One bind per call: structlog's lazy proxy would otherwise bind again for every event.
        log = _log.bind()
        try:
            envelope = body(log)
            return envelope.to_json() if return_json else envelope
        except Exception as exc:  # the contract: run() and read() report, they do not raise
            self._pipeline.log_error(log, "rag.error", exc, step="envelope")
            envelope = self.error_envelope(table, exc)
            return envelope.to_json() if return_json else envelope

    async def aclose(self) -> None:
        """Release the facade's connections, its awaitable ones included, and the
        limiter's."""
        await self.facade.aclose()
        close = getattr(self.limiter, "close", None)
        if callable(close):
            close()

    def close(self) -> None:
        """Release the facade's connections and the limiter's, if it holds any."""
        self.facade.close()
        close = getattr(self.limiter, "close", None)
        if callable(close):
            close()

    def __repr__(self) -> str:
        return (
            f"RAGAgent(facade={self.facade!r}, llm={type(self.llm).__name__ if self.llm else None}"
            f", fallback={'on' if self._pipeline.fallback else 'disabled'})"
        )


def wire_pipeline(
    facade: ReadOnlyPersistenceFacade,
    settings: RAGSettings,
    *,
    llm: Any,
    extractor: ConditionExtractor | None,
    fallback: FallbackRunner | None,
    limiter: RateLimiter | None,
    cache: QueryCache | None,
    clock: Callable[[], float],
    now: Callable[[], dt.datetime],
    fallback_scope: FallbackScope | str | None,
) -> Pipeline:
    """The pipeline of a :class:`~rag_agent.RAGAgent`: the hooks, limiter and cache it was
    given, and those it builds from ``llm`` and ``settings`` for the ones it was not."""
    if llm is not None and fallback is None:
        fallback = create_fallback_runner(facade, llm, settings=settings, scope=fallback_scope)
    if limiter is None:
        limiter = create_limiter(
            settings.rate_limit_storage,
            settings.max_fallbacks_per_min,
            clock=None if clock is time.monotonic else clock,
        )
    if extractor is None and llm is not None:
        # The agent's own model calls count against the LLM budget, the fallback's too, and
        # a repeated question is answered from the extractor's cache at no cost.
        extractor = SchemaFilterExtractor(
            llm,
            budget=limiter.try_acquire,
            cache_maxsize=settings.cache_maxsize,
            cache_ttl=settings.cache_ttl_seconds,
            timer=clock,
        )
    # ``is None``, not ``or``: an empty QueryCache is falsy (it has ``__len__``).
    if cache is None:
        cache = QueryCache(
            settings.cache_maxsize,
            settings.cache_ttl_seconds,
            max_bytes=settings.cache_max_bytes,
            enabled=not settings.cache_disabled,
            timer=clock,
        )
    return Pipeline(facade, settings, cache, limiter, extractor, fallback, now)
