"""Growth: how the cost of a read grows with table size, page size and the number of filters.

Run alone: ``python -m tests.benchmarks.growth [--sizes 10000,100000] [--quick] [--plot PATH]``;
``make bench`` runs it as one of its steps and writes the plot to ``docs/benchmarks-growth.png``.

Every point times ``facade.read`` against raw psycopg running the very statement the backend
sends (page and total in one statement) on the same data, in the same run:

* **table size**: an id lookup (primary key: should stay flat) and ``company_name icontains``
  without a trigram index (a sequential scan: grows with the table) on reference tables of each
  size;
* **page size**: ``id < 2001`` ordered by ``id`` (an index range of 2,000 rows, counted) with
  pages of 10 to 500 rows, on the largest table: the server's work is fixed, the client converts
  and checks every row it receives;
* **number of filters**: one to four ``and``-ed conditions (``client_id``, ``status``, ``score``,
  ``company_name icontains``) on the largest table, page of 50.

The plot has one panel per axis, log-scaled, the library and the raw driver on each: where the
two lines run together the library adds a constant; where they part, it adds per row.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from persistence import Filter, Op, Order, Query, create_read_only_facade
from tests.benchmarks.common import Section, Stats, compare, quiet_logging, scratch_database
from tests.benchmarks.datagen import NEEDLE
from tests.benchmarks.pg_suite import per_call_estimate, raw_statement
from tests.benchmarks.report import fmt_time, markdown_table, ratio

PAGE_SIZES = (10, 50, 100, 200, 500)
_FILTERS = (
    Filter("client_id", Op.EQ, 7),
    Filter("status", Op.EQ, "new"),
    Filter("score", Op.GTE, 50),
    Filter("company_name", Op.ICONTAINS, "o"),
)
_RANGE = Filter("id", Op.LT, 2001)


@dataclass
class Point:
    """One measured point: the axis, its x value, the workload and both contenders' times."""

    axis: str
    x: int
    workload: str
    facade: Stats
    raw: Stats

    def as_dict(self) -> dict[str, Any]:
        return {
            "axis": self.axis,
            "x": self.x,
            "workload": self.workload,
            "facade": self.facade.as_dict(),
            "raw": self.raw.as_dict(),
        }


@dataclass
class GrowthReport:
    """The report's section, the points and where the plot went (``None`` without matplotlib)."""

    section: Section
    points: list[Point] = field(default_factory=list)
    plot: Path | None = None


def _time(dsn: str, query: Query, *, quick: bool) -> tuple[Stats, Stats]:
    """``facade.read`` of ``query`` against raw psycopg running the backend's statement."""
    with (
        create_read_only_facade(kind="postgres", dsn=dsn) as facade,
        psycopg.connect(dsn, autocommit=True) as conn,
    ):
        statement, params = raw_statement(query, conn)
        cursor = conn.cursor()

        def raw() -> object:
            return cursor.execute(statement, params).fetchall()

        def read() -> object:
            return facade.read(
                query.table, query.filters, order=query.order, limit=query.limit or 50
            )

        expected = read().total_count  # type: ignore[attr-defined]
        got = raw()
        if int(got[0][0]) != expected:  # type: ignore[index]
            raise AssertionError(f"raw counted {got[0][0]}, the facade {expected}")  # type: ignore[index]
        slowest = max(per_call_estimate(read), per_call_estimate(raw))
        number = max(1, min(20, int(0.002 / max(slowest, 1e-6))))
        budget = 0.3 if quick else 1.5
        rounds = max(5, min(61, int(budget / (2 * slowest * number))))
        stats = compare({"facade": read, "raw": raw}, rounds=rounds, number=number, warmup=2)
    return stats["facade"], stats["raw"]


def _query(filters: Sequence[Filter], *, limit: int = 50, order: Sequence[str] = ()) -> Query:
    return Query("leads", tuple(filters), order=tuple(Order(c) for c in order), limit=limit)


def measure(sizes: Sequence[int], *, quick: bool, plot: Path | None = None) -> GrowthReport:
    """Every point of the three curves; the plot written to ``plot`` when given."""
    report = GrowthReport(
        Section(
            "Growth: table size, page size, number of filters (PostgreSQL)",
            "`facade.read` (page + total in one statement) against raw psycopg running the same "
            "statement, per point. *Added* is the library's cost on top of the driver: flat "
            "where it is a constant per call, growing where it is a cost per row returned.",
            ("Curve", "x", "Workload", "raw psycopg", "facade.read", "Added", "Ratio"),
        )
    )
    largest = max(sizes)
    for rows in sorted(sizes):
        with scratch_database(rows) as db:
            lookups = {
                "id lookup (primary key)": _query([Filter("id", Op.EQ, rows // 2 + 1)]),
                "icontains, no index": _query([Filter("company_name", Op.ICONTAINS, NEEDLE)]),
            }
            for workload, query in lookups.items():
                report.points.append(
                    Point("table size", rows, workload, *_time(db.reader_dsn, query, quick=quick))
                )
            if rows != largest:
                continue
            for size in PAGE_SIZES:
                query = _query([_RANGE], limit=size, order=["id"])
                facade, raw = _time(db.reader_dsn, query, quick=quick)
                report.points.append(Point("page size", size, "id < 2001, by id", facade, raw))
            for count in range(1, len(_FILTERS) + 1):
                facade, raw = _time(db.reader_dsn, _query(_FILTERS[:count]), quick=quick)
                report.points.append(Point("filters", count, f"{largest:,} leads", facade, raw))
    for point in report.points:
        report.section.rows.append(
            (
                point.axis,
                f"{point.x:,}",
                point.workload,
                fmt_time(point.raw.median),
                fmt_time(point.facade.median),
                fmt_time(point.facade.median - point.raw.median),
                ratio(point.facade, point.raw),
            )
        )
    report.section.notes += _notes(report.points)
    if plot is not None:
        report.plot = draw(report.points, plot)
        if report.plot is not None:
            report.section.notes.append(f"![Growth curves]({report.plot.name})")
    return report


def _notes(points: Sequence[Point]) -> list[str]:
    """Per curve: raw and added cost at its first and last point (no extrapolation)."""
    by_curve: dict[tuple[str, str], list[Point]] = {}
    for point in points:
        by_curve.setdefault((point.axis, point.workload), []).append(point)
    notes = []
    for (axis, workload), curve in by_curve.items():
        if len(curve) < 2:
            continue
        first, last = curve[0], curve[-1]
        grew = last.raw.median / first.raw.median
        added = (first.facade.median - first.raw.median, last.facade.median - last.raw.median)
        notes.append(
            f"*{axis}, {workload}*, {first.x:,} → {last.x:,}: raw psycopg "
            f"{fmt_time(first.raw.median)} → {fmt_time(last.raw.median)} ({grew:.1f}×); the "
            f"library's added cost {fmt_time(added[0])} → {fmt_time(added[1])}."
        )
    notes.append(
        "Reading the plot (log scales): a flat line does not grow with that axis; where the "
        "library's line runs parallel to the raw driver's, it adds a constant per call; where "
        "the two part, it adds a cost per row or per condition."
    )
    return notes


def draw(points: Sequence[Point], path: Path) -> Path | None:
    """Three log-scaled panels (table size, page size, filters) as a PNG; ``None`` without
    matplotlib."""
    try:
        import matplotlib
        import matplotlib.ticker

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    axes_order = ("table size", "page size", "filters")
    labels = {"table size": "leads", "page size": "rows per page", "filters": "filters and-ed"}
    figure, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    for axis, ax in zip(axes_order, axes, strict=True):
        curves: dict[str, list[Point]] = {}
        for point in points:
            if point.axis == axis:
                curves.setdefault(point.workload, []).append(point)
        for index, (workload, curve) in enumerate(curves.items()):
            xs = [p.x for p in curve]
            color = f"C{index}"
            ax.plot(
                xs,
                [p.raw.median * 1e3 for p in curve],
                "--o",
                color=color,
                alpha=0.6,
                label=f"raw psycopg, {workload}",
            )
            ax.plot(
                xs,
                [p.facade.median * 1e3 for p in curve],
                "-s",
                color=color,
                label=f"facade.read, {workload}",
            )
        if axis == "filters":
            ax.set_xticks(sorted({p.x for c in curves.values() for p in c}))
        else:
            ax.set_xscale("log")
        ax.set_yscale("log")
        plain = matplotlib.ticker.FuncFormatter(lambda value, _: f"{value:g}")
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel(labels[axis])
        ax.set_ylabel("ms per call (median)")
        ax.set_title(f"cost vs {axis}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, print the table and write the plot."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="10000,100000", help="leads, comma-separated")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--plot", type=Path, default=Path("benchmarks-growth.png"))
    args = parser.parse_args(argv)
    quiet_logging()
    report = measure([int(s) for s in args.sizes.split(",")], quick=args.quick, plot=args.plot)
    print("\n".join(markdown_table(report.section.columns, report.section.rows)))
    for note in report.section.notes:
        print(f"\n{note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
