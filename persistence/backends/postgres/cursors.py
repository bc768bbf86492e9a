"""Each connection's one reusable cursor, for the blocking and the awaitable reads.

A new cursor per read costs a fifth of an indexed lookup's Python; a connection serves one read
at a time (the stash or the pool lends it whole), so its cursor can serve every read it makes.

A cursor holds its connection. A ``WeakKeyDictionary`` keyed by the connection would therefore
keep every connection it ever saw alive (its value refers to its key): each connection the pool
replaced (past ``max_lifetime``, idle, lost) would stay in memory, closed, with its cursor and
its prepared statements. The cache is a plain dict instead, pruned of closed connections
whenever a new connection gets its cursor: the pool closes every connection it discards and
opens another in its place, so the cache holds the open connections and, at most until the
next new one, those closed since.

Thread-safety: :meth:`CursorCache.of` may be called from any thread; adding and pruning take a
lock (only when a connection is new to the cache).
"""

from __future__ import annotations

import threading
from typing import Any, Generic, Protocol, TypeVar

__all__ = ["CursorCache"]


class _Closable(Protocol):
    @property
    def closed(self) -> bool: ...


Cur = TypeVar("Cur", bound=_Closable)


class CursorCache(Generic[Cur]):
    """The cursor of each open connection it was asked about (see the module docstring)."""

    def __init__(self) -> None:
        self._cursors: dict[Any, Cur] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._cursors)

    def of(self, conn: Any) -> Cur:
        """``conn``'s cursor, made on first use (or after it was closed)."""
        cursor = self._cursors.get(conn)
        if cursor is None or cursor.closed:
            cursor = conn.cursor()
            with self._lock:
                for old in [c for c in self._cursors if c.closed]:
                    del self._cursors[old]
                self._cursors[conn] = cursor
        return cursor
