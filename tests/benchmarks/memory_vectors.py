"""The memory backend's vector memory: what its row vectors take per million rows.

    python -m tests.benchmarks.memory_vectors --rows 100000

A fresh Python process loads ``rows`` inquiries (the search bench's texts) into a
``MemoryStore`` and runs one semantic ``facade.search`` with the offline default model: that
search embeds every row into the store's vector cache. *The cache's objects* are counted with
``sys.getsizeof`` (they agree with ``tracemalloc``, which would make embedding thirty times
slower). The other figures are the process's resident memory (``/proc/self/statm``; freed heap
handed back with glibc's ``malloc_trim`` before each reading): *kept* is the growth still
resident after the search (the cache: the table's single-precision matrix, its row id → slot
map and text hashes; and the heap's fragments), *peak* the growth of the resident high-water
mark (``ru_maxrss``) during it (one batch of the model's output, ``EMBED_BATCH`` rows, and one
chunk of rows whose cosines are computed at once). Both are scaled linearly to a million rows;
the cache keeps at most ``MAX_VECTOR_BYTES`` of vectors per store. Then the later searches: the
fastest of three with other texts, and one after 100 rows were changed (only they are embedded
again).
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import gc
import json
import os
import random
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from tests.benchmarks.common import Section
from tests.benchmarks.report import fmt_time


@dataclass(frozen=True)
class VectorMemory:
    rows: int
    cached: int
    cache_bytes: int
    kept_bytes: int
    peak_bytes: int
    first_s: float
    warm_s: float
    changed_s: float
    cap: int

    def per_million_mib(self, value: int) -> float:
        return value / self.rows * 1e6 / 2**20


#: Topic words and filler of the synthetic rows (the vectors' memory, not their relevance, is
#: measured here).
_TOPICS = [
    "refund invoice charge payment billing overcharged",
    "login password locked signin reset twofactor",
    "delivery parcel courier delayed tracking shipment",
    "cancel subscription stop paying terminate contract downgrade",
    "feature request roadmap integration export dashboard",
]
_FILLER = ["please", "thanks", "hello", "regards", "team", "question", "update", "kindly"]


def _rows(rows: int) -> list[dict[str, Any]]:
    rng = random.Random(1)
    out = []
    for i in range(rows):
        words = rng.choice(_TOPICS).split()
        subject = " ".join(rng.sample(words, 2))
        body = " ".join(rng.sample(words, 3) + rng.sample(_FILLER, 6))
        out.append({"id": i + 1, "subject": subject, "body": body})
    return out


def _resident() -> int:
    """Resident bytes, after handing freed heap back to the system where glibc allows it."""
    gc.collect()
    name = ctypes.util.find_library("c")
    if name:
        trim = getattr(ctypes.CDLL(name), "malloc_trim", None)
        if trim is not None:
            trim(0)
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _cache_bytes(cache: Any, table: str) -> tuple[int, int]:
    """The rows ``cache`` holds for ``table`` and their objects, counted with
    ``sys.getsizeof``: the matrix (its allocated capacity), the row id → slot map and its slot
    numbers, the slot → row id list, the text hashes (the row ids are shared with the store)."""
    rows = total = 0
    for key, matrix in cache._matrices.items():
        if key[0] != table:
            continue
        rows += len(matrix)
        total += matrix.values.nbytes + sys.getsizeof(matrix.slots) + sys.getsizeof(matrix.ids)
        total += sum(sys.getsizeof(slot) for slot in matrix.slots.values())
        total += sys.getsizeof(matrix.digests) + sum(map(sys.getsizeof, matrix.digests))
        total += sys.getsizeof(matrix.blank) + sys.getsizeof(matrix.free)
    return rows, total


def _high_water() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _measure_here(rows: int) -> dict[str, Any]:
    from persistence import MemoryStore, create_persistence_agent, create_read_only_facade
    from persistence.backends.memory.vectors import MAX_VECTOR_BYTES, vector_cache
    from tests.benchmarks.common import quiet_logging
    from tests.benchmarks.pg_search import bench_embeddings

    quiet_logging()
    embeddings, _ = bench_embeddings()
    store = MemoryStore()
    store.insert("inquiries", _rows(rows))
    store.insert("messages", [{"id": 1, "body": "warm every code path once"}])
    facade = create_read_only_facade("memory", store=store, embeddings=embeddings)
    # Every module and code path of a semantic search loaded, on another table.
    facade.search("messages", "warm", k=1, mode="semantic")
    before, high = _resident(), _high_water()
    t0 = time.perf_counter()
    facade.search("inquiries", "refund for an overcharged invoice", k=10, mode="semantic")
    first = time.perf_counter() - t0
    peak = _high_water() - max(before, high)
    kept = _resident() - before
    cached, cache_bytes = _cache_bytes(vector_cache(store), "inquiries")
    warm = []
    for text in ("parcel delayed courier", "cannot sign in", "cancel my plan"):
        t0 = time.perf_counter()
        facade.search("inquiries", text, k=10, mode="semantic")
        warm.append(time.perf_counter() - t0)
    writer = create_persistence_agent("memory", store=store)
    changed = [{"id": i, "body": f"changed text {i}"} for i in range(1, rows + 1, rows // 100 or 1)]
    writer.upsert("inquiries", changed)
    t0 = time.perf_counter()
    facade.search("inquiries", "parcel delayed courier", k=10, mode="semantic")
    after_write = time.perf_counter() - t0
    dim = len(embeddings.embed_query("dimension"))
    return {
        "rows": rows,
        "cached": cached,
        "cache_bytes": cache_bytes,
        "kept_bytes": kept,
        "peak_bytes": max(peak, kept),
        "first_s": first,
        "warm_s": min(warm),
        "changed_s": after_write,
        "cap": MAX_VECTOR_BYTES // (dim * 4),
    }


def measure(rows: int) -> VectorMemory:
    """Measure ``rows`` inquiries in a fresh Python process."""
    command = [sys.executable, "-m", "tests.benchmarks.memory_vectors", "--child", "--rows"]
    done = subprocess.run([*command, str(rows)], capture_output=True, text=True, check=True)
    return VectorMemory(**json.loads(done.stdout.strip().splitlines()[-1]))


def section(point: VectorMemory) -> Section:
    """The report's section for one measured size."""
    scaled = f"{point.rows:,} rows, scaled to 1,000,000"
    return Section(
        "Memory backend: vector memory per million rows",
        f"One semantic `facade.search` over {point.rows:,} inquiries in a fresh process embeds "
        "every row (the offline default model, 256 dimensions) into the store's vector cache, "
        "in batches. *The cache's objects*: `sys.getsizeof` of the table's single-precision "
        "matrix (1 KiB a row at 256 dimensions), its row id → slot map and its text hashes. "
        "*Resident*: the process's memory (freed heap handed back with `malloc_trim` before "
        "each reading): what stays after the search (the cache and the heap's fragments), and "
        "the high-water mark's growth during it (one batch of the model's output, one chunk of "
        "cosines). Measured at this size and scaled linearly.",
        ("Figure", "Measured", "Per million rows"),
        [
            (
                "The cache's objects (counted)",
                f"{point.cache_bytes / 2**20:,.1f} MiB",
                f"{point.per_million_mib(point.cache_bytes):,.0f} MiB ({scaled})",
            ),
            (
                "Resident growth kept after the search",
                f"{point.kept_bytes / 2**20:,.1f} MiB",
                f"{point.per_million_mib(point.kept_bytes):,.0f} MiB ({scaled})",
            ),
            (
                "Resident peak growth during the search",
                f"{point.peak_bytes / 2**20:,.1f} MiB",
                f"{point.per_million_mib(point.peak_bytes):,.0f} MiB ({scaled})",
            ),
            ("Rows cached", f"{point.cached:,}", "—"),
            ("First search (embeds every row)", fmt_time(point.first_s), "—"),
            ("Next search (cached vectors; fastest of 3)", fmt_time(point.warm_s), "—"),
            ("Search after 100 rows changed (embeds them)", fmt_time(point.changed_s), "—"),
        ],
        [
            f"The cache keeps at most {point.cap:,} vectors of this dimension per store "
            "(512 MiB; the least recently searched table goes first): beyond that many rows in "
            "one table, the figure per million rows is never reached; instead each semantic "
            "search embeds the rows that do not fit again, batch by batch, without keeping "
            "them. A table that large belongs on PostgreSQL with pgvector."
        ],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_measure_here(args.rows)))
        return 0
    report = section(measure(args.rows))
    for row in report.rows:
        print(" | ".join(str(cell) for cell in row))
    for note in report.notes:
        print(note)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
