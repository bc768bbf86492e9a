"""The fallback step of a pipeline: rate-limited, cached, under the run's LLM deadline."""

from __future__ import annotations

from typing import Any

from rag_agent.envelope import canonical_value
from rag_agent.envelope.assemble import Outcome, error_info, fallback_page
from rag_agent.hooks import FallbackRequest, FallbackResult
from rag_agent.pipeline.parts import PipelineParts, _Window
from rag_agent.runtime.deadline import LLMDeadline
from rag_agent.runtime.effects import Call, Steps
from rag_agent.runtime.ratelimit import RateLimiterUnavailableError
from rag_agent.specs import Condition
from rag_agent.understanding.conditions import query_filters_view


class FallbackStep(PipelineParts):
    """Step 5: the rate-limited, cached fallback when nothing was found."""

    __slots__ = ()

    def _fall_back(
        self,
        log: Any,
        outcome: Outcome,
        text: str,
        table: str,
        conditions: tuple[Condition, ...],
        window: _Window,
        include_raw: bool = False,
        deadline: LLMDeadline | None = None,
        history: tuple[str, ...] = (),
    ) -> Steps[None]:
        # JSON-ready: the fallback shows the model what was tried (a date as its ISO text).
        filters = canonical_value(query_filters_view(conditions))
        if conditions and outcome.filters is None:
            self._applied(outcome, conditions)
        if self.fallback is None:
            outcome.fallback = "disabled"
            log.debug("rag.fallback", status="disabled", reason="no LLM fallback configured")
            return
        # Paging through a fallback's answer (``chat``'s ``next``) asks the model once; the same
        # words after other turns are another question.
        cache_key = ("fallback", table, text, history, self.facade.data_version(table))
        cached = self.cache.get(cache_key)
        if isinstance(cached, FallbackResult):
            log.debug("rag.fallback", status="cached")
            self._take_fallback(log, outcome, cached, window, include_raw)
            outcome.cache = "hit"
            return
        if deadline is not None and deadline.expired:
            outcome.fallback = "suppressed"
            log.info("rag.fallback", status="suppressed", reason="the run's LLM deadline passed")
            return
        try:
            allowed = self.limiter.try_acquire()
        except RateLimiterUnavailableError as exc:
            outcome.fallback = "suppressed"
            outcome.error = error_info(exc)
            self.log_error(log, "rag.fallback", exc, step="fallback", status="suppressed")
            return
        if not allowed:
            outcome.fallback = "suppressed"
            log.debug("rag.fallback", status="suppressed", reason="rate limit reached")
            return
        limit, offset = window
        request = FallbackRequest(
            text=text,
            table=table,
            filters=filters,
            limit=limit,
            offset=offset,
            max_steps=self.settings.fallback_max_steps,
            seconds_left=None if deadline is None else deadline.remaining(),
            history=history,
        )
        try:
            result = yield Call("fallback", (request,))
        except Exception as exc:  # a broken hook must not break run()
            result = FallbackResult(error=exc)
        if result.error is None:
            self.cache.put(cache_key, result)
        self._take_fallback(log, outcome, result, window, include_raw)

    def _take_fallback(
        self,
        log: Any,
        outcome: Outcome,
        result: FallbackResult,
        window: _Window,
        include_raw: bool,
    ) -> None:
        limit, offset = window
        page = fallback_page(
            result,
            limit=limit,
            offset=offset,
            now=self.now,
            summary_threshold=self.settings.summary_threshold,
            include_raw=include_raw,
        )
        outcome.take_fallback(result, page)
        if isinstance(result.error, BaseException):
            self.log_error(log, "rag.fallback", result.error, step="fallback", status="error")
        log.debug("rag.fallback", status="agent", records=page.total_count)
