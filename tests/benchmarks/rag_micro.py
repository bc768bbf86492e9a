"""Micro-benchmarks of the retrieval pipeline's hot paths, no database involved.

Run alone: ``python -m tests.benchmarks.rag_micro`` (``--quick`` for fewer rounds).

- rule parser: median time per query over the labelled set (the parser itself, not the agent's
  memoised wrapper);
- envelope with provenance (records, hashes, models, then JSON) for 50 and 500 rows, against a
  plain ``json.dumps`` of the same rows;
- ``run()`` on the memory backend: a cache hit and a miss;
- the rule parser on the labelled questions of both schemas (:mod:`tests.data.schema_questions`),
  each schema's questions read with the vocabulary learned from its data, as ``run()`` reads
  them (process CPU time per question).
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from persistence import MemoryStore, create_persistence_agent
from rag_agent import RAGSettings, Understanding, create_rag_agent, understand
from rag_agent.envelope import Envelope, Metadata, build_records
from tests.benchmarks.common import Stats, compare, per_call, quiet_logging
from tests.benchmarks.datagen import lead_dicts

LABELLED = Path(__file__).resolve().parents[1] / "data" / "labelled_queries.jsonl"
#: The clock the labelled queries are read at (their dates are read, not timed).
NOW = dt.datetime(2025, 6, 18, 12, tzinfo=dt.UTC)


def parse(text: str) -> Understanding:
    """The rule parser on one labelled query, on ``leads`` (the table they ask about)."""
    return understand(text, table="leads", now=NOW)


def labelled_texts() -> list[str]:
    """The questions of the labelled query set."""
    with LABELLED.open(encoding="utf-8") as lines:
        return [json.loads(line)["text"] for line in lines if line.strip()]


def parser_per_query(*, rounds: int) -> tuple[Stats, int]:
    """Per query: the median over rounds of the mean time to parse one query; and the count.

    A sample is one pass over the whole labelled set divided by its length, so the figure is the
    mean cost of a realistic mix of questions.
    """
    texts = labelled_texts()

    def one_pass() -> None:
        for text in texts:
            parse(text)

    samples = tuple(per_call(one_pass, number=1) / len(texts) for _ in range(rounds))
    return Stats(samples), len(texts)


def parser_cpu_per_query(*, rounds: int) -> Stats:
    """As :func:`parser_per_query`, in process CPU time (less sensitive to a shared machine)."""
    texts = labelled_texts()
    samples = []
    for _ in range(rounds):
        start = time.process_time()
        for text in texts:
            parse(text)
        samples.append((time.process_time() - start) / len(texts))
    return Stats(tuple(samples))


def parser_slowest(*, number: int = 50) -> tuple[str, float]:
    """The single slowest labelled query and its median seconds (where the tail is)."""
    timings = []
    for text in labelled_texts():
        call = functools.partial(parse, text)
        times = [per_call(call, number=number) for _ in range(5)]
        timings.append((statistics.median(times), text))
    seconds, text = max(timings)
    return text, seconds


def schema_vocabularies() -> dict[str, Any]:
    """schema -> (its labelled questions, the vocabulary learned from its data on memory)."""
    from rag_agent.understanding.rules.lexicon import lexicon_of  # noqa: F401 (warms imports)
    from tests.data.schema_accuracy import build_agents
    from tests.data.schema_questions import SCHEMAS, questions

    chosen = questions()
    with build_agents("memory") as agents:
        return {
            schema: (
                [q for q in chosen if q.schema == schema],
                agents[schema].facade.vocabulary(),
            )
            for schema in SCHEMAS
        }


def schema_parser_per_question(*, rounds: int) -> dict[str, Stats]:
    """Per schema: the median over rounds of the mean CPU time of ``understand`` per labelled
    question, read with that schema's learned vocabulary and the question's given table.

    A sample is one pass over the schema's questions (process CPU time, less sensitive to a
    shared machine), divided by their number; the schemas alternate round by round.
    """
    from rag_agent.understanding.rules import understand
    from tests.data.schema_questions import NOW

    material = schema_vocabularies()
    samples: dict[str, list[float]] = {schema: [] for schema in material}
    for questions_, vocabulary in material.values():  # lexicons built before timing
        for question in questions_:
            understand(question.text, table=question.given_table, now=NOW, vocabulary=vocabulary)
    for _ in range(rounds):
        for schema, (questions_, vocabulary) in material.items():
            start = time.process_time()
            for question in questions_:
                understand(
                    question.text, table=question.given_table, now=NOW, vocabulary=vocabulary
                )
            samples[schema].append((time.process_time() - start) / len(questions_))
    return {schema: Stats(tuple(values)) for schema, values in samples.items()}


def envelope_rows(count: int) -> list[dict[str, Any]]:
    """``count`` generated leads, as a backend page would return them."""
    return list(lead_dicts(count))


def build_envelope(rows: list[dict[str, Any]], now: dt.datetime) -> Envelope:
    """Records with provenance (hashes included) and metadata: what ``run()`` builds for a page."""
    records = build_records(rows, source="persistence.leads", retrieved_at=now)
    metadata = Metadata(
        source="persistence.leads", query_filters=None, retrieved_at=now, total_count=len(rows)
    )
    return Envelope(metadata=metadata, records=records)


def envelope_vs_dumps(count: int, *, rounds: int) -> dict[str, Stats]:
    """The envelope built, as ``to_json()`` and as text, vs ``json.dumps(rows, default=str)``."""
    rows = envelope_rows(count)
    now = dt.datetime.now(dt.UTC)
    number = max(1, 2000 // count)

    calls: dict[str, Callable[[], object]] = {
        "json.dumps(rows)": lambda: json.dumps(rows, default=str),
        "envelope built": lambda: build_envelope(rows, now),
        # What run(return_json=True) hands back: a JSON-ready dict.
        "envelope built + to_json": lambda: build_envelope(rows, now).to_json(),
        # The same as text, to set beside json.dumps's text.
        "envelope as JSON text": lambda: json.dumps(build_envelope(rows, now).to_json()),
    }
    return compare(calls, rounds=rounds, number=number)


def memory_cache(*, rounds: int) -> dict[str, Stats]:
    """``run()`` on a memory store of 1000 leads, 50 of them a match: cache hit vs miss."""
    store = MemoryStore()
    writer = create_persistence_agent(kind="memory", store=store)
    writer.batch(
        "leads",
        [
            {**row, "company_name": "Acme Inc"} if row["id"] % 20 == 0 else row
            for row in lead_dicts(1000)
        ],
    )
    agent = create_rag_agent(kind="memory", store=store, settings=RAGSettings())
    text = "leads at Acme"
    agent.run(text)
    assert agent.run(text).metadata.cache == "hit"

    def miss() -> object:
        agent.cache.clear()
        return agent.run(text)

    return compare(
        {"cache hit": lambda: agent.run(text), "cache miss": miss}, rounds=rounds, number=20
    )


def main() -> None:
    """Measure and print the medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    args = parser.parse_args()
    rounds = 5 if args.quick else 15
    quiet_logging()
    stats, count = parser_per_query(rounds=rounds)
    print(f"understand, leads queries: median {stats.median * 1e6:.1f} us/query over {count}")
    cpu = parser_cpu_per_query(rounds=rounds)
    print(f"understand, leads queries: median {cpu.median * 1e6:.1f} us/query CPU (process time)")
    for schema, result in schema_parser_per_question(rounds=rounds).items():
        print(f"understand, {schema} schema (learned vocabulary): {result.median * 1e6:.1f} us")
    for rows in (50, 500):
        for name, result in envelope_vs_dumps(rows, rounds=rounds).items():
            print(f"{rows:>3} rows, {name:26s} median {result.median * 1e3:.3f} ms")
    for name, result in memory_cache(rounds=rounds).items():
        print(f"run() {name}: median {result.median * 1e6:.1f} us")


if __name__ == "__main__":
    main()
