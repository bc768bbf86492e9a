"""Micro-benchmarks of the retrieval pipeline's hot paths; prints medians.

Run: ``python -m tests.benchmarks.rag_micro`` (``--quick`` for fewer repetitions).

- rule parser: median time per query over the labelled set;
- ``run()`` on a cache hit, for 1 and for 50 matching rows (Envelope and ``return_json=True``);
- envelope with provenance for 500 rows (records + hashes + models), and its JSON form.

structlog is set to drop debug events first, as an application would in production: the
library's step events are debug-level, and rendering them is the application's cost, not ours.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import structlog

from persistence import MemoryStore, create_persistence_agent
from rag_agent import RAGSettings, create_rag_agent, parse_filters_from_text
from rag_agent.envelope import Envelope, Metadata, build_records

LABELLED = Path(__file__).resolve().parents[1] / "data" / "labelled_queries.jsonl"


def _median_us(func: Callable[[], object], *, number: int, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            func()
        samples.append((time.perf_counter() - start) / number * 1e6)
    return statistics.median(samples)


def _lead(i: int, now: dt.datetime) -> dict[str, object]:
    return {
        "client_id": 1 + i % 3,
        "campaign_id": 10 + i % 5,
        "email": f"user{i}@acme.io",
        "first_name": "Ada",
        "last_name": f"Lovelace {i}",
        "company_name": "Acme Inc" if i % 2 else "Acme Europe GmbH",
        "title": "CTO",
        "phone": None,
        "status": "new",
        "score": i % 100,
        "created_at": now,
    }


def main() -> None:
    """Measure and print the medians."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    repeat = 5 if args.quick else 15
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))

    texts = [json.loads(line)["text"] for line in LABELLED.open(encoding="utf-8")]
    per_query = statistics.median(
        _median_us(lambda t=text: parse_filters_from_text(t), number=200, repeat=repeat)
        for text in texts
    )
    print(f"parse_filters_from_text: median {per_query:.1f} us/query over {len(texts)} queries")

    now = dt.datetime.now(dt.UTC)
    store = MemoryStore()
    writer = create_persistence_agent(kind="memory", store=store)
    writer.batch("leads", [_lead(i, now) for i in range(60)])
    writer.write("leads", {**_lead(999, now), "email": "solo@globex.io", "company_name": "Globex"})
    agent = create_rag_agent(kind="memory", store=store, settings=RAGSettings())
    for text, rows in (("leads at globex", 1), ("leads at acme", 50)):
        agent.run(text)  # fill the cache
        assert agent.run(text).metadata.cache == "hit"
        hit = _median_us(lambda t=text: agent.run(t), number=500, repeat=repeat)
        hit_json = _median_us(
            lambda t=text: agent.run(t, return_json=True), number=200, repeat=repeat
        )
        print(
            f"run() cache hit, {rows:>2} row(s): median {hit:.1f} us (Envelope), "
            f"{hit_json:.1f} us (return_json=True)"
        )

    rows500 = [{"id": i, **_lead(i, now)} for i in range(500)]

    def envelope() -> Envelope:
        records = build_records(rows500, source="persistence.leads", retrieved_at=now)
        metadata = Metadata(
            source="persistence.leads", query_filters=None, retrieved_at=now, total_count=500
        )
        return Envelope(metadata=metadata, records=records)

    built = _median_us(envelope, number=5, repeat=repeat) / 1000
    dumped = _median_us(envelope().to_json, number=5, repeat=repeat) / 1000
    print(f"envelope with provenance, 500 rows: median {built:.2f} ms (+ {dumped:.2f} ms to_json)")


if __name__ == "__main__":
    main()
