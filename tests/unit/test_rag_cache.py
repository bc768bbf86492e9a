"""The query cache: TTL on an injected clock, lock-protected, switchable off."""

from __future__ import annotations

import threading

from rag_agent.runtime.cache import QueryCache
from tests.support.clocks import FakeClock


class TestQueryCache:
    """``QueryCache`` stores, expires and evicts entries."""

    def test_get_after_put(self) -> None:
        """A stored value is returned for its key."""
        cache = QueryCache(10, 60)
        cache.put(("leads", 1), "value")
        assert cache.get(("leads", 1)) == "value"
        assert cache.get(("leads", 2)) is None

    def test_entries_expire_with_the_clock(self) -> None:
        """An entry is gone once its TTL has passed on the injected clock."""
        clock = FakeClock()
        cache = QueryCache(10, 60, timer=clock)
        cache.put("k", 1)
        clock.now = 59.9
        assert cache.get("k") == 1
        clock.now = 60.0
        assert cache.get("k") is None
        assert len(cache) == 0

    def test_maxsize_evicts(self) -> None:
        """Beyond maxsize the least recently used entry is evicted."""
        cache = QueryCache(2, 60)
        for key in ("a", "b", "c"):
            cache.put(key, key)
        assert len(cache) == 2
        assert cache.get("a") is None

    def test_disabled_never_stores(self) -> None:
        """A disabled cache misses every time."""
        cache = QueryCache(10, 60, enabled=False)
        cache.put("k", 1)
        assert cache.get("k") is None

    def test_clear(self) -> None:
        """``clear`` forgets everything."""
        cache = QueryCache(10, 60)
        cache.put("k", 1)
        cache.clear()
        assert cache.get("k") is None

    def test_concurrent_use(self) -> None:
        """Many threads putting and getting leave the cache consistent."""
        cache = QueryCache(64, 60)
        errors: list[BaseException] = []

        def work(n: int) -> None:
            try:
                for i in range(500):
                    cache.put((n, i % 80), i)
                    cache.get((n, (i * 7) % 80))
            except BaseException as exc:  # pragma: no cover - only on failure
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors
        assert len(cache) <= 64
