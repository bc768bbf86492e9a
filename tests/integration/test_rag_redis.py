"""The Redis sliding-window limiter against the real local Redis (shared budget, fail closed)."""

from __future__ import annotations

import pytest

from persistence import AccessPolicy, MemoryStore, ReadOnlyPersistenceFacade
from persistence.backends.memory import MemoryBackend
from rag_agent import (
    FallbackRequest,
    FallbackResult,
    RAGAgent,
    RAGSettings,
    RateLimiterUnavailableError,
    RedisSlidingWindowLimiter,
    create_limiter,
)
from tests.support.clocks import FakeClock

pytestmark = pytest.mark.redis


class TestRedisSlidingWindowLimiter:
    """The Redis limiter is a true sliding window shared through one key."""

    def test_window_slides_on_moved_clock(self, redis_url: str, redis_key_prefix: str) -> None:
        """Acquisitions age out one by one, exactly ``window`` seconds after they happened."""
        clock = FakeClock(1_700_000_000.0)
        limiter = RedisSlidingWindowLimiter(
            redis_url, 2, 60, key=redis_key_prefix + "w", clock=clock
        )
        start = clock.now
        assert limiter.try_acquire()
        clock.now = start + 30
        assert limiter.try_acquire()
        assert not limiter.try_acquire()
        assert limiter.used() == 2
        clock.now = start + 60
        assert limiter.try_acquire()
        assert not limiter.try_acquire()
        clock.now = start + 90
        assert limiter.try_acquire()
        limiter.close()

    def test_budget_is_shared(self, redis_url: str, redis_key_prefix: str) -> None:
        """Two limiters on the same key draw from one budget."""
        clock = FakeClock(1_700_000_000.0)
        key = redis_key_prefix + "shared"
        first = RedisSlidingWindowLimiter(redis_url, 3, 60, key=key, clock=clock)
        second = RedisSlidingWindowLimiter(redis_url, 3, 60, key=key, clock=clock)
        results = [first.try_acquire(), second.try_acquire(), first.try_acquire()]
        assert results == [True, True, True]
        assert not second.try_acquire()
        assert not first.try_acquire()
        first.close()
        second.close()

    def test_server_clock_by_default(self, redis_url: str, redis_key_prefix: str) -> None:
        """Without an injected clock the Redis server's time is used."""
        limiter = RedisSlidingWindowLimiter(redis_url, 1, 60, key=redis_key_prefix + "srv")
        assert limiter.try_acquire()
        assert not limiter.try_acquire()
        limiter.close()

    def test_key_expires(self, redis_url: str, redis_key_prefix: str) -> None:
        """The sorted set carries a TTL, so an idle budget leaves nothing behind."""
        import redis

        key = redis_key_prefix + "ttl"
        limiter = RedisSlidingWindowLimiter(redis_url, 1, 60, key=key)
        limiter.try_acquire()
        client = redis.Redis.from_url(redis_url)
        assert 0 < client.pttl(key) <= 60_000
        client.close()
        limiter.close()

    def test_unreachable_fails_closed(self) -> None:
        """A Redis that cannot be reached raises RateLimiterUnavailableError."""
        limiter = create_limiter("redis://127.0.0.1:1/0", 5)
        with pytest.raises(RateLimiterUnavailableError):
            limiter.try_acquire()


class CountingFallback:
    """A fallback that counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, request: FallbackRequest) -> FallbackResult:
        self.calls += 1
        return FallbackResult()


def _agent(url: str, key: str, clock: FakeClock, fallback: CountingFallback) -> RAGAgent:
    facade = ReadOnlyPersistenceFacade(MemoryBackend(MemoryStore()), AccessPolicy.read_only())
    limiter = RedisSlidingWindowLimiter(url, 2, 60, key=key, clock=clock)
    return RAGAgent(facade, settings=RAGSettings(), fallback=fallback, limiter=limiter, clock=clock)


class TestSharedFallbackBudget:
    """Two agents sharing a Redis limiter share RAG_MAX_FALLBACKS_PER_MIN."""

    def test_two_agents_one_budget(self, redis_url: str, redis_key_prefix: str) -> None:
        """The third fallback across both agents is suppressed until the window moves.

        Each question is new: an answered one comes from the fallback cache, spending nothing."""
        clock = FakeClock(1_700_000_000.0)
        key = redis_key_prefix + "agents"
        one_fallback, two_fallback = CountingFallback(), CountingFallback()
        one = _agent(redis_url, key, clock, one_fallback)
        two = _agent(redis_url, key, clock, two_fallback)
        statuses = [
            one.run("first?").metadata.fallback,
            two.run("second?").metadata.fallback,
            one.run("third?").metadata.fallback,
            two.run("fourth?").metadata.fallback,
        ]
        assert statuses == ["agent", "agent", "suppressed", "suppressed"]
        clock.now += 60
        assert two.run("fifth?").metadata.fallback == "agent"
        assert (one_fallback.calls, two_fallback.calls) == (1, 2)
        one.close()
        two.close()

    def test_agent_from_storage_setting(self, redis_url: str, redis_key_prefix: str) -> None:
        """RAG_RATE_LIMIT_STORAGE=redis://… gives the agent a Redis limiter."""
        facade = ReadOnlyPersistenceFacade(MemoryBackend(MemoryStore()), AccessPolicy.read_only())
        agent = RAGAgent(facade, settings=RAGSettings(rate_limit_storage=redis_url))
        assert isinstance(agent.limiter, RedisSlidingWindowLimiter)
        agent.close()

    def test_agent_fails_closed(self) -> None:
        """With Redis down the agent reports 'suppressed' and the error, never calling the LLM."""
        fallback = CountingFallback()
        facade = ReadOnlyPersistenceFacade(MemoryBackend(MemoryStore()), AccessPolicy.read_only())
        agent = RAGAgent(
            facade,
            settings=RAGSettings(rate_limit_storage="redis://127.0.0.1:1/0"),
            fallback=fallback,
        )
        data = agent.run("?", return_json=True)
        assert data["metadata"]["fallback"] == "suppressed"
        assert data["metadata"]["error"]["type"] == "RateLimiterUnavailableError"
        assert fallback.calls == 0
