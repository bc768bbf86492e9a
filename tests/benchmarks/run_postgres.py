"""A benchmark run's PostgreSQL sections: suite, lookups, aggregates, related, growth, search."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import psycopg

from persistence import Op
from tests.benchmarks import (
    growth,
    pg_aggregates,
    pg_concurrency,
    pg_lookups,
    pg_related,
    pg_scan,
    pg_suite,
)
from tests.benchmarks.common import ADMIN_DSN, Section, Stats, Target, scratch_database
from tests.benchmarks.report import fmt_stats, fmt_time, over, profiled, ratio
from tests.benchmarks.run_config import THREADS, Config, Results

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


def _note_blocks(
    section: Section,
    results: Results,
    clients: pg_suite.Clients,
    scenario: pg_suite.Scenario,
    label: str,
) -> None:
    """What each statement of an ``icontains`` read touches on the server, in the notes."""
    if scenario.filters[0].op is not Op.ICONTAINS:
        return
    blocks = pg_suite.blocks_read(clients, scenario)
    results.figures[f"pg_{label}_blocks"] = blocks
    shown = ", ".join(f"{name} {count:,}" for name, count in blocks.items())
    section.notes.append(f"Buffers touched (EXPLAIN ANALYZE, BUFFERS), {label}: {shown}.")


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
                _note_blocks(section, results, clients, scenario, label)
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
            _note_blocks(section, results, clients, icontains, label)
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
                    Target(
                        "run() cache hit",
                        "≤ 50 µs",
                        fmt_stats(hit),
                        hit.median <= 50e-6,
                        gap=over(hit.median, 50e-6, "hit"),
                        reason="a hit still checks the arguments, reads the question's plan "
                        "(the plan memo, the learned vocabulary's versions), builds the cache "
                        "key and assembles and validates a new envelope around the cached "
                        "records (profile below); no query is sent.",
                    ),
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
        # Several table sizes: each target names its own, or two rows would read the same.
        results.targets += [
            dataclasses.replace(target, name=f"{target.name} ({rows:,} leads)")
            if config.more_lookup_rows
            else target
            for target in report.targets
        ]
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
    """Hybrid search on PostgreSQL 18 + pgvector (``pg_search``), when it can be started; the
    peer (LangChain's ``PGVectorStore``) at the first size only."""
    from tests.benchmarks import pg_search

    for index, rows in enumerate((config.search_rows, *config.more_search_rows)):
        # Fewer queries per point at the extra sizes (1M): each leg there costs ten times more.
        queries = 15 if config.quick else (30 if index else 60)
        report = pg_search.measure(
            rows, queries, peer=config.peer and not index, server_uri=config.pg18_uri
        )
        peer = results.figures.get("search", {}).get("peer")
        if index and peer:
            report.section.notes.append(
                f"PGVectorStore is measured at {config.search_rows:,} rows only: its table needs "
                "a second HNSW index over every vector, built from scratch (at "
                f"{config.search_rows:,} rows it took {fmt_time(peer['hnsw_s'])}; the build "
                f"grows faster than the rows), on top of this size's own index."
            )
        results.sections += [report.section, *report.more]
        results.figures["search" if index == 0 else f"search_{rows}"] = report.figures
        results.targets += _search_targets(report.figures)
    if config.peer and "peer" in results.figures["search"] and config.search_relevance:
        from tests.benchmarks import search_relevance

        section, figures = search_relevance.measure(quick=config.quick)
        results.sections.append(section)
        results.figures["search_relevance"] = figures
        p_ours, p_peer = figures["p_at_10"]["facade"]["all"], figures["p_at_10"]["peer"]["all"]
        results.targets.append(
            Target(
                "facade.search hybrid more relevant than PGVectorStore (P@10)",
                "> peer",
                f"{p_ours:.3f} vs {p_peer:.3f} ({figures['queries']} queries)",
                p_ours > p_peer,
                gap=f"{max(0.0, p_peer - p_ours):.3f} P@10 below the peer",
                reason=_relevance_reason(figures),
            )
        )


def _relevance_reason(figures: dict[str, Any]) -> str:
    """Where the two differ most, by query type (P@10 of this run)."""
    ours, peer = figures["p_at_10"]["facade"], figures["p_at_10"]["peer"]
    differences = sorted(
        ((ours[kind] - peer[kind], kind) for kind in ours if kind != "all" and kind in peer),
        reverse=True,
    )
    lead = [f"{kind} ({d:+.3f})" for d, kind in differences if d > 0][:2]
    behind = [f"{kind} ({d:+.3f})" for d, kind in reversed(differences) if d < 0][:2]
    return (
        f"the library leads on {', '.join(lead) or 'no type'} and trails on "
        f"{', '.join(behind) or 'no type'}; the overall difference is the balance of those "
        "(per type: the relevance table below)."
    )


def _search_targets(figures: dict[str, Any]) -> list[Target]:
    """The issue's aims for hybrid search without a filter: within 1.2x of the raw replay of
    its statements, and faster than ``PGVectorStore`` (both medians of this run)."""
    rows = f"{figures['rows']:,} inquiries"
    point = next(p for p in figures["points"] if p["filter"] == "none" and p["mode"] == "hybrid")
    ratio_raw = point["p50_s"] / point["raw_p50_s"]
    targets = [
        Target(
            f"facade.search hybrid vs raw replay — {rows}",
            "≤ 1.2×",
            f"{ratio_raw:.2f}× ({fmt_time(point['p50_s'])} vs {fmt_time(point['raw_p50_s'])})",
            ratio_raw <= 1.2,
            gap=over(point["p50_s"], 1.2 * point["raw_p50_s"], "search"),
            reason="the library embeds the query, plans the legs and fuses them in Python; the "
            "replay only sends the recorded statements (legs per query: the search table "
            "below).",
        )
    ]
    peers = figures.get("peer", {}).get("points", [])
    own = {p["kind"]: p["p50_s"] for p in peers if p["filter"] == "none"}
    for peer in peers:
        if peer["kind"] != "sentences":
            continue
        if peer["filter"] == "none":
            ratio_peer = peer["p50_s"] / peer["peer_p50_s"]
            targets.append(
                Target(
                    f"facade.search hybrid ≤ 1.5× PGVectorStore, natural sentences — {rows}",
                    "≤ 1.5×",
                    f"{ratio_peer:.2f}× ({fmt_time(peer['p50_s'])} vs "
                    f"{fmt_time(peer['peer_p50_s'])}; median of ratios "
                    f"{peer['median_ratio']:.2f}×)",
                    ratio_peer <= 1.5,
                    gap=over(peer["p50_s"], 1.5 * peer["peer_p50_s"], "search"),
                    reason="the server's work decides, not round trips or Python (*vs raw* in "
                    "the search table): per natural sentence at 100,000 rows, each statement "
                    "replayed alone, the semantic leg's one HNSW scan about 5 ms (a pool of the "
                    "query's 400 nearest rows, each a heap tuple and a key lookup, ranked again "
                    "by the query its first 5 moved; a pool of 200 or 100 lowers the labelled "
                    "set's P@10), the keyword leg about 3 ms, the trigram leg 1.5 ms at the "
                    "median (up to 10 ms where a short word ties thousands of rows with one "
                    "frequent value), the catalog probe, the page's rows and the bounded count "
                    "about 1.5 ms together; a sentence with a word no row holds is corrected "
                    "first (the words table, about 1 ms). The legs run one after another on one "
                    "connection, in one snapshot. The peer runs one HNSW scan of 40 rows and a "
                    "keyword leg that needs every word (a sentence finds almost nothing there), "
                    "and no count. Dropping the trigram leg lowers P@10; running the HNSW scan on "
                    "a second connection sharing the snapshot measured 0.81× the legs' time, "
                    "not enough for the aim. The bench's shared buffers hold both stores' "
                    "tables and HNSW indexes (115 MB each), read into them before timing. Every "
                    "leg ranks `TIER_DEPTH` (100) rows so that pages are windows of one order.",
                )
            )
        else:
            ratio_own = peer["p50_s"] / own["sentences"]
            targets.append(
                Target(
                    f"facade.search hybrid filtered {peer['filter']} ≤ 1.5× its unfiltered, "
                    f"natural sentences — {rows}",
                    "≤ 1.5×",
                    f"{ratio_own:.2f}× ({fmt_time(peer['p50_s'])} vs {fmt_time(own['sentences'])})",
                    ratio_own <= 1.5,
                    gap=over(peer["p50_s"], 1.5 * own["sentences"], "search"),
                    reason="above `exact_rows` (2,000) filtered rows the semantic leg's "
                    "HNSW scan continues (iterative scan) until 100 rows pass the filter: at "
                    "10 % about 1,060 index tuples, each joined to its row (9 ms of the "
                    "server's time at 100,000 rows), where the unfiltered scan stops at 100; "
                    "measuring every filtered row instead costs more (10,000 lookups).",
                )
            )
    return targets


def vector_memory(config: Config, results: Results) -> None:
    """The memory backend's row vectors per million rows (``memory_vectors``)."""
    from tests.benchmarks import memory_vectors

    point = memory_vectors.measure(config.vector_rows)
    results.sections.append(memory_vectors.section(point))
    results.figures["vector_memory"] = dataclasses.asdict(point)


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
                    gap=over(ours.median, 1.3 * raw.median, "read"),
                    reason=f"the facade adds {fmt_time(ours.median - raw.median)} per read "
                    f"to a {fmt_time(raw.median)} round trip, where 1.3× leaves "
                    f"{fmt_time(0.3 * raw.median)}: its Python (the checks by the read's "
                    "plan, the values coerced, the pool's check-out and check-in, rows into "
                    "dicts) and the server's count of the matches beside the page, except for "
                    "an equality on the primary key, which reads the row alone as raw does.",
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
                        f"RAGAgent.run < 0.8× the peer — {label}",
                        "< 0.8×",
                        f"{ratio(run_stats, peer)} ({fmt_time(run_stats.median)} vs "
                        f"{fmt_time(peer.median)})",
                        run_stats.median < 0.8 * peer.median,
                        tie=run_stats.median - 0.8 * peer.median <= noise,
                        gap=over(run_stats.median, 0.8 * peer.median, "run"),
                        reason=f"the server's work decides: the peer runs the same statement "
                        f"(page and count), and `facade.read` alone is {ratio(ours, peer)} "
                        "the peer; what `run` adds is its Python (profile below).",
                    ),
                    run,
                    calls,
                )
            )
        own = stats.get("peer tool, own SQL")
        if own is not None:
            results.targets += _own_sql_targets(label, stats, own)


def _own_sql_targets(label: str, stats: dict[str, Stats], own: Stats) -> list[Target]:
    """``run`` against the SQL a model writes for the peer (no count, no order), with the exact
    total and with bounded totals (``RAG_EXACT_TOTALS=0``)."""
    found = []
    for contender, reason in (
        (
            "RAGAgent.run",
            "the exact total counts every match, where the peer's `LIMIT 50` stops at the "
            "first 50 rows it finds, in no order: the buffers each touches are in the notes of "
            "the PostgreSQL section (without an index the count reads the whole table; with "
            "one, every candidate row). `RAG_EXACT_TOTALS=0` skips that count (next target).",
        ),
        (
            "RAGAgent.run, bounded total",
            "the page is the first 50 matches in `id` order, so that pages follow one another: "
            "a probe for 51 matches in any order (the peer's own scan), then the ordered page; "
            "the probe keeps a selective filter no index serves to one pass over the table "
            "instead of a walk of the whole primary key (buffers: the section's notes).",
        ),
    ):
        run_stats = stats[contender]
        noise = (run_stats.p75 - run_stats.p25 + own.p75 - own.p25) / 2
        found.append(
            Target(
                f"{contender} < 0.8× the peer's own SQL — {label}",
                "< 0.8×",
                f"{ratio(run_stats, own)} ({fmt_time(run_stats.median)} vs {fmt_time(own.median)})",
                run_stats.median < 0.8 * own.median,
                tie=run_stats.median - 0.8 * own.median <= noise,
                gap=over(run_stats.median, 0.8 * own.median, "run"),
                reason=reason,
            )
        )
    return found
