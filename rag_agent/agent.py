"""``RAGAgent``: free text in, an envelope of records with provenance out.

The pipeline of :meth:`RAGAgent.run`:

1. rules: :func:`~rag_agent.filters.parse_filters_from_text`;
2. nothing found and an LLM configured: the **filter-extraction hook** (``llm_filters``);
3. a paginated, cached read through the read-only facade;
4. zero rows: deterministic reformulations (:mod:`rag_agent.reformulation`);
5. still zero, or no filter at all: the **fallback hook** (``fallback``), if configured and the
   sliding-window limiter allows it;
6. the envelope (:func:`rag_agent.assemble.assemble`).

:meth:`RAGAgent.read` is step 3 alone for a plain filtered read of any allow-listed table (what
the ``query_table`` tool does): the same window clamping, cache, records, summary and envelope.

The two LLM steps are seams (:mod:`rag_agent.hooks`). ``llm_filters`` is any
``Callable[[str], Mapping]``; its answer is validated by
:func:`~rag_agent.filters.normalize_filters`, so anything invalid counts as empty. ``fallback`` is
any :class:`~rag_agent.hooks.FallbackRunner`: it gets a ``FallbackRequest`` and returns a
``FallbackResult`` listing the rows its tool calls actually read. With ``llm=`` and no explicit
hooks, the agent builds them with :func:`~rag_agent.llm_filters.parse_filters_with_llm` and
:func:`~rag_agent.fallback.create_fallback_runner`; without ``llm`` (and no explicit hook) a step
is disabled.

Thread-safety: ``run`` and ``read`` may be called from many threads at once. The agent's own
state is its cache and limiter, both thread-safe; the facade's backends are thread-safe.
"""

from __future__ import annotations

import datetime as dt
import functools
import itertools
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, overload

from persistence import (
    Closing,
    Filter,
    InvalidQueryError,
    Order,
    Query,
    ReadOnlyPersistenceFacade,
    get_logger,
)
from rag_agent.assemble import (
    MAX_ERROR_MESSAGE,
    Outcome,
    PageResult,
    assemble,
    error_info,
    fallback_page,
    page_result,
    shown_filters,
    source_of,
    utc_now,
)
from rag_agent.cache import QueryCache
from rag_agent.envelope import Envelope, ReformulationAttempt
from rag_agent.fallback import create_fallback_runner
from rag_agent.filters import (
    MAX_TEXT_LENGTH,
    filters_to_query,
    normalize_filters,
    parse_filters_from_text,
)
from rag_agent.hooks import (
    FallbackRead,
    FallbackRequest,
    FallbackResult,
    FallbackRunner,
    FilterExtractor,
)
from rag_agent.llm_filters import parse_filters_with_llm
from rag_agent.ratelimit import RateLimiter, RateLimiterUnavailableError, create_limiter
from rag_agent.reformulation import reformulations
from rag_agent.settings import RAGSettings

__all__ = [
    # The hook types live in rag_agent.hooks; named here too, as they always were.
    "FallbackRead",
    "FallbackRequest",
    "FallbackResult",
    "FallbackRunner",
    "FilterExtractor",
    "RAGAgent",
]

_log = get_logger("rag_agent")
_Window = tuple[int, int]


@functools.lru_cache(maxsize=1024)
def _parse_rules(text: str) -> tuple[tuple[str, Any], ...]:
    # The parser is pure, so a repeated question (the cache-hit path) skips it; tuples keep the
    # memoised value immutable.
    return tuple(parse_filters_from_text(text).items())


def _typed(value: Any) -> Any:
    # 1, 1.0 and True are equal and hash alike, but a backend may tell them apart.
    if isinstance(value, tuple):
        return tuple(map(_typed, value))
    return (type(value), value)


def _cache_key(query: Query, include_raw: bool) -> tuple[Any, ...]:
    filters = tuple((f.column, f.op, _typed(f.value)) for f in query.filters)
    window = (query.limit, query.offset)
    return (query.table, filters, query.columns, query.order, window, include_raw)


def _sequence(value: object, what: str) -> tuple[Any, ...]:
    # tuple("email") would split a name into letters: say what was expected instead.
    if isinstance(value, str | bytes | Mapping | Filter | Order) or not isinstance(value, Iterable):
        raise InvalidQueryError(
            f"{what} must be a sequence, not {type(value).__name__}", field=what
        )
    return tuple(value)


def _check_include_raw(include_raw: object) -> None:
    if type(include_raw) is not bool:
        raise InvalidQueryError("include_raw must be a bool", field="include_raw")


class RAGAgent(Closing):
    """Adaptive retrieval over a :class:`~persistence.ReadOnlyPersistenceFacade`.

    Usually built by :func:`rag_agent.create_rag_agent`::

        rag = create_rag_agent(kind="memory")
        envelope = rag.run("find leads at acme")
        envelope.metadata.total_count, envelope.records[0].provenance.row_hash

    ``clock`` (monotonic seconds) drives the cache's TTL and the in-memory limiter; ``now``
    (aware UTC datetimes) stamps ``retrieved_at``. Both exist so tests can move time.
    """

    def __init__(
        self,
        facade: ReadOnlyPersistenceFacade,
        *,
        settings: RAGSettings | None = None,
        llm: Any = None,
        llm_filters: FilterExtractor | None = None,
        fallback: FallbackRunner | None = None,
        limiter: RateLimiter | None = None,
        cache: QueryCache | None = None,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], dt.datetime] = utc_now,
    ) -> None:
        if not isinstance(facade, ReadOnlyPersistenceFacade):
            raise TypeError(
                "RAGAgent reads through a ReadOnlyPersistenceFacade "
                "(see persistence.create_read_only_facade), "
                f"not {type(facade).__name__}"
            )
        self._facade = facade
        self.settings = settings if settings is not None else RAGSettings.from_env()
        self.llm = llm
        if llm is not None and llm_filters is None:

            def llm_filters(text: str) -> Mapping[str, Any]:
                return parse_filters_with_llm(text, llm)

        if llm is not None and fallback is None:
            fallback = create_fallback_runner(facade, llm, settings=self.settings)
        self._llm_filters = llm_filters
        self._fallback = fallback
        self._limiter = (
            limiter
            if limiter is not None
            else create_limiter(
                self.settings.rate_limit_storage,
                self.settings.max_fallbacks_per_min,
                clock=None if clock is time.monotonic else clock,
            )
        )
        # ``is None``, not ``or``: an empty QueryCache is falsy (it has ``__len__``).
        self._cache = (
            cache
            if cache is not None
            else QueryCache(
                self.settings.cache_maxsize,
                self.settings.cache_ttl_seconds,
                enabled=not self.settings.cache_disabled,
                timer=clock,
            )
        )
        self._now = now

    @property
    def facade(self) -> ReadOnlyPersistenceFacade:
        """The read-only facade this agent reads through (safe to hand to LLM tools)."""
        return self._facade

    @property
    def cache(self) -> QueryCache:
        """The agent's query cache (``clear()`` it after seeding new data)."""
        return self._cache

    @property
    def limiter(self) -> RateLimiter:
        """The sliding-window limiter that meters the fallback."""
        return self._limiter

    @overload
    def run(
        self,
        text: str,
        *,
        table: str = ...,
        limit: int | None = ...,
        offset: int | None = ...,
        include_raw: bool = ...,
        filters: Mapping[str, Any] | None = ...,
        return_json: Literal[False] = ...,
    ) -> Envelope: ...

    @overload
    def run(
        self,
        text: str,
        *,
        table: str = ...,
        limit: int | None = ...,
        offset: int | None = ...,
        include_raw: bool = ...,
        filters: Mapping[str, Any] | None = ...,
        return_json: Literal[True],
    ) -> dict[str, Any]: ...

    def run(
        self,
        text: str,
        *,
        table: str = "leads",
        limit: int | None = None,
        offset: int | None = None,
        include_raw: bool = False,
        filters: Mapping[str, Any] | None = None,
        return_json: bool = False,
    ) -> Envelope | dict[str, Any]:
        """Answer ``text`` from ``table``: an ``Envelope`` (a JSON-ready dict with
        ``return_json=True``).

        ``limit`` defaults to ``RAG_DEFAULT_LIMIT`` and is clamped to ``RAG_MAX_LIMIT``;
        ``offset`` defaults to 0. ``filters`` (keys ``id``, ``email``, ``company``,
        ``client_id``) are used instead of reading ``text``: validated like the rules' output,
        then queried, paginated, cached and reformulated as usual, with no LLM step. Never raises
        for bad input or a failing backend: the envelope's ``metadata.error`` says what went
        wrong.
        """
        return self._answer(
            table,
            return_json,
            lambda log: self._run(log, text, table, limit, offset, include_raw, filters),
        )

    @overload
    def read(
        self,
        table: str,
        filters: Iterable[Filter] = ...,
        *,
        columns: Sequence[str] | None = ...,
        order: Iterable[Order | str] = ...,
        limit: int | None = ...,
        offset: int | None = ...,
        include_raw: bool = ...,
        return_json: Literal[False] = ...,
    ) -> Envelope: ...

    @overload
    def read(
        self,
        table: str,
        filters: Iterable[Filter] = ...,
        *,
        columns: Sequence[str] | None = ...,
        order: Iterable[Order | str] = ...,
        limit: int | None = ...,
        offset: int | None = ...,
        include_raw: bool = ...,
        return_json: Literal[True],
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
        return_json: bool = False,
    ) -> Envelope | dict[str, Any]:
        """One page of ``table`` matching all ``filters``, as an envelope (no text, no LLM).

        ``filters`` are persistence ``Filter`` objects (ANDed; at most one per column and
        operator), ``columns`` project, ``order`` sorts (``Order`` objects or column names).
        The window is clamped and the page cached as in :meth:`run`; ``metadata.query_filters``
        shows the filters as ``{column: {op: value}}``. Never raises: the envelope's
        ``metadata.error`` says what went wrong::

            rag.read("leads", [Filter("score", Op.GTE, 8)], order=["-score"], limit=10)
        """
        return self._answer(
            table,
            return_json,
            lambda log: self._read(log, table, filters, columns, order, limit, offset, include_raw),
        )

    def error_envelope(self, table: object, error: BaseException | str) -> Envelope:
        """An envelope with no records reporting ``error`` for a request about ``table``.

        What the tools answer to input they cannot read, stamped by this agent's clock.
        """
        return self._finish(Outcome(source_of(table), error=error_info(error)))

    # -- the pipeline ------------------------------------------------------------------------

    def _answer(
        self, table: object, return_json: object, body: Callable[[Any], Envelope]
    ) -> Envelope | dict[str, Any]:
        # One bind per call: structlog's lazy proxy would otherwise bind again for every event.
        log = _log.bind()
        try:
            envelope = body(log)
            return envelope.to_json() if return_json else envelope
        except Exception as exc:  # the contract: run() and read() report, they do not raise
            self._log_error(log, "rag.error", exc, step="envelope")
            envelope = self.error_envelope(table, exc)
            return envelope.to_json() if return_json else envelope

    def _run(
        self,
        log: Any,
        text: object,
        table: object,
        limit: object,
        offset: object,
        include_raw: object,
        explicit: object,
    ) -> Envelope:
        outcome = Outcome(source_of(table))
        try:
            window = self._window(limit, offset)
            if not isinstance(text, str):
                raise InvalidQueryError(
                    f"text must be a str, not {type(text).__name__}", field="text"
                )
            _check_include_raw(include_raw)
            if explicit is not None and not isinstance(explicit, Mapping):
                raise InvalidQueryError(
                    f"filters must be a mapping, not {type(explicit).__name__}", field="filters"
                )
            checked_table = self._facade.policy.check_read(table, "run")
        except Exception as exc:
            return self._refuse(log, outcome, exc)

        # Only the prefix is ever read: no question needs more, and the LLM steps would otherwise
        # pay for (and be steered by) an arbitrarily long text.
        text = text[:MAX_TEXT_LENGTH]
        try:
            if explicit is None:
                filters = self._filters(log, text)
            else:
                filters = normalize_filters(explicit)
                log.debug("rag.filters", via="explicit", filters=filters)
            if filters:
                self._retrieve(log, outcome, checked_table, filters, window, include_raw is True)
            if outcome.total_count == 0 and outcome.error is None and explicit is None:
                self._fall_back(log, outcome, text, checked_table, filters, window)
        except Exception as exc:
            self._log_error(log, "rag.error", exc, step="query", table=checked_table)
            outcome.fail(exc)
        return self._done(log, "rag.run", outcome, checked_table, window)

    def _read(
        self,
        log: Any,
        table: object,
        filters: object,
        columns: object,
        order: object,
        limit: object,
        offset: object,
        include_raw: object,
    ) -> Envelope:
        outcome = Outcome(source_of(table))
        try:
            window = self._window(limit, offset)
            _check_include_raw(include_raw)
            checked_table = self._facade.policy.check_read(table, "read")
            query = Query(
                checked_table,
                filters=_sequence(filters, "filters"),
                columns=None if columns is None else _sequence(columns, "columns"),
                order=_sequence(order, "order"),
                limit=window[0],
                offset=window[1],
            )
            outcome.filters = shown_filters(query.filters)
        except Exception as exc:
            return self._refuse(log, outcome, exc)
        try:
            result, hit = self._query(log, query, include_raw is True, outcome.filters)
            outcome.take(result, shared=self._cache.enabled)
            outcome.cache = "hit" if hit else "miss"
        except Exception as exc:
            self._log_error(log, "rag.error", exc, step="query", table=checked_table)
            outcome.fail(exc)
        return self._done(log, "rag.read", outcome, checked_table, window)

    def _window(self, limit: object, offset: object) -> _Window:
        # The only place the page window is defaulted and clamped.
        settings = self.settings
        if limit is None:
            eff_limit = settings.default_limit
        elif type(limit) is int and limit >= 1:
            eff_limit = min(limit, settings.max_limit)
        else:
            raise InvalidQueryError(f"limit must be a positive int, not {limit!r}", field="limit")
        if offset is None:
            eff_offset = 0
        elif type(offset) is int and offset >= 0:
            eff_offset = offset
        else:
            raise InvalidQueryError(
                f"offset must be a non-negative int, not {offset!r}", field="offset"
            )
        return eff_limit, eff_offset

    def _filters(self, log: Any, text: str) -> dict[str, Any]:
        filters = dict(_parse_rules(text))
        if filters or self._llm_filters is None:
            log.debug("rag.filters", via="rules", filters=filters)
            return filters
        try:
            filters = normalize_filters(self._llm_filters(text))
        except Exception as exc:  # an LLM failure only means "no filters"
            self._log_error(log, "rag.filters.llm_error", exc, step="filters")
            filters = {}
        log.debug("rag.filters", via="llm", filters=filters)
        return filters

    def _retrieve(
        self,
        log: Any,
        outcome: Outcome,
        table: str,
        filters: dict[str, Any],
        window: _Window,
        include_raw: bool,
    ) -> None:
        def query(filters: dict[str, Any]) -> tuple[PageResult, bool]:
            planned = Query(table, filters_to_query(filters), limit=window[0], offset=window[1])
            return self._query(log, planned, include_raw, filters)

        result, all_hits = query(filters)
        used = filters
        if result.total_count == 0:
            relaxed_steps = reformulations(filters)
            for reason, relaxed in itertools.islice(
                relaxed_steps, self.settings.reformulation_max_attempts
            ):
                attempt, hit = query(relaxed)
                all_hits = all_hits and hit
                outcome.attempts.append(
                    ReformulationAttempt(
                        reason=reason,  # type: ignore[arg-type]
                        filters=dict(relaxed),
                        result_count=attempt.total_count,
                    )
                )
                log.debug(
                    "rag.reformulation",
                    reason=reason,
                    filters=relaxed,
                    result_count=attempt.total_count,
                )
                if attempt.total_count:
                    result, used = attempt, relaxed
                    outcome.fallback = "reformulation"
                    break
        outcome.filters = dict(used)
        outcome.take(result, shared=self._cache.enabled)
        outcome.cache = "hit" if all_hits else "miss"

    def _query(
        self, log: Any, query: Query, include_raw: bool, shown: Mapping[str, Any]
    ) -> tuple[PageResult, bool]:
        """The page of ``query`` as records, from the cache if it holds it (and whether it did).

        ``shown`` is how the filters are logged.
        """
        key = _cache_key(query, include_raw)
        cached: PageResult | None = self._cache.get(key)
        if cached is not None:
            log.debug("rag.query", table=query.table, filters=shown, cache="hit")
            return cached, True
        page = self._facade.read(
            query.table,
            query.filters,
            columns=query.columns,
            order=query.order,
            limit=query.limit,
            offset=query.offset,
        )
        result = page_result(
            page.rows,
            page.total_count,
            table=query.table,
            retrieved_at=self._now(),
            include_raw=include_raw,
            summary_threshold=self.settings.summary_threshold,
        )
        self._cache.put(key, result)
        log.debug(
            "rag.query",
            table=query.table,
            filters=shown,
            cache="miss",
            total_count=page.total_count,
            returned=len(result.records),
        )
        return result, False

    def _fall_back(
        self,
        log: Any,
        outcome: Outcome,
        text: str,
        table: str,
        filters: dict[str, Any],
        window: _Window,
    ) -> None:
        if filters and outcome.filters is None:
            outcome.filters = dict(filters)
        if self._fallback is None:
            outcome.fallback = "disabled"
            log.debug("rag.fallback", status="disabled", reason="no LLM fallback configured")
            return
        try:
            allowed = self._limiter.try_acquire()
        except RateLimiterUnavailableError as exc:
            outcome.fallback = "suppressed"
            outcome.error = error_info(exc)
            self._log_error(log, "rag.fallback", exc, step="fallback", status="suppressed")
            return
        if not allowed:
            outcome.fallback = "suppressed"
            log.debug("rag.fallback", status="suppressed", reason="rate limit reached")
            return
        limit, offset = window
        request = FallbackRequest(
            text=text,
            table=table,
            filters=dict(filters),
            limit=limit,
            offset=offset,
            max_steps=self.settings.fallback_max_steps,
        )
        try:
            result = self._fallback(request)
        except Exception as exc:  # a broken hook must not break run()
            result = FallbackResult(error=exc)
        page = fallback_page(
            result,
            limit=limit,
            offset=offset,
            now=self._now,
            summary_threshold=self.settings.summary_threshold,
        )
        outcome.source = "agent"
        outcome.fallback = "agent"
        outcome.take(page, shared=False)
        outcome.cache = None
        outcome.dropped_ids = max(0, int(result.dropped_ids))
        if result.error is not None:
            outcome.error = error_info(result.error)
            if isinstance(result.error, BaseException):
                self._log_error(log, "rag.fallback", result.error, step="fallback", status="error")
        log.debug("rag.fallback", status="agent", records=page.total_count)

    # -- helpers -----------------------------------------------------------------------------

    def _finish(self, outcome: Outcome, window: _Window | None = None) -> Envelope:
        # The one place this agent's envelopes are built.
        limit, offset = window if window is not None else (None, None)
        return assemble(outcome, limit=limit, offset=offset, now=self._now)

    def _refuse(self, log: Any, outcome: Outcome, exc: Exception) -> Envelope:
        self._log_error(log, "rag.error", exc, step="input")
        outcome.fail(exc)
        return self._finish(outcome)

    def _done(
        self, log: Any, event: str, outcome: Outcome, table: str, window: _Window
    ) -> Envelope:
        envelope = self._finish(outcome, window)
        log.debug(
            event,
            table=table,
            total_count=outcome.total_count,
            records=len(outcome.records),
            cache=outcome.cache,
            fallback=outcome.fallback,
            error=None if outcome.error is None else outcome.error.type,
        )
        return envelope

    def _log_error(self, log: Any, event: str, exc: BaseException, **context: Any) -> None:
        log.warning(
            event,
            error_type=type(exc).__name__,
            error=str(exc)[:MAX_ERROR_MESSAGE],
            exc_info=exc if self.settings.debug else None,
            **context,
        )

    def close(self) -> None:
        """Release the facade's connections and the limiter's, if it holds any."""
        self._facade.close()
        close = getattr(self._limiter, "close", None)
        if callable(close):
            close()

    def __repr__(self) -> str:
        return (
            f"RAGAgent(facade={self._facade!r}, llm={type(self.llm).__name__ if self.llm else None}"
            f", fallback={'on' if self._fallback else 'disabled'})"
        )
