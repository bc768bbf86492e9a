"""Throughput under concurrency: 8 threads and 50 asyncio tasks against PostgreSQL, and the Redis
fallback limiter under the same number of callers.

Run alone: ``python -m tests.benchmarks.pg_concurrency [--rows N] [--quick]``; ``make bench``
runs it as one of its steps. On a reference ``leads`` table, every caller looks up random leads
by id (page of 50 + total), each answer checked, through:

* **raw psycopg**: ``psycopg_pool`` with the facade's pool size (10), the backend's statement;
* **facade.read** / **facade.aread**: one facade shared by every thread or task;
* **RAGAgent.run** / **RAGAgent.arun** (cache off): the question ``lead <id>``.

Reported per contender: calls/s, p50 and p95 per call, *pool waits* (requests the pool queued
because every connection was lent, from ``psycopg_pool``'s own statistics) and errors (a raised
exception or a wrong answer). The limiter (``limiter_load``): ``RedisSlidingWindowLimiter``
hammered by the same numbers of callers; no window of the budget may hold more grants than the
limit.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from persistence import Filter, Op, Query, create_read_only_facade
from persistence.facade import ReadOnlyPersistenceFacade
from rag_agent import RAGSettings, create_rag_agent
from tests.benchmarks.common import Section, Target, quiet_logging, scratch_database
from tests.benchmarks.limiter_load import REDIS_URL, limiter_load, redis_available
from tests.benchmarks.pg_suite import PAGE, raw_statement
from tests.benchmarks.report import fmt_time, markdown_table

THREADS = 8
TASKS = 50
POOL = 10  # the facade's default pool_max_size: raw psycopg gets the same


@dataclass
class Load:
    """One contender under one kind of concurrency."""

    contender: str
    mode: str
    calls: int = 0
    seconds: float = 0.0
    errors: int = 0
    latencies: list[float] = field(default_factory=list)
    pool_waits: int | None = None

    @property
    def per_second(self) -> float:
        return self.calls / self.seconds if self.seconds else 0.0

    def quantile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "contender": self.contender,
            "mode": self.mode,
            "calls": self.calls,
            "per_second": self.per_second,
            "p50_s": self.quantile(0.5),
            "p95_s": self.quantile(0.95),
            "errors": self.errors,
            "pool_waits": self.pool_waits,
        }


def _queued(pool: Any) -> int:
    return int(pool.get_stats().get("requests_queued", 0)) if pool is not None else 0


def _facade_pool(facade: ReadOnlyPersistenceFacade, awaited: bool) -> Any:
    """The facade's blocking or awaitable ``psycopg_pool`` pool (for its statistics)."""
    backend: Any = facade._backend()
    if awaited:
        return getattr(getattr(backend, "_async", None), "_pool", None)
    connections = getattr(backend, "_connections", None)
    return connections.pool() if connections is not None else None


Runner = tuple[Callable[[int], Any], Callable[[], Any]]  # (call, its pool, for statistics)


def run_threads(load: Load, call: Callable[[int], bool], rows: int, calls: int, pool: Any) -> None:
    """``THREADS`` threads started together, ``calls`` each, added to ``load``; ``call(id)``
    says whether it answered right."""
    barrier = threading.Barrier(THREADS + 1)
    lock = threading.Lock()
    before = _queued(pool())

    def worker(seed: int) -> None:
        rng, mine, errors = random.Random(seed), [], 0
        barrier.wait()
        for _ in range(calls):
            start = time.perf_counter()
            try:
                errors += not call(rng.randint(1, rows))
            except Exception:
                errors += 1
            mine.append(time.perf_counter() - start)
        with lock:
            load.latencies += mine
            load.errors += errors

    workers = [threading.Thread(target=worker, args=(i + load.calls,)) for i in range(THREADS)]
    for thread in workers:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in workers:
        thread.join()
    load.seconds += time.perf_counter() - start
    load.calls += THREADS * calls
    load.pool_waits = (load.pool_waits or 0) + _queued(pool()) - before


async def run_tasks(
    load: Load, call: Callable[[int], Awaitable[bool]], rows: int, calls: int, pool: Any
) -> None:
    """``TASKS`` tasks on one loop, ``calls`` each, added to ``load``."""
    before = _queued(pool())

    async def task(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(calls):
            start = time.perf_counter()
            try:
                load.errors += not await call(rng.randint(1, rows))
            except Exception:
                load.errors += 1
            load.latencies.append(time.perf_counter() - start)

    start = time.perf_counter()
    await asyncio.gather(*(task(i + load.calls) for i in range(TASKS)))
    load.seconds += time.perf_counter() - start
    load.calls += TASKS * calls
    load.pool_waits = (load.pool_waits or 0) + _queued(pool()) - before


def _statement(dsn: str) -> bytes:
    """The backend's statement for an id lookup; its values are ``_params(id)``."""
    with psycopg.connect(dsn) as conn:
        query = Query("leads", (Filter("id", Op.EQ, 1),), limit=PAGE)
        statement, params = raw_statement(query, conn)
    if params != _params(1):
        raise AssertionError(f"the backend binds {params}, not {_params(1)}")
    return statement


def _params(lead_id: int) -> list[Any]:
    # The filter's value twice (page, total), then limit and offset: built once per call, as a
    # careful engineer would, not through the query builder.
    return [lead_id, lead_id, PAGE, 0]


def _found(rows: list[Any], lead_id: int) -> bool:
    # Row layout of the backend's statement: (total, hit, id, ...).
    return len(rows) == 1 and rows[0][0] == 1 and rows[0][2] == lead_id


def _agent(dsn: str) -> Any:
    return create_rag_agent(
        kind="postgres",
        dsn=dsn,
        settings=RAGSettings(cache_disabled=True),
        pool_min_size=POOL,
        pool_max_size=POOL,
    )


def _facade(dsn: str) -> ReadOnlyPersistenceFacade:
    return create_read_only_facade(kind="postgres", dsn=dsn, pool_min_size=POOL, pool_max_size=POOL)


def threaded(dsn: str, rows: int, calls: int, rounds: int) -> list[Load]:
    """Raw pool, ``facade.read`` and ``RAGAgent.run`` from ``THREADS`` threads, interleaved in
    ``rounds`` (drift on a shared machine is charged to every contender alike)."""
    statement = _statement(dsn)
    kwargs = {"autocommit": True, "prepare_threshold": 5}
    agent = _agent(dsn)
    with (
        ConnectionPool(dsn, min_size=POOL, max_size=POOL, kwargs=kwargs, open=True) as pool,
        _facade(dsn) as facade,
        agent.facade,
    ):

        def raw(lead_id: int) -> bool:
            with pool.connection() as conn:
                return _found(conn.execute(statement, _params(lead_id)).fetchall(), lead_id)

        def read(lead_id: int) -> bool:
            page = facade.read("leads", [Filter("id", Op.EQ, lead_id)], limit=PAGE)
            return page.total_count == 1 and page.rows[0]["id"] == lead_id

        def run(lead_id: int) -> bool:
            envelope = agent.run(f"lead {lead_id}")
            return envelope.metadata.total_count == 1 and envelope.metadata.error is None

        runners: dict[str, Runner] = {
            "raw psycopg (pool)": (raw, lambda: pool),
            "facade.read": (read, lambda: _facade_pool(facade, False)),
            "RAGAgent.run": (run, lambda: _facade_pool(agent.facade, False)),
        }
        loads = {name: Load(name, f"{THREADS} threads") for name in runners}
        for index in range(rounds + 1):
            for name, (call, stats) in runners.items():
                # Round 0 warms up (connections opened, statements prepared) and is dropped.
                target = loads[name] if index else Load(name, "warm-up")
                run_threads(target, call, rows, calls if index else 3, stats)
    return list(loads.values())


async def awaited(dsn: str, rows: int, calls: int, rounds: int) -> list[Load]:
    """Raw async pool, ``facade.aread`` and ``RAGAgent.arun`` from ``TASKS`` tasks, interleaved
    in ``rounds``."""
    statement = _statement(dsn)
    kwargs = {"autocommit": True, "prepare_threshold": 5}
    facade, agent = _facade(dsn), _agent(dsn)
    try:
        async with AsyncConnectionPool(dsn, min_size=POOL, max_size=POOL, kwargs=kwargs) as pool:

            async def raw(lead_id: int) -> bool:
                async with pool.connection() as conn:
                    cursor = await conn.execute(statement, _params(lead_id))
                    return _found(await cursor.fetchall(), lead_id)

            async def read(lead_id: int) -> bool:
                page = await facade.aread("leads", [Filter("id", Op.EQ, lead_id)], limit=PAGE)
                return page.total_count == 1 and page.rows[0]["id"] == lead_id

            async def run(lead_id: int) -> bool:
                envelope = await agent.arun(f"lead {lead_id}")
                return envelope.metadata.total_count == 1 and envelope.metadata.error is None

            runners: dict[str, Runner] = {
                "raw psycopg (pool)": (raw, lambda: pool),
                "facade.aread": (read, lambda: _facade_pool(facade, True)),
                "RAGAgent.arun": (run, lambda: _facade_pool(agent.facade, True)),
            }
            loads = {name: Load(name, f"{TASKS} tasks") for name in runners}
            for index in range(rounds + 1):
                for name, (call, stats) in runners.items():
                    target = loads[name] if index else Load(name, "warm-up")
                    await run_tasks(target, call, rows, calls if index else 2, stats)
    finally:
        await facade.aclose()
        await agent.aclose()
        facade.close()
        agent.facade.close()
    return list(loads.values())


@dataclass
class ConcurrencyReport:
    section: Section
    targets: list[Target]
    figures: dict[str, Any]


def measure(rows: int, *, quick: bool, redis_url: str = REDIS_URL) -> ConcurrencyReport:
    """Every load on a fresh reference database of ``rows`` leads, then the limiter."""
    # Per round: threads x calls, tasks x calls; rounds interleave the contenders.
    (thread_calls, task_calls), rounds = ((60, 10), 3) if quick else ((250, 40), 6)
    with scratch_database(rows) as db:
        loads = threaded(db.reader_dsn, rows, thread_calls, rounds)
        loads += asyncio.run(awaited(db.reader_dsn, rows, task_calls, rounds))
    section = Section(
        f"Throughput under concurrency (PostgreSQL, {rows:,} leads)",
        f"Id lookups of random leads (page + total), every answer checked, from {THREADS} "
        f"threads sharing one client and from {TASKS} asyncio tasks on one loop. Pools of "
        f"{POOL} connections everywhere (the facade's default maximum; raw psycopg gets the same), "
        "opened at start. "
        "*Pool waits*: requests the pool queued because every connection was lent.",
        ("Load", "Contender", "Calls", "Calls/s", "vs raw", "p50", "p95", "Pool waits", "Errors"),
    )
    targets: list[Target] = []
    raw_rate: dict[str, float] = {}
    raw_p50: dict[str, float] = {}
    for load in loads:
        if load.contender.startswith("raw"):
            raw_rate[load.mode] = load.per_second
            raw_p50[load.mode] = load.quantile(0.5)
        base = raw_rate.get(load.mode, load.per_second)
        section.rows.append(
            (
                load.mode,
                load.contender,
                load.calls,
                f"{load.per_second:,.0f}",
                f"{load.per_second / base:.2f}×",
                fmt_time(load.quantile(0.5)),
                fmt_time(load.quantile(0.95)),
                load.pool_waits,
                load.errors,
            )
        )
        if load.contender.startswith("facade"):
            share = load.per_second / base
            targets.append(
                Target(
                    f"{load.contender} throughput vs raw pool — {load.mode}",
                    "≥ 0.90×, 0 errors",
                    f"{share:.2f}×, {load.errors} errors",
                    share >= 0.9 and load.errors == 0,
                    gap=f"{max(0.0, 0.9 * base - load.per_second):,.0f} calls/s short of 0.90×",
                    reason="the machine's cores are the limit, shared by the server and the "
                    "client: the library's Python work per call (its checks, building the "
                    "page's rows) holds the GIL, and while one call runs it another waits; "
                    f"p50 per call {fmt_time(load.quantile(0.5))} against the raw pool's "
                    f"{fmt_time(raw_p50.get(load.mode, load.quantile(0.5)))}.",
                )
            )
    figures: dict[str, Any] = {"rows": rows, "loads": [load.as_dict() for load in loads]}
    if redis_available(redis_url):
        seconds = 1.2 if quick else 5.0
        runs = [
            limiter_load(redis_url, callers, limit=50, window=0.5, seconds=seconds)
            for callers in (THREADS, TASKS)
        ]
        figures["limiter"] = [vars(run) for run in runs]
        for run in runs:
            section.notes.append(
                f"Redis limiter, {run.callers} callers for {run.seconds:.1f} s, budget "
                f"{run.limit} per {run.window:g} s: {run.calls_per_second:,.0f} checks/s, "
                f"{run.granted:,} granted, {run.refused:,} refused, {run.errors} errors; most "
                f"grants in one window {run.peak} (budget {run.limit})."
            )
        worst = max(run.peak for run in runs)
        targets.append(
            Target(
                "Redis limiter under concurrent callers never over budget",
                "≤ budget per window",
                f"peak {worst} of {runs[0].limit}",
                not any(run.over_budget for run in runs) and not any(run.errors for run in runs),
                gap=f"{max(0, worst - runs[0].limit)} grants over budget in one window, "
                f"{sum(run.errors for run in runs)} errors",
                reason="a limiter over budget or failing is a bug of the limiter, not a cost: "
                "see its errors above.",
            )
        )
    else:
        section.notes.append("Redis limiter: not measured (Redis not reachable).")
    section.notes.append(
        "The library's calls release the GIL only while they wait on the server; on 2 cores "
        "shared with the server, Python work per call (building the statement, converting "
        "rows, the envelope) is what separates the library's throughput from the raw pool's."
    )
    return ConcurrencyReport(section, targets, figures)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    quiet_logging()
    report = measure(args.rows, quick=args.quick)
    print("\n".join(markdown_table(report.section.columns, report.section.rows)))
    for note in report.section.notes:
        print(f"\n{note}")
    for target in report.targets:
        print(f"- {target.name}: {target.measured} (goal {target.goal}): {target.verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
