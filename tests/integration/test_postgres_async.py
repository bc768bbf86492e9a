"""The PostgreSQL backend's awaitable reads on a real server: the event loop keeps running while
a read waits for the database, the reads run on the loop's own thread, and ``arun`` answers
what ``run`` answers."""

from __future__ import annotations

import asyncio
import datetime as dt
import secrets
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from persistence import ReadOnlyPersistenceFacade, create_read_only_facade
from persistence.backends.postgres import PostgresBackend
from rag_agent import RAGAgent, RAGSettings
from rag_agent.ops.sample import SAMPLE_TABLES, sample_rows
from rag_agent.tools import build_tools
from tests.conftest import PostgresDatabase

NOW = dt.datetime(2026, 3, 4, 5, 6, 7, tzinfo=dt.UTC)
#: How long the slow view's read waits on the server, and the loop lag the probe tolerates: a
#: read that blocked the loop would delay the ticker by the whole wait.
SLOW_READ_SECONDS = 0.4
MAX_LOOP_LAG_SECONDS = 0.05
TICK_SECONDS = 0.005


@pytest.fixture
def slow_schema(postgres_clean: PostgresDatabase) -> Iterator[str]:
    """A scratch schema whose ``leads`` view reads ``public.leads`` after ``pg_sleep`` on the
    server (an InitPlan: once per read), readable by the reader role; dropped afterwards."""
    schema = f"slow_{secrets.token_hex(4)}"
    db = postgres_clean
    db.execute(f"CREATE SCHEMA {schema}")
    try:
        db.execute(
            f"CREATE VIEW {schema}.leads AS SELECT l.* FROM public.leads l "
            f"WHERE (SELECT pg_sleep({SLOW_READ_SECONDS})::text) IS NOT NULL"
        )
        db.execute(f"GRANT USAGE ON SCHEMA {schema} TO {db.reader_role}")
        db.execute(f"GRANT SELECT ON {schema}.leads TO {db.reader_role}")
        yield schema
    finally:
        db.execute(f"DROP SCHEMA {schema} CASCADE")


async def _probe(work: Callable[[], Awaitable[Any]]) -> tuple[Any, list[float], float]:
    """``work``'s result, the ticker's lateness at each tick while it ran, and how long it took."""
    loop = asyncio.get_running_loop()
    lags: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        last = loop.time()
        while not done.is_set():
            await asyncio.sleep(TICK_SECONDS)
            now = loop.time()
            lags.append(now - last - TICK_SECONDS)
            last = now

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)  # the ticker is running before the read starts
    started = loop.time()
    try:
        result = await work()
    finally:
        elapsed = loop.time() - started
        done.set()
        await task
    return result, lags, elapsed


class TestLoopLag:
    def test_an_awaited_read_never_blocks_the_loop(
        self, postgres_clean: PostgresDatabase, slow_schema: str
    ) -> None:
        """While aread waits ~0.4 s for the server, a ticker on the same loop is never more than
        a few tens of ms late."""
        facade = create_read_only_facade(
            kind="postgres", dsn=postgres_clean.reader_dsn, schema=slow_schema
        )

        async def main() -> tuple[Any, list[float], float]:
            try:
                await facade.aprepare()  # start-up (catalog, role check) is awaited too
                return await _probe(lambda: facade.aread("leads", limit=5))
            finally:
                await facade.aclose()

        page, lags, elapsed = asyncio.run(main())
        assert page.total_count == 0
        assert elapsed >= SLOW_READ_SECONDS
        assert len(lags) >= 10
        assert max(lags) < MAX_LOOP_LAG_SECONDS

    def test_the_probe_sees_a_blocking_read(
        self, postgres_clean: PostgresDatabase, slow_schema: str
    ) -> None:
        """The same probe around the blocking read measures a lag of the whole wait: the probe
        can fail."""
        facade = create_read_only_facade(
            kind="postgres", dsn=postgres_clean.reader_dsn, schema=slow_schema
        )

        async def blocking_read() -> Any:
            return facade.read("leads", limit=5)

        with facade:
            facade.columns("leads")  # start-up outside the probe
            _, lags, _ = asyncio.run(_probe(blocking_read))
        assert max(lags) >= SLOW_READ_SECONDS * 0.8


@pytest.fixture
def seeded(postgres_clean: PostgresDatabase) -> Iterator[ReadOnlyPersistenceFacade]:
    """The session database with the sample's rows, and a reader facade over it."""
    import psycopg

    with postgres_clean.writer_and_reader() as (_, reader):
        # As the admin role, in one transaction: the governance tables are seeded too.
        with psycopg.connect(postgres_clean.admin_dsn) as conn, conn.cursor() as cursor:
            for table in SAMPLE_TABLES:
                rows = sample_rows(table)
                columns = sorted({c for row in rows for c in row})
                statement = (
                    f"INSERT INTO {table} ({', '.join(columns)}) "
                    f"VALUES ({', '.join(['%s'] * len(columns))})"
                )
                cursor.executemany(
                    statement.encode(), [tuple(r.get(c) for c in columns) for r in rows]
                )
        yield reader


class TestArunOnPostgres:
    QUESTIONS = (
        "find leads at acme",
        "how many leads at acme",
        "leads by status",
        "lead 1 with its conversations",
        "leads with score above 80",
        "campaigns of client 1",
        "zzz nothing at all",
        "leads at Nonexistent Holdings Inc.",
    )

    def test_arun_answers_what_run_answers(self, seeded: ReadOnlyPersistenceFacade) -> None:
        """Each question's envelope from arun equals run's, over the same PostgreSQL data."""
        agent = RAGAgent(seeded, settings=RAGSettings(cache_disabled=True), now=lambda: NOW)

        async def main() -> list[dict[str, Any]]:
            try:
                return [await agent.arun(q, return_json=True) for q in self.QUESTIONS]
            finally:
                await seeded.aclose()

        blocking = [agent.run(q, return_json=True) for q in self.QUESTIONS]
        awaited = asyncio.run(main())  # last: aclose closes the backend
        assert awaited == blocking
        assert any(e["metadata"]["total_count"] for e in blocking)

    def test_tool_ainvoke_reads_on_the_loop_thread(
        self, seeded: ReadOnlyPersistenceFacade, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """query_table's ainvoke reaches the database from the loop's thread: no executor."""
        threads: list[int] = []
        original = PostgresBackend._aselect

        async def noting(self: PostgresBackend, plan: Any) -> Any:
            threads.append(threading.get_ident())
            return await original(self, plan)

        monkeypatch.setattr(PostgresBackend, "_aselect", noting)
        agent = RAGAgent(seeded, settings=RAGSettings(cache_disabled=True), now=lambda: NOW)
        tool = next(t for t in build_tools(agent) if t.name == "query_table")
        call = {"name": "query_table", "args": {"table": "leads", "limit": 3}, "id": "1"}
        call["type"] = "tool_call"

        async def main() -> tuple[Any, int]:
            try:
                return await tool.ainvoke(call), threading.get_ident()
            finally:
                await seeded.aclose()

        message, loop_thread = asyncio.run(main())
        assert threads and set(threads) == {loop_thread}
        assert message.artifact.metadata.total_count > 0


class TestRelatedRowsAwaited:
    def test_aread_with_include_matches_read_and_stays_on_the_loop(
        self, seeded: ReadOnlyPersistenceFacade, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """aread with include answers what read answers: the page and each relation level are
        awaited statements on the loop's thread."""
        from persistence import Filter, Op

        args = ("leads", [Filter("id", Op.LTE, 5)])
        options: dict[str, Any] = {"include": ["conversations", "conversations.messages"]}
        blocking = seeded.read(*args, **options)
        threads: list[int] = []
        original = PostgresBackend._aselect

        async def noting(self: PostgresBackend, plan: Any) -> Any:
            threads.append(threading.get_ident())
            return await original(self, plan)

        monkeypatch.setattr(PostgresBackend, "_aselect", noting)

        async def main() -> tuple[Any, int]:
            try:
                return await seeded.aread(*args, **options), threading.get_ident()
            finally:
                await seeded.aclose()

        awaited, loop_thread = asyncio.run(main())
        assert awaited == blocking
        assert any(row["conversations"] for row in blocking.rows)
        assert len(threads) == 3 and set(threads) == {loop_thread}


class TestTransactionPoolerAwaited:
    def test_pooler_mode_reads_alike(
        self, seeded: ReadOnlyPersistenceFacade, postgres_clean: PostgresDatabase
    ) -> None:
        """Behind a transaction pooler (BEGIN READ ONLY, SET LOCAL, SELECT, COMMIT in one
        pipeline), aread and acount answer what read and count answer."""
        from persistence import Filter, Op

        facade = create_read_only_facade(
            kind="postgres", dsn=postgres_clean.reader_dsn, transaction_pooler=True
        )
        flt = [Filter("score", Op.GTE, 50)]

        async def main() -> tuple[Any, int]:
            try:
                return await facade.aread("leads", flt, limit=7), await facade.acount("leads", flt)
            finally:
                await facade.aclose()  # closes the blocking pool too

        blocking = (facade.read("leads", flt, limit=7), facade.count("leads", flt))
        awaited = asyncio.run(main())
        assert awaited == blocking
        assert blocking[1] > 0
