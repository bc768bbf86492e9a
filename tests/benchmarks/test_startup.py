"""The start-up section of ``make bench``: CPU ratios to a bare interpreter, judged per command."""

from __future__ import annotations

from tests.benchmarks.common import Stats
from tests.benchmarks.startup import BARE, GOALS, section, targets


def _stats(help_s: float) -> dict[str, Stats]:
    bare = 0.020
    figures = {BARE: bare, **dict.fromkeys(GOALS, bare)}
    figures["rag-agent --help"] = help_s
    return {name: Stats((value, value * 1.01, value * 0.99)) for name, value in figures.items()}


def test_ratios_and_goals_in_the_table() -> None:
    cpu = _stats(0.060)
    wall = {name: Stats(tuple(v * 2 for v in s.samples)) for name, s in cpu.items()}
    rows = {row[0]: row for row in section(wall, cpu).rows}
    assert rows[BARE][4] == "1.0×"
    assert rows["rag-agent --help"][1].startswith("120.00 ms")  # wall shown as measured
    assert rows["rag-agent --help"][3] == "60 ms"
    assert rows["rag-agent --help"][4] == "3.0×" and rows["rag-agent --help"][5] == "≤ 4×"


def test_a_heavy_import_in_help_misses_its_target() -> None:
    """--help at 0.2 s of CPU against a 20 ms interpreter: ten times, the creep the target is
    there for."""
    by_name = {t.name: t for t in targets(_stats(0.200))}
    help_target = by_name["Start-up: rag-agent --help"]
    assert not help_target.met
    assert help_target.gap.startswith("6.0×") and help_target.reason
    assert help_target.measured.startswith("10.0×")
    assert all(t.met for name, t in by_name.items() if "--help" not in name)


def test_every_command_has_a_goal() -> None:
    assert set(GOALS) == {name for name in _stats(0.06) if name != BARE}
