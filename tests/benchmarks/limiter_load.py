"""The Redis fallback limiter under concurrent callers: never over budget.

``RedisSlidingWindowLimiter`` is hammered by N threads for a few windows on a fresh key. Every
call is time-stamped before and after; a grant happened on the server in between, which bounds
how many grants one window of the budget can have held (:func:`peak_in_window`).
Used by ``pg_concurrency`` (``make bench``).
"""

from __future__ import annotations

import concurrent.futures
import os
import secrets
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

#: The tests' Redis database by default (keys are fresh per run and deleted after).
REDIS_URL = os.environ.get("RAG_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


@dataclass
class LimiterRun:
    """Grants and refusals of one limiter load, and the most grants seen in one window."""

    callers: int
    limit: int
    window: float
    seconds: float
    granted: int
    refused: int
    errors: int
    peak: int
    calls_per_second: float

    @property
    def over_budget(self) -> bool:
        return self.peak > self.limit


def limiter_load(
    url: str, callers: int, *, limit: int, window: float, seconds: float
) -> LimiterRun:
    """``callers`` threads calling ``try_acquire`` for ``seconds`` on a fresh key."""
    from rag_agent.runtime.ratelimit import RedisSlidingWindowLimiter

    key = f"rag_bench:limiter:{secrets.token_hex(4)}"
    limiter = RedisSlidingWindowLimiter(url, limit, window, key=key, socket_timeout=2.0)
    stamps: list[tuple[float, float, bool]] = []
    errors = [0]
    lock = threading.Lock()
    deadline = time.perf_counter() + seconds

    def caller() -> None:
        mine = []
        while time.perf_counter() < deadline:
            start = time.perf_counter()
            try:
                granted = limiter.try_acquire()
            except Exception:
                with lock:
                    errors[0] += 1
                continue
            mine.append((start, time.perf_counter(), granted))
        with lock:
            stamps.extend(mine)

    try:
        with concurrent.futures.ThreadPoolExecutor(callers) as pool:
            for future in [pool.submit(caller) for _ in range(callers)]:
                future.result()
    finally:
        limiter._client.delete(key)
        limiter.close()
    return LimiterRun(
        callers,
        limit,
        window,
        seconds,
        granted=sum(g for *_, g in stamps),
        refused=sum(not g for *_, g in stamps),
        errors=errors[0],
        peak=peak_in_window(stamps, window),
        calls_per_second=len(stamps) / seconds,
    )


def peak_in_window(stamps: Sequence[tuple[float, float, bool]], window: float) -> int:
    """The most grants whose server time can only lie in one window of the budget.

    A grant happened on the server between its call's start and end. Grants whose calls started
    within ``window - slowest call`` of each other were all granted within ``window``; so the
    count over such spans is a lower bound of the true peak that can still prove an overrun.
    """
    slowest = max((end - start for start, end, _ in stamps), default=0.0)
    span = max(window - slowest, 0.0)
    starts = sorted(start for start, _, granted in stamps if granted)
    peak, low = 0, 0
    for high, start in enumerate(starts):
        while start - starts[low] > span:
            low += 1
        peak = max(peak, high - low + 1)
    return peak


def redis_available(url: str) -> bool:
    try:
        import redis

        return bool(redis.Redis.from_url(url, socket_connect_timeout=1).ping())
    except Exception:
        return False
