"""The stash of idle connections in front of the PostgreSQL pools, against the real server:
threads, broken connections, the pool's size, closing; and the read plans on PostgreSQL."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from persistence import (
    BackendError,
    Filter,
    Op,
    PersistenceError,
    create_persistence_agent,
    create_read_only_facade,
)
from persistence.backends.postgres import PostgresBackend, create_backend
from persistence.facade.read_plans import ReadPlans
from tests.conftest import PostgresDatabase
from tests.support.read_plans import LEADS, holding_leads, outcome, reads

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def db(postgres_db: PostgresDatabase) -> Iterator[PostgresDatabase]:
    """The session database with the plan tests' leads, written once for the module."""
    with holding_leads(postgres_db) as database:
        yield database


def _backend_pids(db: PostgresDatabase, application: str) -> list[int]:
    rows = db.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
        "AND usename = %s AND application_name = %s",
        (db.reader_role, application),
    )
    return [row[0] for row in rows]


def _dsn(db: PostgresDatabase, application: str) -> str:
    return f"{db.reader_dsn} application_name={application}"


class TestBlockingStash:
    def test_sequential_reads_reuse_one_connection_without_the_pool(
        self, db: PostgresDatabase
    ) -> None:
        """After the first read, reads one after another are served by the stash: the same
        server process answers each, and the pool lends nothing more."""
        with create_backend(dsn=db.reader_dsn, pool_max_size=4) as backend:
            pid = backend._connections.run(_pid, "pid", read=True)
            lent = backend._connections.pool().get_stats().get("requests_num", 0)
            for _ in range(5):
                assert backend._connections.run(_pid, "pid", read=True) == pid
            assert backend._connections.pool().get_stats().get("requests_num", 0) == lent

    def test_threads_never_exceed_the_pool_size(self, db: PostgresDatabase) -> None:
        """Eight threads on a pool of three: every read answers, no more than three server
        connections are ever open, no connection serves two threads at once, nobody times out
        waiting (returned connections go to a waiter before the stash)."""
        application = "perf_facade_stash_threads"
        errors: list[BaseException] = []
        peak: list[int] = []
        busy: set[int] = set()
        guard = threading.Lock()
        with create_backend(dsn=_dsn(db, application), pool_max_size=3, pool_timeout=20) as backend:

            def work(conn: Any) -> int:
                pid = int(conn.info.backend_pid)
                with guard:
                    if pid in busy:
                        errors.append(AssertionError(f"connection {pid} lent twice"))
                    busy.add(pid)
                try:
                    return int(conn.execute("SELECT count(*) FROM public.leads").fetchone()[0])
                finally:
                    with guard:
                        busy.discard(pid)

            def worker() -> None:
                try:
                    for _ in range(40):
                        assert backend._connections.run(work, "read", read=True) == len(LEADS)
                    peak.append(len(_backend_pids(db, application)))
                except BaseException as exc:  # reported below
                    errors.append(exc)

            threads = [threading.Thread(target=worker) for _ in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert errors == []
            assert max(peak) <= 3
            assert len(backend._connections._stash) <= 3
            assert backend._connections.pool().get_stats()["pool_size"] <= 3

    def test_a_terminated_stashed_connection_is_survived_and_dropped(
        self, db: PostgresDatabase
    ) -> None:
        """When the server kills the stashed connection, the next read retries once on a new
        one; the dead one is never stashed again."""
        application = "perf_facade_stash_killed"
        with create_backend(dsn=_dsn(db, application), pool_max_size=2) as backend:
            first = backend._connections.run(_pid, "pid", read=True)
            assert len(backend._connections._stash) == 1
            db.execute("SELECT pg_terminate_backend(%s)", (first,))
            assert backend.count("leads", []) == len(LEADS)
            second = backend._connections.run(_pid, "pid", read=True)
            assert second != first
            stashed = backend._connections._stash.drain()
            assert all(not conn.closed for conn in stashed)
            assert first not in {conn.info.backend_pid for conn in stashed}

    def test_a_connection_left_in_a_transaction_is_not_stashed(self, db: PostgresDatabase) -> None:
        """A call that leaves a transaction open hands its connection to the pool's reset
        path: the next call gets an idle connection with its session defaults."""
        with create_backend(dsn=db.reader_dsn, pool_max_size=1) as backend:

            def leave_open(conn: Any) -> None:
                conn.execute("BEGIN")
                conn.execute("SET LOCAL statement_timeout = 1")

            backend._connections.run(leave_open, "dirty", read=True)
            assert len(backend._connections._stash) == 0

            def state(conn: Any) -> tuple[Any, ...]:
                status = conn.pgconn.transaction_status
                row = conn.execute(
                    "SELECT current_setting('statement_timeout'),"
                    " current_setting('transaction_read_only')"
                ).fetchone()
                return (status, *row)

            status, timeout, read_only = backend._connections.run(state, "state", read=True)
            assert (int(status), timeout, read_only) == (0, "5s", "on")

    def test_a_failed_read_is_not_stashed_and_the_next_is_read_only(
        self, db: PostgresDatabase
    ) -> None:
        """A statement that fails leaves nothing behind: the next read still runs read-only
        with the statement timeout."""
        with create_backend(dsn=db.reader_dsn, pool_max_size=1) as backend:
            with pytest.raises(PersistenceError):
                backend._connections.run(lambda conn: conn.execute("SELECT 1/0"), "boom", read=True)
            assert len(backend._connections._stash) == 0
            row = backend._connections.run(
                lambda conn: conn.execute(
                    "SELECT current_setting('transaction_read_only'),"
                    " current_setting('statement_timeout')"
                ).fetchone(),
                "state",
                read=True,
            )
            assert tuple(row) == ("on", "5s")

    def test_closing_drains_the_stash_and_refuses_use(self, db: PostgresDatabase) -> None:
        """close() closes the stashed connections with the pool; reads then raise."""
        application = "perf_facade_stash_close"
        backend = create_backend(dsn=_dsn(db, application), pool_max_size=2)
        backend.count("leads", [])
        assert len(backend._connections._stash) == 1
        backend.close()
        assert len(backend._connections._stash) == 0
        assert _backend_pids(db, application) == [] or _eventually_gone(db, application)
        with pytest.raises(BackendError, match="closed"):
            backend.count("leads", [])

    def test_writes_leave_reader_defaults_intact(self, db: PostgresDatabase) -> None:
        """A writer's stashed connection is its own: the reader's stays READ ONLY."""
        with (
            create_persistence_agent(kind="postgres", dsn=db.writer_dsn) as writer,
            create_read_only_facade(kind="postgres", dsn=db.reader_dsn) as reader,
        ):
            writer.write("leads", {"email": "stash-writer@x.io"})
            try:
                backend = reader._backend()
                assert isinstance(backend, PostgresBackend)
                reader.read("leads", [Filter("email", Op.EQ, "stash-writer@x.io")])
                row = backend._connections.run(
                    lambda conn: conn.execute("SHOW transaction_read_only").fetchone(),
                    "state",
                    read=True,
                )
                assert tuple(row) == ("on",)
            finally:
                writer.delete("leads", [Filter("email", Op.EQ, "stash-writer@x.io")])


class TestAwaitableStash:
    def test_tasks_share_the_pool_and_close_cleanly(self, db: PostgresDatabase) -> None:
        """Twenty tasks on a pool of two all get their answers; closing drains the stash."""
        application = "perf_facade_stash_async"

        async def scenario() -> tuple[list[int], int]:
            facade = create_read_only_facade(
                kind="postgres", dsn=_dsn(db, application), pool_max_size=2, pool_timeout=20
            )
            try:

                async def one(lead_id: int) -> int:
                    page = await facade.aread("leads", [Filter("id", Op.EQ, lead_id)])
                    return page.total_count

                totals = await asyncio.gather(*(one(i % len(LEADS) + 1) for i in range(60)))
                backend = facade._backend()
                assert isinstance(backend, PostgresBackend)
                stashed = len(backend._async._stash)
                await facade.aclose()
                assert len(backend._async._stash) == 0
                return list(totals), stashed
            finally:
                facade.close()

        totals, stashed = asyncio.run(scenario())
        assert totals == [1] * 60
        assert stashed <= 2


class TestPlansOnPostgres:
    def test_is_null_true_and_false_share_a_shape_but_not_a_statement(
        self, db: PostgresDatabase
    ) -> None:
        """``score is_null True`` then ``False`` (one shape for the facade): each call reads
        its own statement, IS NULL then IS NOT NULL, however often they alternate."""
        nulls = sum(1 for lead in LEADS if lead["score"] is None)
        with create_read_only_facade(kind="postgres", dsn=db.reader_dsn) as facade:
            for _ in range(3):
                for flag, expected in ((True, nulls), (False, len(LEADS) - nulls)):
                    page = facade.read("leads", [Filter("score", Op.IS_NULL, flag)])
                    assert page.total_count == expected
            assert len(facade._plans) == 1

    def test_a_cached_shape_reads_through_its_statement_once_checked(
        self, db: PostgresDatabase, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The first read of a shape goes through the backend's read; the next ones through
        the plan's reader (no second check of the shape), with their own values coerced."""
        calls: list[str] = []
        original = PostgresBackend.read

        def counted(self: PostgresBackend, query: Any) -> Any:
            calls.append("read")
            return original(self, query)

        monkeypatch.setattr(PostgresBackend, "read", counted)
        with create_read_only_facade(kind="postgres", dsn=db.reader_dsn) as facade:
            ids = [
                facade.read("leads", [Filter("id", Op.EQ, str(i))]).rows[0]["id"] for i in (1, 2, 3)
            ]
            assert ids == [1, 2, 3]
            assert calls == ["read"]
            with pytest.raises(PersistenceError, match=r"leads\.id"):
                facade.read("leads", [Filter("id", Op.EQ, "three")])
            backend = facade._backend()
            assert isinstance(backend, PostgresBackend)
            # A reloaded catalog with the same columns and types keeps the plan valid.
            backend.refresh_catalog()
            assert facade.read("leads", [Filter("id", Op.EQ, 4)]).rows[0]["id"] == 4
            assert calls == ["read"]
            # Another shape is checked and planned on its first read.
            assert facade.read("leads", [Filter("id", Op.LTE, 2)]).total_count == 2
            assert calls == ["read", "read"]

    @settings(
        max_examples=60,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(read=reads())
    def test_cached_and_uncached_reads_answer_alike(
        self, db: PostgresDatabase, read: dict[str, Any]
    ) -> None:
        """Whatever the read: a facade with plans answers (rows, or error and message) as one
        without, on the first call of a shape and on the cached ones after."""
        cached, uncached = _facades(db)
        expected = outcome(uncached, read)
        assert outcome(cached, read) == expected
        assert outcome(cached, read) == expected


_FACADES: dict[str, tuple[Any, Any]] = {}


def _facades(db: PostgresDatabase) -> tuple[Any, Any]:
    """One cached and one uncached facade per database for the whole module (opening pools
    per example would dominate the run)."""
    pair = _FACADES.get(db.reader_dsn)
    if pair is None:
        cached = create_read_only_facade(kind="postgres", dsn=db.reader_dsn, pool_max_size=2)
        uncached = create_read_only_facade(kind="postgres", dsn=db.reader_dsn, pool_max_size=2)
        uncached._plans = ReadPlans(0)
        pair = _FACADES[db.reader_dsn] = (cached, uncached)
    return pair


@pytest.fixture(scope="module", autouse=True)
def _close_facades() -> Iterator[None]:
    yield
    for cached, uncached in _FACADES.values():
        cached.close()
        uncached.close()
    _FACADES.clear()


def _pid(conn: Any) -> int:
    return int(conn.info.backend_pid)


def _eventually_gone(db: PostgresDatabase, application: str) -> bool:
    """The server notes a closed connection's exit a moment later: poll briefly."""
    for _ in range(50):
        if not _backend_pids(db, application):
            return True
        threading.Event().wait(0.05)
    return False
