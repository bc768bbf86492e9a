"""Bounded work outside the backends: value and in-list bounds checked before any I/O, the query
cache bounded by bytes, one memory:// fallback budget per process."""

from __future__ import annotations

from typing import Any

import pytest

from persistence import (
    ConfigurationError,
    Filter,
    InvalidQueryError,
    MemoryStore,
    Op,
    create_persistence_agent,
    create_read_only_facade,
)
from persistence.query import MAX_IN_VALUES, MAX_TEXT_VALUE_LENGTH
from rag_agent import RAGAgent, RAGSettings
from rag_agent.hooks import FallbackRequest, FallbackResult
from rag_agent.runtime.cache import DEFAULT_CACHE_MAX_BYTES, QueryCache, approximate_size
from rag_agent.runtime.ratelimit import create_limiter
from rag_agent.specs import MAX_TOOL_IN_VALUES, FilterSpec
from rag_agent.tools import build_tools


class TestQueryCacheBytes:
    def test_wide_values_are_bounded_by_bytes(self) -> None:
        """Entries of 100 KB each fill a 1 MB cache to at most 1 MB, far below maxsize."""
        cache = QueryCache(maxsize=1024, ttl=300, max_bytes=1_000_000)
        for i in range(50):
            cache.put(("page", i), {"rows": [{"body": "x" * 100_000}]})
        assert 0 < cache.size_bytes <= 1_000_000
        assert len(cache) < 10
        assert cache.get(("page", 49)) is not None  # the newest entry is kept
        assert cache.get(("page", 0)) is None  # the oldest were evicted

    def test_a_value_larger_than_the_bound_is_not_cached(self) -> None:
        """A single value over max_bytes is not stored, and an older value for its key goes."""
        cache = QueryCache(maxsize=10, ttl=300, max_bytes=10_000)
        cache.put("k", "small")
        cache.put("k", "y" * 20_000)
        assert cache.get("k") is None and cache.size_bytes == 0

    def test_entry_bound_still_applies(self) -> None:
        """Small values are still bounded by maxsize entries."""
        cache = QueryCache(maxsize=3, ttl=300)
        for i in range(10):
            cache.put(i, i)
        assert len(cache) == 3 and cache.get(9) == 9

    def test_bad_bound_is_a_configuration_error(self) -> None:
        """A non-positive max_bytes names the variable."""
        with pytest.raises(ConfigurationError, match="RAG_CACHE_MAX_BYTES"):
            QueryCache(max_bytes=0)

    def test_approximate_size_counts_text_and_nesting(self) -> None:
        """The estimate grows with the text held, however deeply it is nested."""
        small = approximate_size({"a": [{"b": "x"}]})
        large = approximate_size({"a": [{"b": "x" * 10_000}]})
        assert large - small == 9_999

    def test_agent_cache_follows_the_setting(self) -> None:
        """RAG_CACHE_MAX_BYTES reaches the agent's cache, whose wide pages stay within it."""
        assert RAGSettings().cache_max_bytes == DEFAULT_CACHE_MAX_BYTES
        assert RAGSettings.from_env({"RAG_CACHE_MAX_BYTES": "300000"}).cache_max_bytes == 300_000
        store = MemoryStore()
        create_persistence_agent(kind="memory", store=store).batch(
            "leads",
            [{"id": i, "email": f"l{i}@x.io", "title": "t" * 50_000} for i in range(1, 21)],
        )
        agent = RAGAgent(
            create_read_only_facade("memory", store=store),
            settings=RAGSettings(cache_max_bytes=300_000),
        )
        for i in range(1, 21):
            assert agent.run("lead", filters={"id": i}).metadata.total_count == 1
        cache = agent._pipeline.cache
        assert cache.size_bytes <= 300_000 and len(cache) < 20


class CountingFallback:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, request: FallbackRequest) -> FallbackResult:
        self.calls += 1
        return FallbackResult()


class TestProcessWideMemoryBudget:
    def test_limiters_of_one_key_share_the_window(self) -> None:
        """Two memory:// limiters of the same key share one budget; another key has its own."""
        first, second = create_limiter("memory://", 2), create_limiter("memory://", 2)
        assert [first.try_acquire(), second.try_acquire(), second.try_acquire()] == [
            True,
            True,
            False,
        ]
        assert first.try_acquire() is False
        assert create_limiter("memory://", 2, key="other").try_acquire() is True

    def test_two_agents_share_max_fallbacks_per_min(self) -> None:
        """Two agents in one process together get RAG_MAX_FALLBACKS_PER_MIN fallbacks."""
        settings = RAGSettings(max_fallbacks_per_min=3)
        facade = create_read_only_facade("memory", store=MemoryStore())
        fallbacks = [CountingFallback(), CountingFallback()]
        agents = [RAGAgent(facade, settings=settings, fallback=f) for f in fallbacks]
        statuses: list[Any] = []
        # Distinct questions: a repeated one is answered from the agent's fallback cache.
        for thing in ("widgets", "gadgets", "gizmos"):
            for agent in agents:
                statuses.append(agent.run(f"who wrote about {thing}?").metadata.fallback)
        assert statuses.count("agent") == 3 and statuses.count("suppressed") == 3
        assert sum(f.calls for f in fallbacks) == 3


class TestValueBounds:
    def test_long_text_refused_before_any_backend(self) -> None:
        """A text value over MAX_TEXT_VALUE_LENGTH (alone or in an in list) is a typed error
        raised when the filter is built, so no backend ever holds it."""
        Filter("email", Op.EQ, "a" * MAX_TEXT_VALUE_LENGTH)
        for op, value in (
            (Op.EQ, "a" * (MAX_TEXT_VALUE_LENGTH + 1)),
            (Op.ICONTAINS, "b" * 10_000_000),
            (Op.IN, ("ok", "c" * (MAX_TEXT_VALUE_LENGTH + 1))),
        ):
            with pytest.raises(InvalidQueryError, match=f"at most {MAX_TEXT_VALUE_LENGTH}"):
                Filter("email", op, value)

    def test_in_lists_bounded(self) -> None:
        """An in list of MAX_IN_VALUES is accepted and one more value is refused."""
        assert MAX_IN_VALUES == 1_000
        Filter("id", Op.IN, tuple(range(MAX_IN_VALUES)))
        with pytest.raises(InvalidQueryError, match="at most 1000"):
            Filter("id", Op.IN, tuple(range(MAX_IN_VALUES + 1)))

    def test_tool_in_lists_bounded(self) -> None:
        """A tool call's in list over MAX_TOOL_IN_VALUES is an error envelope, not a read."""
        agent = RAGAgent(create_read_only_facade("memory", store=MemoryStore()))
        [_, query_table, *_] = build_tools(agent, content="full")
        values = [f"x{i}@e.io" for i in range(MAX_TOOL_IN_VALUES + 1)]
        message = query_table.invoke(
            {
                "name": "query_table",
                "args": {
                    "table": "leads",
                    "filters": [{"column": "email", "op": "in", "value": values}],
                },
                "id": "call_1",
                "type": "tool_call",
            }
        )
        error = message.artifact.metadata.error
        assert error is not None and error.type == "InvalidQueryError"
        assert f"at most {MAX_TOOL_IN_VALUES}" in error.message
        spec = FilterSpec(column="email", op="in", value=values[:MAX_TOOL_IN_VALUES])
        assert len(spec.to_filter().value) == MAX_TOOL_IN_VALUES
