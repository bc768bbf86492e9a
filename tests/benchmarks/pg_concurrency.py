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
exception or a wrong answer). The limiter: ``RedisSlidingWindowLimiter`` hammered by the same
number of callers for a few windows; every acquisition is time-stamped before and after the
call, and the check is that no window of the budget ever held more grants than the limit.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import random
import secrets
import statistics
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
from tests.benchmarks.pg_suite import PAGE, raw_statement
from tests.benchmarks.report import fmt_time, markdown_table

THREADS = 8
TASKS = 50
POOL = 10  # the facade's default pool_max_size: raw psycopg gets the same
REDIS_URL = "redis://127.0.0.1:6379/15"


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


def run_threads(
    load: Load, call: Callable[[int], bool], rows: int, calls: int, pool: Callable[[], Any]
) -> Load:
    """``THREADS`` threads started together, ``calls`` each; ``call(id)`` answers right or not."""
    if calls > 3:
        # A short load first: the pool grows to its working size, statements get prepared.
        run_threads(Load(load.contender, load.mode), call, rows, 3, pool)
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

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
    for thread in workers:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in workers:
        thread.join()
    load.seconds, load.calls = time.perf_counter() - start, THREADS * calls
    load.pool_waits = _queued(pool()) - before
    return load


async def run_tasks(
    load: Load, call: Callable[[int], Awaitable[bool]], rows: int, calls: int, pool: Callable[[], Any]
) -> Load:
    """``TASKS`` tasks on one loop, ``calls`` each."""
    if calls > 2:
        await run_tasks(Load(load.contender, load.mode), call, rows, 2, pool)  # warm the pool
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
    await asyncio.gather(*(task(i) for i in range(TASKS)))
    load.seconds, load.calls = time.perf_counter() - start, TASKS * calls
    load.pool_waits = _queued(pool()) - before
    return load


def _statement(lead_id: int) -> tuple[bytes, list[Any]]:
    return raw_statement(Query("leads", (Filter("id", Op.EQ, lead_id),), limit=PAGE))


def _found(rows: list[Any], lead_id: int) -> bool:
    # Row layout of the backend's statement: (total, hit, id, ...).
    return len(rows) == 1 and rows[0][0] == 1 and rows[0][2] == lead_id


def threaded(dsn: str, rows: int, calls: int) -> list[Load]:
    """Raw pool, ``facade.read`` and ``RAGAgent.run`` from ``THREADS`` threads."""
    statement, _ = _statement(1)
    loads = []
    kwargs = {"autocommit": True, "prepare_threshold": 5}
    with ConnectionPool(dsn, min_size=1, max_size=POOL, kwargs=kwargs, open=True) as pool:

        def raw(lead_id: int) -> bool:
            with pool.connection() as conn:
                return _found(conn.execute(statement, _statement(lead_id)[1]).fetchall(), lead_id)

        raw(1)
        loads.append(run_threads(Load("raw psycopg (pool)", "8 threads"), raw, rows, calls,
                                 lambda: pool))  # fmt: skip
    with create_read_only_facade(kind="postgres", dsn=dsn, pool_max_size=POOL) as facade:

        def read(lead_id: int) -> bool:
            page = facade.read("leads", [Filter("id", Op.EQ, lead_id)], limit=PAGE)
            return page.total_count == 1 and page.rows[0]["id"] == lead_id

        read(1)
        loads.append(run_threads(Load("facade.read", "8 threads"), read, rows, calls,
                                 lambda: _facade_pool(facade, False)))  # fmt: skip
    agent = create_rag_agent(kind="postgres", dsn=dsn, settings=RAGSettings(cache_disabled=True))
    with agent.facade:

        def run(lead_id: int) -> bool:
            envelope = agent.run(f"lead {lead_id}")
            return envelope.metadata.total_count == 1 and envelope.metadata.error is None

        run(1)
        loads.append(run_threads(Load("RAGAgent.run", "8 threads"), run, rows, calls,
                                 lambda: _facade_pool(agent.facade, False)))  # fmt: skip
    return loads


async def awaited(dsn: str, rows: int, calls: int) -> list[Load]:
    """Raw async pool, ``facade.aread`` and ``RAGAgent.arun`` from ``TASKS`` tasks."""
    statement, _ = _statement(1)
    loads = []
    kwargs = {"autocommit": True, "prepare_threshold": 5}
    async with AsyncConnectionPool(dsn, min_size=1, max_size=POOL, kwargs=kwargs) as pool:

        async def raw(lead_id: int) -> bool:
            async with pool.connection() as conn:
                cursor = await conn.execute(statement, _statement(lead_id)[1])
                return _found(await cursor.fetchall(), lead_id)

        await raw(1)
        loads.append(await run_tasks(Load("raw psycopg (pool)", "50 tasks"), raw, rows, calls,
                                     lambda: pool))  # fmt: skip
    facade = create_read_only_facade(kind="postgres", dsn=dsn, pool_max_size=POOL)
    try:

        async def read(lead_id: int) -> bool:
            page = await facade.aread("leads", [Filter("id", Op.EQ, lead_id)], limit=PAGE)
            return page.total_count == 1 and page.rows[0]["id"] == lead_id

        await read(1)
        loads.append(await run_tasks(Load("facade.aread", "50 tasks"), read, rows, calls,
                                     lambda: _facade_pool(facade, True)))  # fmt: skip
    finally:
        await facade.aclose()
        facade.close()
    agent = create_rag_agent(kind="postgres", dsn=dsn, settings=RAGSettings(cache_disabled=True))
    try:

        async def run(lead_id: int) -> bool:
            envelope = await agent.arun(f"lead {lead_id}")
            return envelope.metadata.total_count == 1 and envelope.metadata.error is None

        await run(1)
        loads.append(await run_tasks(Load("RAGAgent.arun", "50 tasks"), run, rows, calls,
                                     lambda: _facade_pool(agent.facade, True)))  # fmt: skip
    finally:
        await agent.aclose()
        agent.facade.close()
    return loads


# --- the Redis limiter ---------------------------------------------------------------------------


@dataclass
class LimiterRun:
    """Grants and refusals of one limiter load, and the most grants seen in one window."""

    callers: int
    limit: int
    window: float
    seconds: float
    granted: int
    refused: int
    errors: int
    peak: int
    calls_per_second: float

    @property
    def over_budget(self) -> bool:
        return self.peak > self.limit


def limiter_load(url: str, callers: int, *, limit: int, window: float, seconds: float) -> LimiterRun:
    """``callers`` threads calling ``try_acquire`` for ``seconds`` on a fresh key."""
    from rag_agent.ratelimit import RedisSlidingWindowLimiter

    key = f"rag_bench:limiter:{secrets.token_hex(4)}"
    limiter = RedisSlidingWindowLimiter(url, limit, window, key=key, socket_timeout=2.0)
    stamps: list[tuple[float, float, bool]] = []
    errors = [0]
    lock = threading.Lock()
    deadline = time.perf_counter() + seconds

    def caller() -> None:
        mine = []
        while time.perf_counter() < deadline:
            start = time.perf_counter()
            try:
                granted = limiter.try_acquire()
            except Exception:
                with lock:
                    errors[0] += 1
                continue
            mine.append((start, time.perf_counter(), granted))
        with lock:
            stamps.extend(mine)

    try:
        with concurrent.futures.ThreadPoolExecutor(callers) as pool:
            for future in [pool.submit(caller) for _ in range(callers)]:
                future.result()
    finally:
        limiter._client.delete(key)
        limiter.close()
    return LimiterRun(
        callers,
        limit,
        window,
        seconds,
        granted=sum(g for *_, g in stamps),
        refused=sum(not g for *_, g in stamps),
        errors=errors[0],
        peak=peak_in_window(stamps, window),
        calls_per_second=len(stamps) / seconds,
    )


def peak_in_window(stamps: Sequence[tuple[float, float, bool]], window: float) -> int:
    """The most grants whose server time can only lie in one window of the budget.

    A grant happened on the server between its call's start and end. Grants whose calls started
    within ``window - slowest call`` of each other were all granted within ``window``; so the
    count over such spans is a lower bound of the true peak that can still prove an overrun.
    """
    slowest = max((end - start for start, end, _ in stamps), default=0.0)
    span = max(window - slowest, 0.0)
    starts = sorted(start for start, _, granted in stamps if granted)
    peak, low = 0, 0
    for high, start in enumerate(starts):
        while start - starts[low] > span:
            low += 1
        peak = max(peak, high - low + 1)
    return peak


def redis_available(url: str) -> bool:
    try:
        import redis

        return bool(redis.Redis.from_url(url, socket_connect_timeout=1).ping())
    except Exception:
        return False


# --- section -------------------------------------------------------------------------------------


@dataclass
class ConcurrencyReport:
    section: Section
    targets: list[Target]
    figures: dict[str, Any]


def measure(rows: int, *, quick: bool, redis_url: str = REDIS_URL) -> ConcurrencyReport:
    """Every load on a fresh reference database of ``rows`` leads, then the limiter."""
    thread_calls, task_calls = (40, 8) if quick else (400, 60)
    with scratch_database(rows) as db:
        loads = threaded(db.reader_dsn, rows, thread_calls)
        loads += asyncio.run(awaited(db.reader_dsn, rows, task_calls))
    section = Section(
        f"Throughput under concurrency (PostgreSQL, {rows:,} leads)",
        f"Id lookups of random leads (page + total), every answer checked, from {THREADS} "
        f"threads sharing one client and from {TASKS} asyncio tasks on one loop. Pools of "
        f"{POOL} connections everywhere (the facade's default; raw psycopg gets the same). "
        "*Pool waits*: requests the pool queued because every connection was lent.",
        ("Load", "Contender", "Calls", "Calls/s", "vs raw", "p50", "p95", "Pool waits", "Errors"),
    )
    targets: list[Target] = []
    raw_rate: dict[str, float] = {}
    for load in loads:
        if load.contender.startswith("raw"):
            raw_rate[load.mode] = load.per_second
        base = raw_rate.get(load.mode, load.per_second)
        section.rows.append((load.mode, load.contender, load.calls, f"{load.per_second:,.0f}",
                             f"{load.per_second / base:.2f}×", fmt_time(load.quantile(0.5)),
                             fmt_time(load.quantile(0.95)), load.pool_waits, load.errors))  # fmt: skip
        if load.contender.startswith("facade"):
            share = load.per_second / base
            targets.append(Target(f"{load.contender} throughput vs raw pool — {load.mode}",
                                  "≥ 0.90×, 0 errors", f"{share:.2f}×, {load.errors} errors",
                                  share >= 0.9 and load.errors == 0))  # fmt: skip
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
        targets.append(Target("Redis limiter under concurrent callers never over budget",
                              "≤ budget per window", f"peak {worst} of {runs[0].limit}",
                              not any(run.over_budget for run in runs)
                              and not any(run.errors for run in runs)))  # fmt: skip
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
