"""Memory backend: an ``icontains`` page of 50 plus its total count over N leads.

Run: ``python -m tests.benchmarks.memory_icontains [--rows 100000] [--repeat 15]``.
Prints the median and spread, and the same scan as a plain list comprehension (baseline) so the
figure is also a ratio measured in the same run.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from persistence import Filter, MemoryStore, Op, create_persistence_agent, create_read_only_facade

COMPANIES = ["Acme Inc.", "Globex", "Initech", "Umbrella", "Hooli", "Stark Industries", "Wayne"]


def make_store(rows: int, seed: int = 7) -> MemoryStore:
    rng = random.Random(seed)
    store = MemoryStore()
    leads = [
        {
            "email": f"user{i}@example.com",
            "company_name": f"{rng.choice(COMPANIES)} {rng.randint(1, 500)}",
            "score": rng.randint(0, 100),
            "status": rng.choice(["new", "won", "lost", None]),
        }
        for i in range(rows)
    ]
    create_persistence_agent(kind="memory", store=store).batch("leads", leads)
    return store


def median_ms(fn: object, repeat: int) -> tuple[float, float]:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples), statistics.pstdev(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    store = make_store(args.rows)
    facade = create_read_only_facade(kind="memory", store=store)
    flt = [Filter("company_name", Op.ICONTAINS, "acme")]
    rows = store.rows("leads")

    def ours() -> None:
        facade.read("leads", flt, limit=50)

    def baseline() -> None:
        matched = [r for r in rows if "acme" in (r["company_name"] or "").lower()]
        _ = (matched[:50], len(matched))

    ours_ms, ours_sd = median_ms(ours, args.repeat)
    base_ms, base_sd = median_ms(baseline, args.repeat)
    page = facade.read("leads", flt, limit=50)
    print(f"rows={args.rows} matches={page.total_count} page={len(page.rows)}")
    print(f"facade.read icontains page+count: median {ours_ms:.2f} ms (sd {ours_sd:.2f})")
    print(f"plain list comprehension:         median {base_ms:.2f} ms (sd {base_sd:.2f})")
    print(f"ratio: {ours_ms / base_ms:.2f}x")


if __name__ == "__main__":
    main()
