"""A benchmark run's in-process sections: micro figures, the memory backend, throughput, tokens."""

from __future__ import annotations

import datetime as dt
import functools
import random
from collections.abc import Sequence
from typing import Any

from persistence import Filter, Op, create_read_only_facade
from tests.benchmarks import memory_icontains, memory_scale, pg_suite, rag_micro, tool_tokens
from tests.benchmarks.common import Section, Target
from tests.benchmarks.datagen import NEEDLE, memory_store
from tests.benchmarks.report import fmt_stats, fmt_time, over, profiled, ratio
from tests.benchmarks.run_config import THREADS, Config, Results


def _envelope_json(rows: list[dict[str, Any]], now: dt.datetime) -> dict[str, Any]:
    return rag_micro.build_envelope(rows, now).to_json()


# --- micro ---------------------------------------------------------------------------------------


def micro(config: Config, results: Results) -> None:
    parser_stats, count = rag_micro.parser_per_query(rounds=config.rounds)
    slow_text, slow_seconds = rag_micro.parser_slowest(number=10 if config.quick else 50)
    texts = rag_micro.labelled_texts()

    def parse_all() -> None:
        for text in texts:
            rag_micro.parse(text)

    results.targets.append(
        profiled(
            Target(
                "Rule parser per query",
                "≤ 20 µs",
                f"{fmt_stats(parser_stats)} (mean of {count} labelled queries)",
                parser_stats.median <= 20e-6,
                gap=over(parser_stats.median, 20e-6, "query"),
                reason="a rule runs only when the question holds the words every match holds (its "
                "gates), and a rule whose gates are all closed returns at once; a fixed cost of "
                "about 19 µs per question is left (the reading's set-up, the words, some 18 gate "
                "checks, the answer), and the rest is spread over the rules that can fire, none "
                "dominant (profile below). It is paid once per question, before any I/O.",
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
                        gap=over(total.median, 3e-3, "page"),
                        reason=f"{fmt_time(total.median / 500)} per row: the row's canonical "
                        "JSON (orjson, one pass over the page), its SHA-256, the record with its "
                        "provenance built without a second validation, and `to_json` writing "
                        "every record back out (profile below), against "
                        f"{fmt_time(base.median / 500)} per row for `json.dumps` alone.",
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


def tokens(config: Config, results: Results) -> None:
    """Tokens per tool answer: compact content vs the full envelope (``tool_tokens``)."""
    report = tool_tokens.measure(quick=config.quick)
    results.sections.append(report.section)
    results.figures["tool_tokens"] = report.figures
