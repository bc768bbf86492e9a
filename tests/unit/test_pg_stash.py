"""The stash of idle connections in front of the PostgreSQL pool, with stand-in connections."""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg.pq import ConnStatus, TransactionStatus

from persistence.backends.postgres.stash import Stash, reusable


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@dataclass
class _PgConn:
    status: ConnStatus = ConnStatus.OK
    transaction_status: TransactionStatus = TransactionStatus.IDLE


@dataclass(eq=False)
class Conn:
    """Stands in for a psycopg connection: ``closed`` and ``pgconn``'s two statuses."""

    closed: bool = False
    pgconn: _PgConn = field(default_factory=_PgConn)


@pytest.fixture
def clock() -> Clock:
    return Clock()


class TestReusable:
    def test_open_healthy_idle_connection_is_reusable(self) -> None:
        """What a clean read leaves behind may be stashed."""
        assert reusable(Conn())

    @pytest.mark.parametrize(
        "conn",
        [
            Conn(closed=True),
            Conn(pgconn=_PgConn(status=ConnStatus.BAD)),
            Conn(pgconn=_PgConn(transaction_status=TransactionStatus.INTRANS)),
            Conn(pgconn=_PgConn(transaction_status=TransactionStatus.INERROR)),
            Conn(pgconn=_PgConn(transaction_status=TransactionStatus.ACTIVE)),
            Conn(pgconn=_PgConn(transaction_status=TransactionStatus.UNKNOWN)),
        ],
    )
    def test_closed_broken_or_busy_connection_is_not(self, conn: Conn) -> None:
        """Closed, broken, or inside a transaction: back to the pool's own path."""
        assert not reusable(conn)


class TestStash:
    def test_most_recently_returned_comes_first(self, clock: Clock) -> None:
        """LIFO: the warmest connection is lent again first."""
        stash: Stash[Conn] = Stash(3, 10.0, clock)
        first, second = Conn(), Conn()
        assert stash.offer(first, clock.now) and stash.offer(second, clock.now)
        assert stash.take() == ((second, clock.now), [])
        assert stash.take() == ((first, clock.now), [])

    def test_empty_stash_counts_a_waiter_and_refuses_returns_meanwhile(self, clock: Clock) -> None:
        """While a caller waits for the pool, returned connections go to the pool."""
        stash: Stash[Conn] = Stash(3, 10.0, clock)
        assert stash.take() == (None, [])
        assert not stash.offer(Conn(), clock.now)
        stash.waited()
        assert stash.offer(Conn(), clock.now)

    def test_never_holds_more_than_capacity(self, clock: Clock) -> None:
        """The pool's max_size bounds the stash."""
        stash: Stash[Conn] = Stash(2, 10.0, clock)
        kept = [stash.offer(Conn(), clock.now) for _ in range(4)]
        assert kept == [True, True, False, False]
        assert len(stash) == 2

    def test_a_connection_held_too_long_goes_back_to_the_pool(self, clock: Clock) -> None:
        """Past ``hold`` seconds since the pool lent it, a connection is not stashed again."""
        stash: Stash[Conn] = Stash(2, 10.0, clock)
        lent_at = clock.now
        clock.now += 10.0
        assert not stash.offer(Conn(), lent_at)

    def test_stale_connections_are_handed_back_on_take(self, clock: Clock) -> None:
        """Stashed connections that aged past ``hold`` come back for the pool, oldest first."""
        stash: Stash[Conn] = Stash(3, 10.0, clock)
        old, newer, fresh = Conn(), Conn(), Conn()
        stash.offer(old, clock.now)
        stash.offer(newer, clock.now + 1)
        clock.now += 5
        stash.offer(fresh, clock.now)
        clock.now += 6.5  # old and newer are past 10 s; fresh is not
        taken, stale = stash.take()
        assert taken == (fresh, clock.now - 6.5)
        assert stale == [old, newer]
        assert len(stash) == 0

    def test_closing_hands_everything_back_and_stashes_nothing_more(self, clock: Clock) -> None:
        """close() returns every stashed connection; offers afterwards are refused."""
        stash: Stash[Conn] = Stash(3, 10.0, clock)
        conns = [Conn(), Conn()]
        for conn in conns:
            stash.offer(conn, clock.now)
        assert stash.close() == conns
        assert not stash.offer(Conn(), clock.now)
        assert len(stash) == 0

    @settings(max_examples=60, deadline=None)
    @given(st.lists(st.sampled_from(["take", "give", "tick"]), max_size=60), st.integers(1, 4))
    def test_a_connection_is_never_lent_twice(self, steps: list[str], capacity: int) -> None:
        """Whatever the order of takes, returns and time: the stash never holds a lent
        connection, never holds one twice, and never more than its capacity."""
        clock = Clock()
        stash: Stash[Conn] = Stash(capacity, 10.0, clock)
        lent: list[tuple[Conn, float]] = []
        pool_side: list[Conn] = []
        for step in steps:
            if step == "take":
                taken, stale = stash.take()
                pool_side += stale
                if taken is None:
                    stash.waited()
                    taken = (Conn(), clock.now)
                assert all(taken[0] is not other for other, _ in lent)
                lent.append(taken)
            elif step == "give" and lent:
                conn, lent_at = lent.pop(0)
                if not stash.offer(conn, lent_at):
                    pool_side.append(conn)
            else:
                clock.now += 4
            stashed = stash.drain()
            assert len(stashed) <= capacity
            assert len({id(c) for c in stashed}) == len(stashed)
            assert not {id(c) for c in stashed} & {id(c) for c, _ in lent}
            for conn in stashed:  # put them back, as they were
                assert stash.offer(conn, clock.now)

    def test_threads_never_share_a_connection(self, clock: Clock) -> None:
        """Eight threads taking and returning: no connection is ever lent to two at once."""
        stash: Stash[Conn] = Stash(4, 1e9, clock)
        in_use: set[int] = set()
        guard = threading.Lock()
        failures: list[str] = []

        def worker(seed: int) -> None:
            rng = random.Random(seed)
            for _ in range(2000):
                taken, _ = stash.take()
                if taken is None:
                    stash.waited()
                    taken = (Conn(), clock.now)
                with guard:
                    if id(taken[0]) in in_use:
                        failures.append("lent twice")
                    in_use.add(id(taken[0]))
                if rng.random() < 0.1:
                    threading.Event().wait(0)  # let another thread run
                with guard:
                    in_use.discard(id(taken[0]))
                stash.offer(*taken)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failures == []
        assert len(stash) <= 4
