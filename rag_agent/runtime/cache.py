"""The agent's query cache: a ``cachetools.TTLCache`` behind a lock, bounded twice.

It holds at most ``maxsize`` entries (``RAG_CACHE_MAXSIZE``) *and* at most about ``max_bytes``
bytes (``RAG_CACHE_MAX_BYTES``): entries of wide rows would otherwise let 1024 entries grow to
gigabytes. Sizes are estimated by :func:`approximate_size` (text and bytes by length, containers
and models by their items); the least recently used entries are evicted until both bounds hold,
and a single value larger than ``max_bytes`` is not cached at all.

Thread-safety: every method takes the cache's lock, so one cache may serve many threads (the
``TTLCache`` itself is not thread-safe). Values must be immutable or copied by the caller: the
agent stores frozen records and hands out fresh envelopes around them.

The clock is injectable (``timer=``), so tests expire entries by moving time, not by sleeping::

    now = [0.0]
    cache = QueryCache(maxsize=10, ttl=300, timer=lambda: now[0])
    cache.put(key, value); now[0] += 301; assert cache.get(key) is None
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from cachetools import TTLCache
from pydantic import BaseModel

from persistence.errors import ConfigurationError

__all__ = ["DEFAULT_CACHE_MAX_BYTES", "QueryCache", "approximate_size"]

#: The default byte bound of a query cache (``RAG_CACHE_MAX_BYTES``): 64 MiB.
DEFAULT_CACHE_MAX_BYTES = 64 * 1024 * 1024
# Per-object overhead counted for every container, model and scalar (a CPython object header).
_OVERHEAD = 56


def approximate_size(value: Any) -> int:
    """About how many bytes ``value`` holds: text and bytes by length, containers, mappings,
    dataclasses and pydantic models by their items (each object adding a small overhead).
    Shared objects are counted once; cost is linear in the size of the value.
    """
    total, seen, stack = 0, set(), [value]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        total += _OVERHEAD
        if isinstance(item, str | bytes | bytearray):
            total += len(item)
        elif isinstance(item, Mapping):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple | set | frozenset):
            stack.extend(item)
        elif isinstance(item, BaseModel):
            stack.extend(vars(item).values())
            stack.extend((item.__pydantic_extra__ or {}).values())
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            stack.extend(getattr(item, field.name) for field in dataclasses.fields(item))
        elif not isinstance(item, int | float | bool | type(None)):
            total += sys.getsizeof(item, _OVERHEAD)
    return total


def _entry_size(entry: tuple[Any, int]) -> int:
    return entry[1]


class QueryCache:
    """A lock-protected TTL cache; when not ``enabled``, ``get`` always misses, ``put`` ignores."""

    __slots__ = ("_cache", "_lock", "enabled", "max_bytes", "maxsize")

    def __init__(
        self,
        maxsize: int = 1024,
        ttl: float = 300,
        *,
        max_bytes: int = DEFAULT_CACHE_MAX_BYTES,
        enabled: bool = True,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        if type(max_bytes) is not int or max_bytes < 1:
            raise ConfigurationError(
                f"max_bytes must be a positive int, not {max_bytes!r} (env RAG_CACHE_MAX_BYTES)",
                variable="RAG_CACHE_MAX_BYTES",
            )
        self.maxsize = maxsize
        self.max_bytes = max_bytes
        # The TTLCache counts bytes (each entry's measured size); the entry bound is kept in put.
        self._cache: TTLCache[Hashable, tuple[Any, int]] = TTLCache(
            maxsize=max_bytes, ttl=ttl, timer=timer, getsizeof=_entry_size
        )
        self._lock = threading.Lock()
        self.enabled = enabled

    def get(self, key: Hashable) -> Any | None:
        """The value stored under ``key``, or ``None`` when absent, expired or disabled."""
        if not self.enabled:
            return None
        with self._lock:
            entry = self._cache.get(key)
        return None if entry is None else entry[0]

    def put(self, key: Hashable, value: Any) -> None:
        """Store ``value`` under ``key``, evicting the least recently used entries until both
        bounds hold; a value larger than ``max_bytes`` is not stored."""
        if not self.enabled:
            return
        # The key holds the filter values a caller sent: it counts as much as the value.
        size = approximate_size((key, value))  # measured once, outside the lock
        with self._lock:
            if size > self.max_bytes:
                self._cache.pop(key, None)  # never serve an older value for this key
                return
            self._cache[key] = (value, size)
            while len(self._cache) > self.maxsize:
                self._cache.popitem()

    @property
    def size_bytes(self) -> int:
        """The approximate bytes held by the live entries."""
        with self._lock:
            self._cache.expire()
            return int(self._cache.currsize)

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._cache.clear()

    def __len__(self) -> int:
        with self._lock:
            self._cache.expire()
            return len(self._cache)
