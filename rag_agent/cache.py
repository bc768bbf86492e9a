"""The agent's query cache: a ``cachetools.TTLCache`` behind a lock.

Thread-safety: every method takes the cache's lock, so one cache may serve many threads (the
``TTLCache`` itself is not thread-safe). Values must be immutable or copied by the caller: the
agent stores frozen records and hands out fresh envelopes around them.

The clock is injectable (``timer=``), so tests expire entries by moving time, not by sleeping::

    now = [0.0]
    cache = QueryCache(maxsize=10, ttl=300, timer=lambda: now[0])
    cache.put(key, value); now[0] += 301; assert cache.get(key) is None
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Any

from cachetools import TTLCache

__all__ = ["QueryCache"]


class QueryCache:
    """A lock-protected TTL cache; when not ``enabled``, ``get`` always misses, ``put`` ignores."""

    __slots__ = ("_cache", "_lock", "enabled")

    def __init__(
        self,
        maxsize: int = 1024,
        ttl: float = 300,
        *,
        enabled: bool = True,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        self._cache: TTLCache[Hashable, Any] = TTLCache(maxsize=maxsize, ttl=ttl, timer=timer)
        self._lock = threading.Lock()
        self.enabled = enabled

    def get(self, key: Hashable) -> Any | None:
        """The value stored under ``key``, or ``None`` when absent, expired or disabled."""
        if not self.enabled:
            return None
        with self._lock:
            return self._cache.get(key)

    def put(self, key: Hashable, value: Any) -> None:
        """Store ``value`` under ``key`` (evicting the least recently used entry when full)."""
        if not self.enabled:
            return
        with self._lock:
            self._cache[key] = value

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._cache.clear()

    def __len__(self) -> int:
        with self._lock:
            self._cache.expire()
            return len(self._cache)
