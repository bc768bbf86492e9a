"""A LIFO stash of idle connections in front of a ``psycopg_pool`` pool, for the PostgreSQL
backend's blocking and awaitable connections.

Checking a connection out of ``psycopg_pool`` and back in takes its lock, its condition and
its bookkeeping on every read; under a few threads that costs as much as a fifth of an indexed
look-up's round trip. The stash keeps the connections a read gave back clean, and the next read
takes the most recently used one (warm, its statements prepared) without touching the pool.

The rules that keep the pool's own guarantees:

* Only a connection the pool lent is stashed, so the stash can never hold more than the pool's
  ``max_size``, and nothing opens a connection the pool does not count.
* Only a connection that is open, healthy (``CONNECTION_OK``) and idle (no transaction) after a
  call that ended cleanly is stashed; any other goes back by the pool's own path (reset, or
  closed and replaced).
* While a caller waits in the pool for a connection, returned connections go to the pool,
  which hands them to that caller: the stash never starves a waiter.
* A connection is stashed only for ``hold`` seconds after the pool lent it; then it goes back
  through the pool, which applies its ``max_idle``, ``max_lifetime`` and statistics.
* Closing the stash hands every stashed connection back; nothing is stashed afterwards.

Thread-safety: every method is safe to call from any thread (one lock, held for a few list
operations, never during I/O).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from psycopg.pq import ConnStatus, TransactionStatus

__all__ = ["Stash", "reusable"]

C = TypeVar("C")

#: The longest a connection stays out of the pool before it goes back through it.
MAX_HOLD = 30.0


def reusable(conn: Any) -> bool:
    """True when ``conn`` is open, healthy and idle: what a clean read leaves behind."""
    if conn.closed:
        return False
    pgconn = conn.pgconn
    return bool(
        pgconn.status == ConnStatus.OK and pgconn.transaction_status == TransactionStatus.IDLE
    )


class Stash(Generic[C]):
    """Idle connections lent by a pool, most recently returned first; see the module docstring.

    ``capacity`` is the pool's ``max_size``; ``clock`` gives seconds (``time.monotonic``).
    """

    def __init__(self, capacity: int, hold: float, clock: Callable[[], float]) -> None:
        self._capacity = capacity
        self._hold = hold
        self._clock = clock
        self._lock = threading.Lock()
        # (connection, when the pool lent it); the right end is the most recent.
        self._idle: deque[tuple[C, float]] = deque()
        self._waiting = 0
        self._closed = False

    def __len__(self) -> int:
        return len(self._idle)

    def take(self) -> tuple[tuple[C, float] | None, list[C]]:
        """The most recently stashed connection and when the pool lent it, or ``None`` (the
        caller then waits for the pool, counted until :meth:`waited`); with the connections
        held too long, for the caller to give back to the pool."""
        stale: list[C] = []
        with self._lock:
            idle = self._idle
            if idle:
                # The oldest first: a light load would otherwise never reach them.
                oldest = self._clock() - self._hold
                while idle and idle[0][1] < oldest:
                    stale.append(idle.popleft()[0])
                if idle:
                    return idle.pop(), stale
            self._waiting += 1
        return None, stale

    def waited(self) -> None:
        """The caller counted by :meth:`take` got its connection from the pool (or gave up)."""
        with self._lock:
            self._waiting -= 1

    def offer(self, conn: C, lent_at: float) -> bool:
        """Keep ``conn`` (lent by the pool at ``lent_at``) if nobody waits for the pool, there is
        room and it was not held too long; False means: give it back to the pool. The caller
        checks :func:`reusable` first."""
        if self._clock() - lent_at >= self._hold:
            return False
        with self._lock:
            if self._closed or self._waiting or len(self._idle) >= self._capacity:
                return False
            self._idle.append((conn, lent_at))
            return True

    def drain(self) -> list[C]:
        """Every stashed connection, removed (for the pool's health check)."""
        with self._lock:
            drained = [conn for conn, _ in self._idle]
            self._idle.clear()
        return drained

    def close(self) -> list[C]:
        """Stash nothing more; every stashed connection, removed, for the caller to give back."""
        with self._lock:
            self._closed = True
        return self.drain()
