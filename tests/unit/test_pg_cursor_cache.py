"""Each PostgreSQL connection's reusable cursor: one per open connection, and no closed
connection kept alive by the cache (a cursor holds its connection, so a cache keyed weakly by
the connection would keep every connection it ever saw)."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import psycopg
from hypothesis import given, settings
from hypothesis import strategies as st

from persistence.backends.postgres.cursors import CursorCache


class Cursor:
    """Stands in for a psycopg cursor: it holds its connection, as psycopg's does."""

    def __init__(self, conn: Conn) -> None:
        self.conn = conn
        self.closed = False


class Conn:
    """Stands in for a psycopg connection: ``closed`` and ``cursor()``."""

    def __init__(self) -> None:
        self.closed = False
        self.cursors = 0

    def cursor(self) -> Cursor:
        self.cursors += 1
        return Cursor(self)


def test_a_connection_keeps_its_one_cursor() -> None:
    cache: CursorCache[Cursor] = CursorCache()
    conn, other = Conn(), Conn()
    first = cache.of(conn)
    assert cache.of(conn) is first and first.conn is conn and conn.cursors == 1
    assert cache.of(other) is not first and len(cache) == 2
    first.closed = True  # a closed cursor is replaced
    assert cache.of(conn) is not first and conn.cursors == 2


# A pool's life: connections lent (and given cursors), closed (replaced), dropped.
_STEPS = st.lists(st.tuples(st.sampled_from(["use", "close", "open"]), st.integers(0, 7)))


@settings(max_examples=100, deadline=None)
@given(steps=_STEPS)
def test_no_closed_connection_outlives_the_next_new_one(steps: list[tuple[str, int]]) -> None:
    cache: CursorCache[Cursor] = CursorCache()
    live = [Conn() for _ in range(3)]
    dropped: list[weakref.ref[Conn]] = []
    for action, index in steps:
        conn = live[index % len(live)]
        if action == "use":
            assert cache.of(conn).conn is conn
        elif action == "close":
            # The pool closes a connection it discards and forgets it.
            conn.closed = True
            live.remove(conn)
            dropped.append(weakref.ref(conn))
            live.append(Conn())
        else:
            live.append(Conn())
        del conn
    cache.of(Conn())  # a new connection's first cursor prunes the closed ones
    gc.collect()
    assert [ref for ref in dropped if ref() is not None] == []
    assert len(cache) <= len(live) + 1


def test_a_replaced_psycopg_connection_is_freed(postgres_db: Any) -> None:
    cache: CursorCache[psycopg.Cursor[Any]] = CursorCache()
    conn = psycopg.connect(postgres_db.reader_dsn, autocommit=True)
    assert cache.of(conn).execute(b"SELECT 1").fetchall() == [(1,)]
    gone = weakref.ref(conn)
    conn.close()
    del conn
    with psycopg.connect(postgres_db.reader_dsn, autocommit=True) as fresh:
        assert cache.of(fresh).execute(b"SELECT 2").fetchall() == [(2,)]
        gc.collect()
        assert gone() is None and len(cache) == 1
