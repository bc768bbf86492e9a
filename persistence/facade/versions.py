"""Write versions: a number per (store, table) that changes whenever the table was written.

A cache of read results keys its entries with :meth:`ReadOnlyPersistenceFacade.data_version`
and so drops them once anything wrote the table. For the memory backend the version is the
``MemoryStore``'s own write counter (any write to the store counts). For a backend whose store is
elsewhere (PostgreSQL, Supabase) it is a process-wide counter keyed by the backend's
``data_target`` (which database or project, and schema) and the table, bumped by every
``PersistenceAgent`` write in this process: writes by other processes, or by SQL outside the
library, are not seen (a cache's TTL bounds how stale it can be).

Ordering, for callers: read the version *before* reading the data, and a writer bumps *after*
its write has finished (committed or not). A result cached under a version was then read no
earlier than that version was current, so a later write always moves readers to a new key.

Thread-safe: one lock guards the counters; reading a version is a dictionary look-up, no I/O.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable

from persistence.backends.base import Backend

__all__ = ["WriteVersions", "data_target", "process_versions"]


class WriteVersions:
    """Counters per ``(target, table)``: start at 0, only ever grow. Thread-safe."""

    __slots__ = ("_counts", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[Hashable, str], int] = {}

    def get(self, target: Hashable, table: str) -> int:
        """The current version of ``table`` in ``target`` (0 before any write)."""
        with self._lock:
            return self._counts.get((target, table), 0)

    def many(self, target: Hashable, tables: tuple[str, ...]) -> tuple[int, ...]:
        """The current versions of ``tables`` in ``target``, read under one lock."""
        counts = self._counts
        with self._lock:
            return tuple([counts.get((target, table), 0) for table in tables])

    def bump(self, target: Hashable, table: str) -> int:
        """Record a write to ``table`` in ``target``; return the new version."""
        with self._lock:
            key = (target, table)
            version = self._counts[key] = self._counts.get(key, 0) + 1
            return version


_PROCESS_VERSIONS = WriteVersions()


def process_versions() -> WriteVersions:
    """The counters every facade of this process shares."""
    return _PROCESS_VERSIONS


def data_target(backend: Backend) -> Hashable:
    """The store a backend writes to: its ``data_target`` when it declares one, else its name
    (all backends of that name then share one version per table: too many cache misses at
    worst, never a stale hit)."""
    target = getattr(backend, "data_target", None)
    return target if isinstance(target, Hashable) and target is not None else (backend.name,)
