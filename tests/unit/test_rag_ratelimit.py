"""The in-memory sliding-window limiter, on a moved clock (no sleeping)."""

from __future__ import annotations

import threading

import pytest

from persistence import ConfigurationError
from rag_agent.runtime.ratelimit import (
    MemorySlidingWindowLimiter,
    RateLimiter,
    RedisSlidingWindowLimiter,
    create_limiter,
)
from tests.support.clocks import FakeClock


class TestMemorySlidingWindowLimiter:
    """A true sliding window: each acquisition counts for exactly ``window`` seconds."""

    def test_allows_up_to_limit(self) -> None:
        """``limit`` acquisitions pass, the next is refused."""
        limiter = MemorySlidingWindowLimiter(3, clock=FakeClock(1000.0))
        assert [limiter.try_acquire() for _ in range(4)] == [True, True, True, False]
        assert limiter.used() == 3

    def test_window_slides(self) -> None:
        """Budget returns one unit at a time as each acquisition ages out (not all at once)."""
        clock = FakeClock(1000.0)
        limiter = MemorySlidingWindowLimiter(2, 60, clock=clock)
        assert limiter.try_acquire()  # t=1000
        clock.now = 1030
        assert limiter.try_acquire()  # t=1030
        assert not limiter.try_acquire()
        clock.now = 1059.999
        assert not limiter.try_acquire()
        clock.now = 1060  # the first acquisition is now exactly 60 s old
        assert limiter.try_acquire()
        assert not limiter.try_acquire()  # the one at 1030 still counts
        clock.now = 1090
        assert limiter.try_acquire()

    def test_no_burst_at_a_fixed_window_boundary(self) -> None:
        """Unlike a fixed window, 2 x limit never pass within one window span."""
        clock = FakeClock(1000.0)
        clock.now = 59.0
        limiter = MemorySlidingWindowLimiter(5, 60, clock=clock)
        passed = sum(limiter.try_acquire() for _ in range(5))
        clock.now = 61.0
        passed += sum(limiter.try_acquire() for _ in range(5))
        assert passed == 5

    def test_refused_attempts_do_not_consume(self) -> None:
        """A refused acquisition takes nothing from the budget."""
        clock = FakeClock(1000.0)
        limiter = MemorySlidingWindowLimiter(1, 60, clock=clock)
        assert limiter.try_acquire()
        for _ in range(10):
            assert not limiter.try_acquire()
        clock.now += 60
        assert limiter.try_acquire()

    def test_zero_limit_refuses_everything(self) -> None:
        """A limit of 0 disables the fallback."""
        assert not MemorySlidingWindowLimiter(0, clock=FakeClock(1000.0)).try_acquire()

    def test_thread_safety(self) -> None:
        """Concurrent acquisitions never exceed the limit."""
        limiter = MemorySlidingWindowLimiter(50, clock=FakeClock(1000.0))
        results: list[bool] = []
        lock = threading.Lock()

        def work() -> None:
            got = [limiter.try_acquire() for _ in range(40)]
            with lock:
                results.extend(got)

        threads = [threading.Thread(target=work) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sum(results) == 50

    @pytest.mark.parametrize(("limit", "window"), [(-1, 60), (1.5, 60), (True, 60), (1, 0)])
    def test_bad_parameters(self, limit: object, window: object) -> None:
        """A negative or non-int limit, or a non-positive window, is a configuration error."""
        with pytest.raises(ConfigurationError):
            MemorySlidingWindowLimiter(limit, window)  # type: ignore[arg-type]

    def test_satisfies_protocol(self) -> None:
        """It is a ``RateLimiter``."""
        assert isinstance(MemorySlidingWindowLimiter(1), RateLimiter)


class TestCreateLimiter:
    """``create_limiter`` picks the storage from the URI."""

    def test_memory(self) -> None:
        """memory:// gives the in-process limiter."""
        assert isinstance(create_limiter("memory://", 3), MemorySlidingWindowLimiter)

    def test_redis_connects_lazily(self) -> None:
        """redis:// builds without connecting (a dead Redis shows up on use)."""
        limiter = create_limiter("redis://127.0.0.1:1/0", 3)
        assert isinstance(limiter, RedisSlidingWindowLimiter)
        limiter.close()

    def test_unknown_scheme(self) -> None:
        """Another scheme is a configuration error naming the variable."""
        with pytest.raises(ConfigurationError, match="RAG_RATE_LIMIT_STORAGE"):
            create_limiter("memcached://x", 3)
