"""Memory backend: an ``icontains`` page of 50 plus its total count over N leads — the growth curve.

Run alone: ``python -m tests.benchmarks.memory_icontains [--rows 100000]``. The same scan as a plain
list comprehension is the baseline, measured in the same run. Peak memory per call comes from
``tracemalloc`` in a separate pass (tracing slows Python down, so it never overlaps the timing).
"""

from __future__ import annotations

import argparse
import resource
import time
import tracemalloc
from dataclasses import dataclass

from persistence import Filter, MemoryStore, Op, create_read_only_facade
from tests.benchmarks.common import Stats, compare
from tests.benchmarks.datagen import NEEDLE, memory_store

PAGE = 50


@dataclass(frozen=True)
class GrowthPoint:
    """One size of the growth curve."""

    rows: int
    load_seconds: float
    store_mib: float  # growth of the process's peak RSS while loading
    matches: int
    facade: Stats
    baseline: Stats
    peak_kib: float  # tracemalloc peak during one facade.read


def _max_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def measure(rows: int, *, rounds: int) -> GrowthPoint:
    """Load ``rows`` leads into a new store and time an icontains page + count over them."""
    rss_before = _max_rss_mib()
    start = time.perf_counter()
    store = memory_store(rows)
    load_seconds = time.perf_counter() - start
    return _measure_store(store, rows, load_seconds, _max_rss_mib() - rss_before, rounds)


def _measure_store(
    store: MemoryStore, rows: int, load_seconds: float, store_mib: float, rounds: int
) -> GrowthPoint:
    facade = create_read_only_facade(kind="memory", store=store)
    flt = [Filter("company_name", Op.ICONTAINS, NEEDLE)]
    snapshot = store.rows("leads")

    def ours() -> object:
        return facade.read("leads", flt, limit=PAGE)

    def baseline() -> object:
        matched = [r for r in snapshot if NEEDLE in (r["company_name"] or "").lower()]
        return matched[:PAGE], len(matched)

    page = facade.read("leads", flt, limit=PAGE)
    assert page.total_count == len(_matches(snapshot)), "the baseline finds the same rows"
    stats = compare(
        {"facade.read": ours, "list comprehension": baseline},
        rounds=rounds,
        number=max(1, 50_000 // max(rows, 1)),
    )
    tracemalloc.start()
    try:
        ours()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return GrowthPoint(
        rows,
        load_seconds,
        store_mib,
        page.total_count,
        stats["facade.read"],
        stats["list comprehension"],
        peak / 1024,
    )


def _matches(snapshot: list[dict[str, object]]) -> list[dict[str, object]]:
    return [r for r in snapshot if NEEDLE in str(r["company_name"] or "").lower()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    point = measure(args.rows, rounds=args.rounds)
    print(f"rows={point.rows} matches={point.matches} load {point.load_seconds:.1f} s")
    print(f"facade.read icontains page+count: median {point.facade.median * 1e3:.2f} ms")
    print(f"plain list comprehension:         median {point.baseline.median * 1e3:.2f} ms")
    print(
        f"ratio {point.facade.median / point.baseline.median:.2f}x, peak {point.peak_kib:.0f} KiB"
    )


if __name__ == "__main__":
    main()
