"""Memory backend at scale: the store's RSS per million leads, lookups by id and email, a scan.

Run alone: ``python -m tests.benchmarks.memory_scale [--rows 100000] [--quick]``. Each size runs
in a fresh subprocess, so the resident set it reports is the store's alone: leads are inserted in
batches of 10,000 (the input never holds the whole table), garbage is collected, and the growth
of the process's *current* RSS (``/proc/self/statm``) is what the store keeps.

Lookups go through ``facade.read`` (one row by ``id``; one by ``email`` with ``ieq``, the
case-insensitive equality an agent asks for) against a plain ``dict`` lookup plus the copy of the
row, built after the RSS is taken and timed in the same run. The ``icontains`` page + count is
the full scan of :mod:`tests.benchmarks.memory_icontains`, there to show the compact store does
not slow scans down.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from persistence import Filter, MemoryStore, Op, create_read_only_facade
from tests.benchmarks.common import Stats, compare
from tests.benchmarks.datagen import NEEDLE, lead_dicts

BATCH = 10_000
LOOKUPS = 200  # distinct keys per sample: no single hot key


@dataclass(frozen=True)
class ScalePoint:
    """One size: the store's RSS and the lookup and scan times."""

    rows: int
    load_seconds: float
    store_mib: float
    by_id: Stats
    by_id_dict: Stats
    by_email: Stats
    by_email_dict: Stats
    icontains: Stats

    @property
    def mib_per_million(self) -> float:
        return self.store_mib / self.rows * 1e6


def _rss_mib() -> float:
    with open("/proc/self/statm", encoding="ascii") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _load(rows: int) -> MemoryStore:
    store = MemoryStore()
    batch: list[dict[str, Any]] = []
    for lead in lead_dicts(rows):
        batch.append(lead)
        if len(batch) == BATCH:
            store.insert("leads", batch)
            batch = []
    if batch:
        store.insert("leads", batch)
    return store


def _measure_here(rows: int, rounds: int, lookups: int = LOOKUPS) -> dict[str, Any]:
    """The figures of one size, measured in this process (call it in a fresh one)."""
    gc.collect()
    before = _rss_mib()
    start = time.perf_counter()
    store = _load(rows)
    load_seconds = time.perf_counter() - start
    gc.collect()
    store_mib = _rss_mib() - before
    facade = create_read_only_facade(kind="memory", store=store)
    facade.read("leads", [Filter("id", Op.EQ, 1)])  # builds the id-ordered snapshot once
    # The baselines, built only now: they are not part of the store's RSS.
    plain = {row["id"]: row for row in store.rows("leads")}
    plain_email = {row["email"].lower(): row for row in plain.values()}
    rng = random.Random(3)
    ids = [rng.randint(1, rows) for _ in range(lookups)]
    emails = [plain[i]["email"].upper() for i in ids]
    assert facade.read("leads", [Filter("email", Op.IEQ, emails[0])]).rows[0]["id"] == ids[0]

    def by_id() -> None:
        for key in ids:
            facade.read("leads", [Filter("id", Op.EQ, key)])

    def by_id_dict() -> None:
        for key in ids:
            dict(plain[key])

    def by_email() -> None:
        for key in emails:
            facade.read("leads", [Filter("email", Op.IEQ, key)])

    def by_email_dict() -> None:
        for key in emails:
            dict(plain_email[key.lower()])

    timed = compare(
        {"id": by_id, "id dict": by_id_dict, "email": by_email, "email dict": by_email_dict},
        rounds=rounds,
        warmup=1,
    )
    needle = [Filter("company_name", Op.ICONTAINS, NEEDLE)]
    scan = compare(
        {"icontains": lambda: facade.read("leads", needle, limit=50)},
        rounds=max(3, rounds // 3),
        warmup=1,
    )
    per = {name: {"samples": _per_call(stats, len(ids))} for name, stats in timed.items()}
    return {
        "rows": rows,
        "load_seconds": load_seconds,
        "store_mib": store_mib,
        **per,
        "icontains": {"samples": scan["icontains"].samples},
    }


def _per_call(stats: Stats, calls: int) -> tuple[float, ...]:
    return tuple(s / calls for s in stats.samples)


def measure(rows: int, *, rounds: int, lookups: int = LOOKUPS) -> ScalePoint:
    """Measure ``rows`` leads in a fresh Python process (a clean resident set); each sample
    is the mean of ``lookups`` lookups of distinct keys."""
    command = [
        sys.executable,
        "-m",
        "tests.benchmarks.memory_scale",
        "--child",
        "--rows",
        str(rows),
    ]
    command += ["--rounds", str(rounds), "--lookups", str(lookups)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    figures = json.loads(done.stdout.strip().splitlines()[-1])

    def stats(name: str) -> Stats:
        return Stats(tuple(figures[name]["samples"]))

    return ScalePoint(
        rows=figures["rows"],
        load_seconds=figures["load_seconds"],
        store_mib=figures["store_mib"],
        by_id=stats("id"),
        by_id_dict=stats("id dict"),
        by_email=stats("email"),
        by_email_dict=stats("email dict"),
        icontains=stats("icontains"),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--lookups", type=int, default=LOOKUPS, help="distinct keys per sample")
    parser.add_argument("--quick", action="store_true", help="100k leads, few rounds")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.rows, args.rounds = 100_000, 7
    if args.child:
        print(json.dumps(_measure_here(args.rows, args.rounds, args.lookups)))
        return
    point = measure(args.rows, rounds=args.rounds, lookups=args.lookups)
    print(f"rows={point.rows:,} load {point.load_seconds:.1f} s")
    print(
        f"store RSS {point.store_mib:,.0f} MiB ({point.mib_per_million:,.0f} MiB per million leads)"
    )
    for label, ours, base in (
        ("id", point.by_id, point.by_id_dict),
        ("email ieq", point.by_email, point.by_email_dict),
    ):
        print(
            f"lookup by {label}: facade.read {ours.median * 1e6:,.1f} µs, "
            f"plain dict {base.median * 1e6:,.2f} µs ({ours.median / base.median:,.0f}x)"
        )
    print(f"icontains page + count: {point.icontains.median * 1e3:,.1f} ms")


if __name__ == "__main__":
    main()
