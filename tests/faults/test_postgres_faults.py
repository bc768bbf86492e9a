"""PostgreSQL failing under the agent: killed connections, a vanished server, slow statements,
too few connections. Every run ends within a bounded time, with a successful (retried) answer
or a typed error in the envelope, and the agent works again once the fault is gone."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from persistence import create_read_only_facade
from rag_agent import RAGAgent, RAGSettings, build_tools
from tests.conftest import PostgresDatabase
from tests.faults.proxy import CuttableProxy
from tests.faults.worlds import World, envelope_problems, open_world, seed_leads

pytestmark = pytest.mark.postgres

UNCACHED = RAGSettings(cache_disabled=True)
QUERIES = ["leads at acme", "email ann@acme.io", "lead #3", "leads at globex", "client_id=2"]
UNAVAILABLE = frozenset({"BackendUnavailableError"})


@pytest.fixture
def world(request: pytest.FixtureRequest) -> Iterator[World]:
    """PostgreSQL seeded with the base leads; the agent's cache is off, so every run reads."""
    with open_world("postgres", seed_leads(), request, settings=UNCACHED) as world:
        yield world


def kill_reader_connections(db: PostgresDatabase) -> int:
    """Terminate every server process of the reader role in the test database, waiting (up to
    5 s each) until they are gone: a kill meant to land between two runs must not land inside
    the next one's retry."""
    rows = db.execute(
        "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
        "WHERE datname = current_database() AND usename = %s AND pid <> pg_backend_pid()",
        (db.reader_role,),
    )
    return sum(1 for (killed,) in rows if killed)


def answer(agent: RAGAgent, text: str, **options: Any) -> tuple[dict[str, Any], float]:
    """The run's JSON envelope and how long it took."""
    start = time.monotonic()
    envelope = agent.run(text, return_json=True, **options)
    return envelope, time.monotonic() - start


class TestTerminatedConnections:
    def test_killed_mid_sequence_runs_retry_and_succeed(
        self, world: World, postgres_db: PostgresDatabase
    ) -> None:
        """Connections killed between the runs of a sequence are retried: every run answers."""
        killed = 0
        for round_ in range(6):
            for text in QUERIES:
                envelope, elapsed = answer(world.agent, text)
                assert envelope_problems(envelope, world) == []
                assert "error" not in envelope["metadata"], (round_, text, envelope["metadata"])
                assert envelope["metadata"]["total_count"] > 0
                assert elapsed < 5
            killed += kill_reader_connections(postgres_db)
        assert killed >= 6  # the pool's connections really were terminated, every round

    def test_killed_under_concurrent_runs(
        self, world: World, postgres_db: PostgresDatabase
    ) -> None:
        """Kills during four threads of runs: each run succeeds or is BackendUnavailableError."""
        outcomes: list[str] = []
        problems: list[str] = []
        lock = threading.Lock()
        stop = threading.Event()

        def work(offset: int) -> None:
            for i in range(30):
                text = QUERIES[(i + offset) % len(QUERIES)]
                envelope, elapsed = answer(world.agent, text)
                found = envelope_problems(envelope, world, allowed_errors=UNAVAILABLE)
                error = envelope["metadata"].get("error")
                with lock:
                    problems.extend(found + ([f"slow {elapsed:.1f}s"] if elapsed > 10 else []))
                    outcomes.append(error["type"] if error else "ok")

        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        killer_kills = 0
        while any(t.is_alive() for t in threads) and not stop.wait(0.05):
            killer_kills += kill_reader_connections(postgres_db)
        for thread in threads:
            thread.join(timeout=60)
        assert problems == []
        assert len(outcomes) == 120
        assert killer_kills > 0
        assert outcomes.count("ok") >= 60  # the retry absorbs most kills
        envelope, _ = answer(world.agent, "leads at acme")
        assert "error" not in envelope["metadata"]


class TestUnreachableServer:
    def test_cut_proxy_is_a_typed_error_then_recovers(self, postgres_db: PostgresDatabase) -> None:
        """With the server's network cut, runs end fast with BackendUnavailableError; restored,
        they succeed again."""
        params = conninfo_to_dict(postgres_db.reader_dsn)
        target = (str(params.get("host") or "127.0.0.1"), int(params.get("port") or 5432))
        with CuttableProxy(target) as proxy:
            dsn = make_conninfo(postgres_db.reader_dsn, host="127.0.0.1", port=proxy.port)
            facade = create_read_only_facade(
                kind="postgres", dsn=dsn, connect_timeout=1, pool_timeout=1.0
            )
            with RAGAgent(facade, settings=UNCACHED) as agent:
                postgres_db.truncate()
                envelope, _ = answer(agent, "leads at acme")
                assert "error" not in envelope["metadata"]

                proxy.cut()
                errors = []
                for text in QUERIES[:2]:
                    envelope, elapsed = answer(agent, text)
                    errors.append(envelope["metadata"]["error"]["type"])
                    assert elapsed < 5, f"{text}: {elapsed:.1f}s"
                    assert envelope["records"] == []
                assert set(errors) == {"BackendUnavailableError"}

                tool = build_tools(agent, content="full")[1]  # query_table
                content = tool.invoke({"table": "leads", "filters": {"client_id": 1}})
                assert '"BackendUnavailableError"' in content

                proxy.restore()
                # The pool reconnects in the background: have it test its connections, drop
                # the broken ones, and wait (on its own event, up to 10 s) until it holds its
                # minimum again, instead of polling the agent.
                pool = facade._backend()._connections.pool()
                pool.check()
                pool.wait(timeout=10)
                envelope, _ = answer(agent, "leads at acme")
                assert "error" not in envelope["metadata"]


class TestSlowStatements:
    @pytest.fixture
    def slow_view(self, postgres_db: PostgresDatabase) -> Iterator[str]:
        """A view of leads whose every read sleeps half a second."""
        postgres_db.execute(
            "CREATE VIEW slow_leads AS SELECT l.* FROM leads AS l, pg_sleep(0.5) AS s"
        )
        postgres_db.execute(f"GRANT SELECT ON slow_leads TO {postgres_db.reader_role}")
        yield "slow_leads"
        postgres_db.execute("DROP VIEW slow_leads")

    def test_statement_timeout_is_a_typed_error(
        self, postgres_db: PostgresDatabase, slow_view: str
    ) -> None:
        """A run past the statement timeout is QueryTimeoutError, promptly; the next run works."""
        postgres_db.truncate()
        facade = create_read_only_facade(
            kind="postgres",
            dsn=postgres_db.reader_dsn,
            tables=["leads", slow_view],
            statement_timeout_ms=150,
            pool_max_size=1,
        )
        with RAGAgent(facade, settings=UNCACHED) as agent:
            envelope, elapsed = answer(agent, "leads at acme", table=slow_view)
            assert envelope["metadata"]["error"]["type"] == "QueryTimeoutError"
            assert elapsed < 2
            envelope, _ = answer(agent, "leads at acme", table="leads")
            assert "error" not in envelope["metadata"]

    def test_more_threads_than_connections(
        self, postgres_db: PostgresDatabase, slow_view: str
    ) -> None:
        """Eight threads on a two-connection pool: each run answers or is BackendUnavailableError
        within the pool timeout; nothing hangs and the pool serves again afterwards."""
        postgres_db.truncate()
        facade = create_read_only_facade(
            kind="postgres",
            dsn=postgres_db.reader_dsn,
            tables=["leads", slow_view],
            statement_timeout_ms=3000,
            pool_max_size=2,
            pool_timeout=0.3,
        )
        outcomes: list[tuple[str, float]] = []
        lock = threading.Lock()
        with RAGAgent(facade, settings=UNCACHED) as agent:
            answer(agent, "leads at acme")  # start-up outside the timed part

            def work() -> None:
                envelope, elapsed = answer(agent, "leads at acme", table=slow_view)
                error = envelope["metadata"].get("error")
                with lock:
                    outcomes.append((error["type"] if error else "ok", elapsed))

            threads = [threading.Thread(target=work) for _ in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=30)
            kinds = {kind for kind, _ in outcomes}
            assert len(outcomes) == 8
            assert kinds <= {"ok", "BackendUnavailableError"}
            assert "BackendUnavailableError" in kinds and "ok" in kinds
            assert max(elapsed for _, elapsed in outcomes) < 5
            envelope, _ = answer(agent, "leads at acme")
            assert "error" not in envelope["metadata"]
