"""A smoke test of ``make bench``: quick mode on tiny sizes writes a complete report.

It checks the report's structure, never a timing: figures are ratios for people to read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import structlog

from tests.benchmarks import run
from tests.benchmarks.common import ADMIN_DSN, postgres_available
from tests.benchmarks.datagen import lead_tuples
from tests.benchmarks.report import profile
from tests.conftest import require_service

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, Any]]]:
    """One quick run on tiny sizes, without the peer tool; structlog restored afterwards."""
    require_service(postgres_available(), "PostgreSQL on 127.0.0.1 is not reachable")
    out = tmp_path_factory.mktemp("bench")
    config = structlog.get_config()
    try:
        status = run.main(
            [
                "--quick",
                "--sizes",
                "500,1000",
                "--pg-rows",
                "2000",
                "--no-peer",
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
            "## Envelope and provenance vs plain JSON",
            "## Memory backend: growth curve",
            "## PostgreSQL: library vs raw psycopg vs peer tool (2,000 leads)",
            "## run() cache hit vs miss (PostgreSQL)",
            "## Round trips per call (PostgreSQL)",
            "## Throughput with 1 / 2 / 4 / 8 threads",
            "## How it is measured",
        ):
            assert heading in text

    def test_states_every_target(self, report: tuple[str, dict[str, Any]]) -> None:
        """Each target with a goal and a verdict; the peer's is absent when it is skipped."""
        _, figures = report
        names = [target["name"] for target in figures["targets"]]
        assert "Rule parser per query" in names
        assert "Envelope + provenance, 500 rows" in names
        assert "run() cache hit" in names
        assert sum(name.startswith("facade.read vs raw psycopg") for name in names) == 3
        assert not any("peer" in name for name in names)
        assert all(isinstance(target["met"], bool) for target in figures["targets"])

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

    def test_leaves_no_database_behind(self, report: tuple[str, dict[str, Any]]) -> None:
        """The scratch database and its role are dropped at the end of the run."""
        _, figures = report
        name = figures["figures"]["database"]
        assert name.startswith("rag_bench_")
        with psycopg.connect(ADMIN_DSN, autocommit=True) as conn:
            left = conn.execute(
                b"SELECT (SELECT count(*) FROM pg_database WHERE datname = %s)"
                b" + (SELECT count(*) FROM pg_roles WHERE rolname = %s)",
                (name, f"{name}_r"),
            ).fetchone()
        assert left == (0,)


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
