"""PostgreSQL: ``facade.read`` and ``RAGAgent.run`` against raw psycopg and the peer tool.

Scenarios (all a page of 50 plus the total count, the shape the pipeline asks for):

* ``id = n`` — an indexed equality lookup (primary key);
* ``company_name icontains 'globex'`` without, then with, a ``pg_trgm`` GIN index.

For each: raw psycopg runs the exact statement and values the backend sends, on one autocommit
connection with a reused cursor (the floor); ``facade.read`` and ``RAGAgent.run`` (cache off) go
through the library; the peer runs the same statement as text. For ``icontains`` also: the
peer running the SQL a model writes for it (:data:`PEER_OWN_SQL`: the first 50 matches, no
count, no order), and ``RAGAgent.run`` with bounded totals (``RAG_EXACT_TOTALS=0``). Also:
``run()`` cache hit vs miss, round trips per call (counted on the wire, see ``wire.py``) and
threaded throughput.
"""

from __future__ import annotations

import datetime as dt
import random
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg

from persistence import Filter, Op, Query, create_read_only_facade
from persistence.backends.postgres import sql as _pg_sql
from persistence.backends.postgres.catalog import read_indexes
from persistence.backends.postgres.indexes import served_lookups, unserved
from persistence.facade import ReadOnlyPersistenceFacade
from persistence.schema import TABLE_COLUMNS
from rag_agent import RAGAgent, RAGSettings, create_rag_agent, understand
from rag_agent.ops.doctor import IndexKind, create_statement
from tests.benchmarks.common import ScratchDatabase, Stats, compare
from tests.benchmarks.datagen import NEEDLE, NEEDLE_QUESTION
from tests.benchmarks.peer import PeerTool, inline
from tests.benchmarks.wire import counting_dsn

PAGE = 50
#: What a model asks LangChain's SQL tool for "leads at Globex": the first rows it finds, in no
#: order, and no count.
PEER_OWN_SQL = "SELECT * FROM leads WHERE company_name ILIKE '%globex%' LIMIT 50"
#: The index ``rag-agent doctor`` recommends for ``company_name icontains``.
TRGM_INDEX = create_statement("public", "leads", "company_name", IndexKind.TRIGRAM)


def raw_statement(query: Query, conn: psycopg.Connection[Any]) -> tuple[bytes, list[Any]]:
    """The statement and values the backend sends for ``query`` (all columns, catalog order):
    the probing form where no index of the table on ``conn``'s database serves any filter, by
    the backend's own rule."""
    columns = TABLE_COLUMNS[query.table]
    probe = unserved(
        query.filters, served_lookups(query.table, columns, read_indexes(conn, "public"))
    )
    statement = _pg_sql.build_read(query, "public", columns, True, probe=probe).as_bytes(None)
    return statement, _pg_sql.read_params(query, probe=probe)


def agent_query(text: str) -> Query:
    """The query ``RAGAgent.run(text)`` sends on its first attempt."""
    found = understand(text, table="leads", now=dt.datetime.now(dt.UTC))
    filters = tuple(condition.to_filter() for condition in found.conditions)
    return Query("leads", filters, limit=PAGE, offset=0)


@dataclass
class Clients:
    """Every contender's client, opened once and shared by the scenarios."""

    facade: ReadOnlyPersistenceFacade
    agent: RAGAgent  # cache off
    cached_agent: RAGAgent
    bounded_agent: RAGAgent  # cache off, totals counted up to the page's end plus one
    raw: psycopg.Connection[Any]
    peer: PeerTool | None

    def close(self) -> None:
        self.facade.close()
        self.agent.facade.close()
        self.cached_agent.facade.close()
        self.bounded_agent.facade.close()
        self.raw.close()
        if self.peer is not None:
            self.peer.close()


def open_clients(db: ScratchDatabase, *, with_peer: bool) -> Clients:
    """Open the facade, the agents, a raw connection and (optionally) the peer on ``db``."""
    dsn = db.reader_dsn
    return Clients(
        facade=create_read_only_facade(kind="postgres", dsn=dsn),
        agent=create_rag_agent(kind="postgres", dsn=dsn, settings=RAGSettings(cache_disabled=True)),
        cached_agent=create_rag_agent(kind="postgres", dsn=dsn, settings=RAGSettings()),
        bounded_agent=create_rag_agent(
            kind="postgres",
            dsn=dsn,
            settings=RAGSettings(cache_disabled=True, exact_totals=False),
        ),
        raw=psycopg.connect(dsn, autocommit=True),
        peer=PeerTool(dsn) if with_peer else None,
    )


@dataclass(frozen=True)
class Scenario:
    """A named query: the filters ``facade.read`` gets and the question ``run()`` gets."""

    name: str
    filters: tuple[Filter, ...]
    question: str


def scenarios(rows: int) -> list[Scenario]:
    lead_id = rows // 2 + 1
    return [
        Scenario("id = n (indexed equality)", (Filter("id", Op.EQ, lead_id),), f"lead {lead_id}"),
        Scenario(
            "icontains page + count",
            (Filter("company_name", Op.ICONTAINS, NEEDLE),),
            NEEDLE_QUESTION,
        ),
    ]


def contenders(clients: Clients, scenario: Scenario) -> dict[str, Callable[[], object]]:
    """The callables timed against each other for ``scenario``."""
    query = Query("leads", scenario.filters, limit=PAGE, offset=0)
    statement, params = raw_statement(query, clients.raw)
    run_query = agent_query(scenario.question)
    assert run_query.filters[0].column == scenario.filters[0].column, "run() reads the same column"
    cursor = clients.raw.cursor()
    facade, agent = clients.facade, clients.agent

    def raw() -> object:
        return cursor.execute(statement, params).fetchall()

    def read() -> object:
        return facade.read("leads", scenario.filters, limit=PAGE)

    def run() -> object:
        return agent.run(scenario.question, return_json=True)

    calls: dict[str, Callable[[], object]] = {
        "raw psycopg": raw,
        "facade.read": read,
        "RAGAgent.run": run,
    }
    scan = scenario.filters[0].op is Op.ICONTAINS
    if scan:
        bounded = clients.bounded_agent

        def run_bounded() -> object:
            return bounded.run(scenario.question, return_json=True)

        calls["RAGAgent.run, bounded total"] = run_bounded
    if clients.peer is not None:
        peer, text = clients.peer, inline(statement, params)
        calls["peer tool"] = lambda: peer.query(text)
        if scan:
            calls["peer tool, own SQL"] = lambda: peer.query(PEER_OWN_SQL)
    # The same answer everywhere, or the comparison means nothing.
    expected = facade.read("leads", scenario.filters, limit=PAGE).total_count
    assert int(raw()[0][0]) == expected  # type: ignore[index]
    envelope = agent.run(scenario.question, return_json=True)
    assert envelope["metadata"]["total_count"] == expected, envelope["metadata"]
    if scan:
        page = run_bounded()["metadata"]  # type: ignore[index]
        assert page["total_count"] == min(expected, PAGE + 1), page
    return calls


def blocks_read(clients: Clients, scenario: Scenario) -> dict[str, int]:
    """Shared buffers each statement touches (``EXPLAIN (ANALYZE, BUFFERS)``, hit or read): the
    library's page with its exact total, with a bounded total, and the peer's own SQL."""
    conn = clients.raw
    found = {}
    for name, exact in (("exact total", True), ("bounded total", False)):
        query = Query("leads", scenario.filters, limit=PAGE, offset=0, exact_total=exact)
        found[name] = _plan_blocks(conn, *raw_statement(query, conn))
    found["peer's own SQL"] = _plan_blocks(conn, PEER_OWN_SQL.encode(), None)
    return found


def _plan_blocks(conn: psycopg.Connection[Any], statement: bytes, params: Any) -> int:
    row = conn.execute(b"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement, params).fetchone()
    assert row is not None
    plan = row[0][0]["Plan"]  # the top node's buffers include its children's
    return int(plan.get("Shared Hit Blocks", 0)) + int(plan.get("Shared Read Blocks", 0))


def time_scenario(clients: Clients, scenario: Scenario, *, quick: bool) -> dict[str, Stats]:
    """Per-call times of every contender for ``scenario``: single-call samples (so p95 is a
    per-call figure), a few in a row when calls are cheap."""
    calls = contenders(clients, scenario)
    slowest = max(per_call_estimate(f) for f in calls.values())
    block = max(1, min(10, int(0.002 / max(slowest, 1e-6))))
    budget = 1.0 if quick else 8.0
    rounds = max(8 if quick else 20, min(400, int(budget / (slowest * block * len(calls)))))
    return compare(calls, rounds=rounds, block=block, warmup=3)


def per_call_estimate(func: Callable[[], object]) -> float:
    start = time.perf_counter()
    func()
    return time.perf_counter() - start


def cache_hit_vs_miss(clients: Clients, scenario: Scenario, *, quick: bool) -> dict[str, Stats]:
    """``run()`` with the cache on: a hit, and a miss (the cache cleared before each call)."""
    agent, text = clients.cached_agent, scenario.question
    agent.run(text)
    assert agent.run(text).metadata.cache == "hit"

    def hit() -> object:
        return agent.run(text)

    def miss() -> object:
        agent.cache.clear()
        return agent.run(text)

    return compare({"cache hit": hit, "cache miss": miss}, rounds=11 if quick else 31, number=20)


def round_trips(
    db: ScratchDatabase, scenario: Scenario, *, with_peer: bool, calls: int = 100
) -> dict[str, tuple[float, int]]:
    """Per client: round trips per call (median of three windows of ``calls`` calls), counted on
    the wire, and connections opened meanwhile.

    A warm-up comes first (connect, catalog, the pool's first connections, prepared statements):
    the figure is the steady state an agent pays per call.
    """
    results: dict[str, tuple[float, int]] = {}
    with counting_dsn(db.reader_dsn) as (dsn, counter):
        query = Query("leads", scenario.filters, limit=PAGE, offset=0)

        def measure(name: str, func: Callable[[], object]) -> None:
            for _ in range(30):
                func()
            windows: list[float] = []
            connections = counter.connections
            for _ in range(3):
                trips = counter.trips
                for _ in range(calls):
                    func()
                windows.append((counter.trips - trips) / calls)
            # The median of three windows: a stray turn (a TCP segment split under load) in one
            # window is noise, a real extra statement shows in every window.
            results[name] = (statistics.median(windows), counter.connections - connections)

        with psycopg.connect(dsn, autocommit=True) as conn:
            statement, params = raw_statement(query, conn)
            cursor = conn.cursor()
            measure("raw psycopg", lambda: cursor.execute(statement, params).fetchall())
        with create_read_only_facade(kind="postgres", dsn=dsn) as facade:
            measure("facade.read", lambda: facade.read("leads", scenario.filters, limit=PAGE))
            measure("facade.count", lambda: facade.count("leads", scenario.filters))
        agent = create_rag_agent(
            kind="postgres", dsn=dsn, settings=RAGSettings(cache_disabled=True)
        )
        with agent.facade:
            measure("RAGAgent.run (cache off)", lambda: agent.run(scenario.question))
        if with_peer:
            peer, text = PeerTool(dsn), inline(statement, params)
            try:
                measure("peer tool", lambda: peer.query(text))
            finally:
                peer.close()
    return results


@dataclass(frozen=True)
class Throughput:
    """Calls per second with ``threads`` threads, and how many calls raised."""

    threads: int
    calls: int
    seconds: float
    errors: int

    @property
    def per_second(self) -> float:
        return self.calls / self.seconds


def throughput(
    call: Callable[[random.Random], object], threads: int, calls_per_thread: int
) -> Throughput:
    """Run ``call`` ``calls_per_thread`` times on each of ``threads`` threads, started together."""
    errors = [0] * threads
    barrier = threading.Barrier(threads + 1)

    def worker(index: int) -> None:
        rng = random.Random(index)
        barrier.wait()
        for _ in range(calls_per_thread):
            try:
                call(rng)
            except Exception:
                errors[index] += 1

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for thread in workers:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in workers:
        thread.join()
    return Throughput(threads, threads * calls_per_thread, time.perf_counter() - start, sum(errors))


def pg_throughput(
    db: ScratchDatabase, thread_counts: tuple[int, ...], calls: int
) -> list[Throughput]:
    """``facade.read`` id lookups of random leads from 1/2/4/8 threads sharing one facade."""
    with create_read_only_facade(kind="postgres", dsn=db.reader_dsn) as facade:

        def call(rng: random.Random) -> object:
            lead_id = rng.randint(1, db.rows)
            page = facade.read("leads", [Filter("id", Op.EQ, lead_id)], limit=PAGE)
            if page.total_count != 1:
                raise AssertionError(f"lead {lead_id} not found")
            return page

        for _ in range(20):
            call(random.Random(0))
        return [throughput(call, n, calls // n) for n in thread_counts]
