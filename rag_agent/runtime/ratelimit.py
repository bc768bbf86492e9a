"""The fallback limiter: a true sliding window of ``limit`` acquisitions per ``window`` seconds.

Each acquisition is remembered with its time stamp; one is allowed when fewer than ``limit``
acquisitions happened in the last ``window`` seconds (an acquisition exactly ``window`` seconds
old no longer counts). Unlike a fixed window there is no burst of ``2 * limit`` around a window
boundary, and unlike the ``limits`` library's moving window the clock is injectable, so tests
move time instead of sleeping::

    now = [0.0]
    limiter = MemorySlidingWindowLimiter(limit=2, clock=lambda: now[0])
    limiter.try_acquire(); limiter.try_acquire()    # True, True
    limiter.try_acquire()                           # False: 2 in the last 60 s
    now[0] += 60; limiter.try_acquire()             # True again

Two storages, chosen by URI with :func:`create_limiter`:

- ``memory://``: one budget per process and ``key`` (:class:`MemorySlidingWindowLimiter`): every
  limiter :func:`create_limiter` makes for the same key shares one window, as Redis does, so two
  agents in one process share ``RAG_MAX_FALLBACKS_PER_MIN`` (an injected clock gets a private
  window; :func:`reset_memory_budgets` forgets the shared ones, for tests);
- ``redis://host:port/db`` (also ``rediss://``, ``unix://``): one budget shared by every process
  and host using the same key (:class:`RedisSlidingWindowLimiter`), kept in a sorted set updated
  atomically by a Lua script. Without an injected clock it uses the Redis server's clock, so
  hosts with skewed clocks still share one window.

If the storage cannot be reached, ``try_acquire`` raises :class:`RateLimiterUnavailableError`:
the agent then refuses the fallback (fails closed) rather than spend an unmetered LLM budget.
Both limiters are thread-safe.
"""

from __future__ import annotations

import collections
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from persistence.errors import BackendUnavailableError, ConfigurationError
from persistence.secrets import mask_url, register_url_secret

__all__ = [
    "DEFAULT_KEY",
    "REDIS_SCHEMES",
    "STORAGE_SCHEMES",
    "MemorySlidingWindowLimiter",
    "RateLimiter",
    "RateLimiterUnavailableError",
    "RedisSlidingWindowLimiter",
    "create_limiter",
    "reset_memory_budgets",
]

#: The Redis key (sorted set) that holds the fallback budget's acquisitions.
DEFAULT_KEY = "rag_agent:fallback"
#: Storage URI schemes served by :class:`RedisSlidingWindowLimiter`.
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
#: Every storage URI scheme :func:`create_limiter` accepts (``RAG_RATE_LIMIT_STORAGE``).
STORAGE_SCHEMES = ("memory://", *REDIS_SCHEMES)


class RateLimiterUnavailableError(BackendUnavailableError):
    """The limiter's storage could not be reached; the caller must treat it as "not allowed"."""


@runtime_checkable
class RateLimiter(Protocol):
    """What the agent needs from a limiter."""

    limit: int
    window: float

    def try_acquire(self) -> bool:
        """Take one unit of the budget if allowed now; ``False`` when the window is full."""
        ...


def _check(limit: int, window: float) -> None:
    if type(limit) is not int or limit < 0:
        raise ConfigurationError(
            f"limit must be a non-negative int, not {limit!r} (env RAG_MAX_FALLBACKS_PER_MIN)",
            variable="RAG_MAX_FALLBACKS_PER_MIN",
        )
    if not isinstance(window, int | float) or not window > 0:
        raise ConfigurationError(f"window must be a positive number of seconds, not {window!r}")


class _Window:
    """The acquisitions of one budget: time stamps and the lock that guards them."""

    __slots__ = ("lock", "stamps")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stamps: collections.deque[float] = collections.deque()


# key -> the window every memory:// limiter of that key shares (monotonic clock only).
_SHARED_WINDOWS: dict[str, _Window] = {}
_SHARED_LOCK = threading.Lock()


def _shared_window(key: str) -> _Window:
    with _SHARED_LOCK:
        return _SHARED_WINDOWS.setdefault(key, _Window())


def reset_memory_budgets() -> None:
    """Forget every process-wide ``memory://`` window (for tests; running limiters keep theirs)."""
    with _SHARED_LOCK:
        _SHARED_WINDOWS.clear()


class MemorySlidingWindowLimiter:
    """A sliding window kept in process memory. Thread-safe (one lock per window).

    Each instance has its own window unless given ``key=``: then every limiter of that key in
    the process shares one (each applying its own ``limit``, as limiters sharing a Redis key do).
    """

    def __init__(
        self,
        limit: int,
        window: float = 60.0,
        *,
        clock: Callable[[], float] = time.monotonic,
        key: str | None = None,
    ) -> None:
        _check(limit, window)
        self.limit = limit
        self.window = float(window)
        self.key = key
        self._clock = clock
        shared = _shared_window(key) if key is not None else _Window()
        self._stamps = shared.stamps
        self._lock = shared.lock

    def _expire(self, now: float) -> None:
        horizon = now - self.window
        stamps = self._stamps
        while stamps and stamps[0] <= horizon:
            stamps.popleft()

    def try_acquire(self) -> bool:
        """Take one unit if fewer than ``limit`` were taken in the last ``window`` seconds."""
        with self._lock:
            now = self._clock()
            self._expire(now)
            if len(self._stamps) >= self.limit:
                return False
            self._stamps.append(now)
            return True

    def used(self) -> int:
        """How many units were taken in the current window."""
        with self._lock:
            self._expire(self._clock())
            return len(self._stamps)

    def __repr__(self) -> str:
        shared = "" if self.key is None else f", key={self.key!r}"
        return f"MemorySlidingWindowLimiter(limit={self.limit}, window={self.window}{shared})"


# KEYS[1]: the sorted set; ARGV: now ("" = use the server's clock), window, limit, member.
_NOW_LUA = """
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
"""
_ACQUIRE_LUA = (
    _NOW_LUA
    + """
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) >= limit then
  return 0
end
redis.call('ZADD', KEYS[1], now, ARGV[4])
redis.call('PEXPIRE', KEYS[1], math.ceil(window * 1000))
return 1
"""
)
_USED_LUA = (
    _NOW_LUA
    + """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
return redis.call('ZCARD', KEYS[1])
"""
)


class RedisSlidingWindowLimiter:
    """A sliding window in a Redis sorted set, shared by every limiter using the same ``key``.

    Each acquisition is one member scored by its time stamp; a Lua script drops members older
    than the window, counts, and adds, atomically. Thread-safe (redis-py's pool is). Short
    socket timeouts keep a dead Redis from stalling a run: it fails closed quickly.

    By default the script reads the Redis server's clock, so every process shares one ordered
    time line. An injected ``clock`` (for tests) is read and applied under a lock: a reading
    taken earlier but applied later would be judged on a window newer callers had already
    trimmed, and could let one call too many through.
    """

    def __init__(
        self,
        url: str,
        limit: int,
        window: float = 60.0,
        *,
        key: str = DEFAULT_KEY,
        clock: Callable[[], float] | None = None,
        socket_timeout: float = 0.5,
        client: Any = None,
    ) -> None:
        _check(limit, window)
        self.limit = limit
        self.window = float(window)
        self.key = key
        self._clock = clock
        self._clock_lock = threading.Lock()
        register_url_secret(url)  # its password is masked in logs from now on
        if client is None:
            try:
                import redis
            except ImportError as exc:  # pragma: no cover - depends on the installed extras
                raise ConfigurationError(
                    "a redis:// limiter storage needs the redis client: "
                    "pip install 'readonly-rag[redis]'",
                    variable="RAG_RATE_LIMIT_STORAGE",
                ) from exc
            client = redis.Redis.from_url(
                url, socket_timeout=socket_timeout, socket_connect_timeout=socket_timeout
            )
        self._client = client
        self._acquire = client.register_script(_ACQUIRE_LUA)
        self._used = client.register_script(_USED_LUA)

    def _run(self, script: Any, *args: object) -> int:
        if self._clock is None:
            return int(script(keys=[self.key], args=["", self.window, *args]))
        with self._clock_lock:
            now = repr(float(self._clock()))
            return int(script(keys=[self.key], args=[now, self.window, *args]))

    def _call(self, script: Any, *args: object) -> int:
        try:
            return self._run(script, *args)
        except Exception as exc:  # redis.RedisError, OSError: any failure means "unknown budget"
            raise RateLimiterUnavailableError(
                f"rate-limit storage unavailable: {type(exc).__name__}",
                backend="redis",
                operation="try_acquire",
            ) from exc

    def try_acquire(self) -> bool:
        """Take one unit if fewer than ``limit`` were taken in the last ``window`` seconds.

        Raises ``RateLimiterUnavailableError`` when Redis cannot be reached.
        """
        if self.limit == 0:
            return False
        return self._call(self._acquire, self.limit, uuid.uuid4().hex) == 1

    def used(self) -> int:
        """How many units were taken in the current window (by anyone sharing ``key``)."""
        return self._call(self._used)

    def close(self) -> None:
        """Release the connection pool."""
        self._client.close()

    def __repr__(self) -> str:
        return (
            f"RedisSlidingWindowLimiter(limit={self.limit}, window={self.window}, key={self.key!r})"
        )


def create_limiter(
    storage: str,
    limit: int,
    *,
    window: float = 60.0,
    key: str = DEFAULT_KEY,
    clock: Callable[[], float] | None = None,
) -> MemorySlidingWindowLimiter | RedisSlidingWindowLimiter:
    """A limiter for ``storage`` (``memory://`` or ``redis://…``), as ``RAG_RATE_LIMIT_STORAGE``.

    Both storages give one budget per ``key``: ``memory://`` per process, ``redis://`` per Redis.
    An injected ``clock`` (tests) gives a ``memory://`` limiter a window of its own.

    The Redis client connects lazily: a Redis that is down shows up on ``try_acquire``.
    """
    if storage.startswith("memory://"):
        if clock is None:
            # One budget per process and key: agents built side by side share it.
            return MemorySlidingWindowLimiter(limit, window, key=key)
        return MemorySlidingWindowLimiter(limit, window, clock=clock)
    if storage.startswith(REDIS_SCHEMES):
        return RedisSlidingWindowLimiter(storage, limit, window, key=key, clock=clock)
    raise ConfigurationError(
        f"unsupported limiter storage {mask_url(storage)!r} (env RAG_RATE_LIMIT_STORAGE); "
        "use memory:// or redis://host:port/db",
        variable="RAG_RATE_LIMIT_STORAGE",
    )
