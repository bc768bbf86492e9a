"""``RAGAgent``: free text in, an envelope of records with provenance out.

The pipeline of :meth:`RAGAgent.run`:

1. rules: :func:`~rag_agent.filters.parse_filters_from_text`;
2. nothing found and an LLM configured: the **filter-extraction hook** (``llm_filters``);
3. a paginated, cached read through the read-only facade;
4. zero rows: deterministic reformulations (:mod:`rag_agent.reformulation`);
5. still zero, or no filter at all: the **fallback hook** (``fallback``), if configured and the
   sliding-window limiter allows it;
6. the envelope (:mod:`rag_agent.envelope`).

The two LLM steps are seams. ``llm_filters`` is any ``Callable[[str], Mapping]``; its answer is
validated by :func:`~rag_agent.filters.normalize_filters`, so anything invalid counts as empty.
``fallback`` is any :class:`FallbackRunner`: it gets a :class:`FallbackRequest` and returns a
:class:`FallbackResult` listing the rows its tool calls actually read. With ``llm=`` and no
explicit hooks, the agent builds them with :func:`~rag_agent.llm_filters.parse_filters_with_llm`
and :func:`~rag_agent.fallback.create_fallback_runner`; without ``llm`` (and no explicit hook) a
step is disabled.

Thread-safety: ``run`` may be called from many threads at once. The agent's own state is its
cache and limiter, both thread-safe; the facade's backends are thread-safe.
"""

from __future__ import annotations

import copy
import datetime as dt
import functools
import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, overload

from persistence import Closing, get_logger
from persistence.errors import InvalidQueryError
from persistence.facade import ReadOnlyPersistenceFacade
from persistence.query import is_identifier
from rag_agent.cache import QueryCache
from rag_agent.envelope import (
    Envelope,
    ErrorInfo,
    Metadata,
    Record,
    ReformulationAttempt,
    build_records,
)
from rag_agent.filters import (
    MAX_TEXT_LENGTH,
    filters_to_query,
    normalize_filters,
    parse_filters_from_text,
)
from rag_agent.llm_filters import parse_filters_with_llm
from rag_agent.ratelimit import RateLimiter, RateLimiterUnavailableError, create_limiter
from rag_agent.reformulation import reformulations
from rag_agent.settings import RAGSettings
from rag_agent.summary import summarize_if_truncated

__all__ = [
    "FallbackRead",
    "FallbackRequest",
    "FallbackResult",
    "FallbackRunner",
    "FilterExtractor",
    "RAGAgent",
]

_log = get_logger("rag_agent")
_MAX_ERROR_MESSAGE = 500

#: Step 2's hook: free text → filters (validated afterwards; anything invalid counts as empty).
FilterExtractor = Callable[[str], Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class FallbackRequest:
    """What the fallback gets: the user's text, the table asked for, the filters found (maybe
    none), the effective page window and the step budget (``RAG_FALLBACK_MAX_STEPS``)."""

    text: str
    table: str
    filters: Mapping[str, Any]
    limit: int
    offset: int
    max_steps: int


@dataclass(frozen=True, slots=True)
class FallbackRead:
    """Rows one tool call read through the facade, from ``table``, at ``retrieved_at``."""

    table: str
    rows: Sequence[Mapping[str, Any]]
    retrieved_at: dt.datetime | None = None


@dataclass(frozen=True, slots=True)
class FallbackResult:
    """Everything the fallback read in this run, and the error that stopped it, if any.

    Only ``reads`` become records: the LLM's own text never does.
    """

    reads: Sequence[FallbackRead] = ()
    error: BaseException | str | None = None
    #: Row ids the LLM's final answer cited but no tool call read: dropped, counted here.
    dropped_ids: int = 0


class FallbackRunner(Protocol):
    """Step 5's hook. Must not raise (an exception is caught and reported as the error)."""

    def __call__(self, request: FallbackRequest) -> FallbackResult:
        """Answer ``request`` by reading through the facade; return the rows read."""
        ...


@dataclass(frozen=True, slots=True)
class _QueryResult:
    # Records are frozen models; ``mutable`` says whether any holds a nested container (or a raw
    # row), in which case each envelope gets a deep copy so no caller can alter the cache.
    records: tuple[Record, ...]
    total_count: int
    retrieved_at: dt.datetime
    summary: dict[str, Any] | None
    mutable: bool


@dataclass(slots=True)
class _Outcome:
    source: str
    filters: dict[str, Any] | None = None
    records: list[Record] = field(default_factory=list)
    total_count: int = 0
    retrieved_at: dt.datetime | None = None
    summary: dict[str, Any] | None = None
    cache: Literal["hit", "miss"] | None = None
    fallback: Literal["agent", "reformulation", "suppressed", "disabled"] | None = None
    attempts: list[ReformulationAttempt] = field(default_factory=list)
    dropped_ids: int | None = None
    error: ErrorInfo | None = None


@functools.lru_cache(maxsize=1024)
def _parse_rules(text: str) -> tuple[tuple[str, Any], ...]:
    # The parser is pure, so a repeated question (the cache-hit path) skips it; tuples keep the
    # memoised value immutable.
    return tuple(parse_filters_from_text(text).items())


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _error_info(exc: BaseException | str) -> ErrorInfo:
    if isinstance(exc, str):
        return ErrorInfo(type="FallbackError", message=exc[:_MAX_ERROR_MESSAGE])
    message = str(exc) or type(exc).__name__
    return ErrorInfo(type=type(exc).__name__, message=message[:_MAX_ERROR_MESSAGE])


_SCALAR_TYPES = frozenset({str, int, float, bool, type(None)})


def _has_containers(record: Record) -> bool:
    """Whether a caller could change a value of the record in place (a list, a dict, ...)."""
    return not _SCALAR_TYPES.issuperset(map(type, (record.model_extra or {}).values()))


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
        now: Callable[[], dt.datetime] = _utc_now,
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
            # Imported here: ``rag_agent.fallback`` imports this module.
            from rag_agent.fallback import create_fallback_runner

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
        # One bind per run: structlog's lazy proxy would otherwise bind again for every event.
        log = _log.bind()
        try:
            envelope = self._run(log, text, table, limit, offset, include_raw, filters)
            return envelope.to_json() if return_json else envelope
        except Exception as exc:  # the contract: run() reports, it does not raise
            self._log_error(log, "rag.error", exc, step="envelope")
            envelope = self._envelope(_Outcome(_source(table), error=_error_info(exc)), None, None)
            return envelope.to_json() if return_json else envelope

    # -- the pipeline ------------------------------------------------------------------------

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
        source = _source(table)
        try:
            eff_limit, eff_offset = self._window(limit, offset)
            if not isinstance(text, str):
                raise InvalidQueryError(
                    f"text must be a str, not {type(text).__name__}", field="text"
                )
            if type(include_raw) is not bool:
                raise InvalidQueryError("include_raw must be a bool", field="include_raw")
            if explicit is not None and not isinstance(explicit, Mapping):
                raise InvalidQueryError(
                    f"filters must be a mapping, not {type(explicit).__name__}", field="filters"
                )
            checked_table = self._facade.policy.check_read(table, "run")
        except Exception as exc:
            self._log_error(log, "rag.error", exc, step="input")
            return self._envelope(_Outcome(source, error=_error_info(exc)), None, None)

        # Only the prefix is ever read: no question needs more, and the LLM steps would otherwise
        # pay for (and be steered by) an arbitrarily long text.
        text = text[:MAX_TEXT_LENGTH]
        outcome = _Outcome(source)
        try:
            if explicit is None:
                filters = self._filters(log, text)
            else:
                filters = normalize_filters(explicit)
                log.debug("rag.filters", via="explicit", filters=filters)
            if filters:
                self._retrieve(
                    log, outcome, checked_table, filters, eff_limit, eff_offset, include_raw
                )
            if outcome.total_count == 0 and outcome.error is None and explicit is None:
                self._fall_back(log, outcome, text, checked_table, filters, eff_limit, eff_offset)
        except Exception as exc:
            self._log_error(log, "rag.error", exc, step="query", table=checked_table)
            outcome.error = _error_info(exc)
            outcome.records, outcome.total_count, outcome.summary = [], 0, None
        envelope = self._envelope(outcome, eff_limit, eff_offset)
        log.debug(
            "rag.run",
            table=checked_table,
            total_count=outcome.total_count,
            records=len(outcome.records),
            cache=outcome.cache,
            fallback=outcome.fallback,
            error=None if outcome.error is None else outcome.error.type,
        )
        return envelope

    def _window(self, limit: object, offset: object) -> tuple[int, int]:
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
        outcome: _Outcome,
        table: str,
        filters: dict[str, Any],
        limit: int,
        offset: int,
        include_raw: bool,
    ) -> None:
        result, hit = self._query(log, table, filters, limit, offset, include_raw)
        all_hits = hit
        used = filters
        if result.total_count == 0:
            relaxed_steps = reformulations(filters)
            for reason, relaxed in itertools.islice(
                relaxed_steps, self.settings.reformulation_max_attempts
            ):
                attempt, hit = self._query(log, table, relaxed, limit, offset, include_raw)
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
        # A result the cache holds is shared with later runs: hand out copies of what a caller
        # could change. With the cache off, this run is the result's only user.
        shared = self._cache.enabled
        if result.mutable and shared:
            records = [record.model_copy(deep=True) for record in result.records]
        else:
            records = list(result.records)
        outcome.filters = dict(used)
        outcome.records = records
        outcome.total_count = result.total_count
        outcome.retrieved_at = result.retrieved_at
        summary = result.summary
        outcome.summary = copy.deepcopy(summary) if summary is not None and shared else summary
        outcome.cache = "hit" if all_hits else "miss"

    def _query(
        self,
        log: Any,
        table: str,
        filters: dict[str, Any],
        limit: int,
        offset: int,
        include_raw: bool,
    ) -> tuple[_QueryResult, bool]:
        key = (table, tuple(filters.items()), limit, offset, include_raw)
        cached: _QueryResult | None = self._cache.get(key)
        if cached is not None:
            log.debug("rag.query", table=table, filters=filters, cache="hit")
            return cached, True
        page = self._facade.read(table, filters_to_query(filters), limit=limit, offset=offset)
        retrieved_at = self._now()
        records = tuple(
            build_records(
                page.rows,
                source=f"persistence.{table}",
                retrieved_at=retrieved_at,
                include_raw=include_raw,
            )
        )
        summary = summarize_if_truncated(records, page.total_count, self.settings.summary_threshold)
        result = _QueryResult(
            records=records,
            total_count=page.total_count,
            retrieved_at=retrieved_at,
            summary=summary,
            mutable=include_raw or any(_has_containers(r) for r in records),
        )
        self._cache.put(key, result)
        log.debug(
            "rag.query",
            table=table,
            filters=filters,
            cache="miss",
            total_count=page.total_count,
            returned=len(records),
        )
        return result, False

    def _fall_back(
        self,
        log: Any,
        outcome: _Outcome,
        text: str,
        table: str,
        filters: dict[str, Any],
        limit: int,
        offset: int,
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
            outcome.error = _error_info(exc)
            self._log_error(log, "rag.fallback", exc, step="fallback", status="suppressed")
            return
        if not allowed:
            outcome.fallback = "suppressed"
            log.debug("rag.fallback", status="suppressed", reason="rate limit reached")
            return
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
        self._use_fallback(log, outcome, result, limit, offset)

    def _use_fallback(
        self, log: Any, outcome: _Outcome, result: FallbackResult, limit: int, offset: int
    ) -> None:
        records: list[Record] = []
        seen: set[tuple[str, str]] = set()
        for read in result.reads:
            if not isinstance(read, FallbackRead) or not is_identifier(read.table):
                continue  # only well-formed reads of a real table become records
            source = f"persistence.{read.table}"
            for record in build_records(
                read.rows, source=source, retrieved_at=read.retrieved_at or self._now()
            ):
                identity = (source, record.provenance.row_hash)
                if identity not in seen:
                    seen.add(identity)
                    records.append(record)
        outcome.source = "agent"
        outcome.fallback = "agent"
        outcome.records = records[offset : offset + limit]  # the window the metadata reports
        outcome.total_count = len(records)
        outcome.retrieved_at = self._now()
        outcome.cache = None
        outcome.dropped_ids = max(0, int(result.dropped_ids))
        if result.error is not None:
            outcome.error = _error_info(result.error)
            if isinstance(result.error, BaseException):
                self._log_error(log, "rag.fallback", result.error, step="fallback", status="error")
        log.debug("rag.fallback", status="agent", records=len(records))

    # -- helpers -----------------------------------------------------------------------------

    def _envelope(self, outcome: _Outcome, limit: int | None, offset: int | None) -> Envelope:
        metadata: dict[str, Any] = {
            "source": outcome.source,
            "query_filters": outcome.filters or None,
            "retrieved_at": outcome.retrieved_at or self._now(),
            "total_count": outcome.total_count,
            "limit": limit,
            "offset": offset,
        }
        if outcome.error is not None:
            metadata["error"] = outcome.error
        if outcome.fallback is not None:
            metadata["fallback"] = outcome.fallback
        if outcome.cache is not None:
            metadata["cache"] = outcome.cache
        if outcome.attempts:
            metadata["reformulation_attempts"] = outcome.attempts
        if outcome.dropped_ids is not None:
            metadata["fallback_dropped_ids"] = outcome.dropped_ids
        summary = outcome.summary or summarize_if_truncated(
            outcome.records, outcome.total_count, self.settings.summary_threshold
        )
        if summary is not None:
            metadata["truncated"] = True
            metadata["summary"] = summary
        return Envelope(metadata=Metadata(**metadata), records=outcome.records)

    def _log_error(self, log: Any, event: str, exc: BaseException, **context: Any) -> None:
        log.warning(
            event,
            error_type=type(exc).__name__,
            error=str(exc)[:_MAX_ERROR_MESSAGE],
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


def _source(table: object) -> str:
    return f"persistence.{table}" if is_identifier(table) else "persistence"
