"""How a ``RAGAgent`` is wired: its hooks, limiter and cache, built from ``llm`` and settings."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from typing import Any

from persistence import ReadOnlyPersistenceFacade
from rag_agent.fallback import create_fallback_runner
from rag_agent.fallback.scope import FallbackScope
from rag_agent.hooks import FallbackRunner, FilterExtractor
from rag_agent.pipeline.pipeline import Pipeline
from rag_agent.runtime.cache import QueryCache
from rag_agent.runtime.ratelimit import RateLimiter, create_limiter
from rag_agent.settings import RAGSettings
from rag_agent.specs import ExtractionRequest, Ignored, Understanding
from rag_agent.understanding.conditions import legacy_conditions
from rag_agent.understanding.filters import normalize_filters
from rag_agent.understanding.llm.extract import SchemaFilterExtractor
from rag_agent.understanding.request import ConditionExtractor


def wire_pipeline(
    facade: ReadOnlyPersistenceFacade,
    settings: RAGSettings,
    *,
    llm: Any,
    llm_filters: FilterExtractor | None,
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
    if extractor is None and llm_filters is not None:
        extractor = _hook_extractor(llm_filters, budget=None)  # the caller's own code
    elif extractor is None and llm is not None:
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


def _hook_extractor(
    extract: FilterExtractor, budget: Callable[[], bool] | None
) -> ConditionExtractor:
    """An ``llm_filters`` hook (text → the four legacy keys) as an extractor; with a
    ``budget``, no budget means no call."""

    def extractor(request: ExtractionRequest) -> Understanding:
        if budget is not None and not budget():
            return Understanding(ignored=(Ignored(request.text, "LLM budget exhausted"),))
        filters = normalize_filters(extract(request.text))
        return Understanding(conditions=legacy_conditions(filters, "llm"))

    return extractor
