"""Relevance of hybrid search against LangChain's ``PGVectorStore``, in the bench run: P@10 on
the labelled set (:mod:`tests.data.relevance`) of both, on one scratch database of an embedded
PostgreSQL 18 + pgvector, with the same vectors.

    python -m tests.benchmarks.search_relevance [--quick]

Full: all 572 queries; ``--quick``: every 8th query of each type (73).
"""

from __future__ import annotations

import argparse
import atexit
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from tests.benchmarks.common import Section

TYPES_SHOWN = ("paraphrase", "misleading", "identifier", "typo", "framed", "condition")


def _queries(step: int) -> list[Mapping[str, Any]]:
    from tests.data.search_queries import load

    by_type: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for query in load():
        by_type[query["type"]].append(query)
    return [q for group in by_type.values() for q in group[::step]]


def measure(*, quick: bool) -> tuple[Section, dict[str, Any]]:
    """Hybrid P@10 of ``facade.search`` and of the peer, per query type and overall."""
    from tests.data.relevance import DEPTH, default_embeddings, evaluate, facade_ranker
    from tests.data.relevance_peer import with_peer
    from tests.data.relevance_postgres import _drop
    from tests.data.search_corpus import build
    from tests.support.pgvector import embedded_server

    corpus, queries, embeddings = build(), _queries(8 if quick else 1), default_embeddings()
    with embedded_server() as uri:
        facade, peer, close = with_peer(corpus, embeddings, uri, queries, DEPTH)
        # The scratch database is dropped here, while the server runs, not at exit.
        atexit.unregister(_drop)
        try:
            with facade:
                # Each ranker is asked for its hybrid ranking (the key is the mode).
                found = {
                    name: evaluate(corpus, queries, {"hybrid": rank})["hybrid"]
                    for name, rank in (("facade", facade_ranker(facade)), ("peer", peer))
                }
        finally:
            close()
            _drop(uri, _scratch_name())
    return _section(found, queries, quick)


def _scratch_name() -> str:
    import os

    return f"relevance_{os.getpid()}"


def _section(
    found: Mapping[str, Mapping[str, Any]], queries: Sequence[Mapping[str, Any]], quick: bool
) -> tuple[Section, dict[str, Any]]:
    counts: dict[str, int] = defaultdict(int)
    for query in queries:
        counts[query["type"]] += 1
    ours, peer = found["facade"], found["peer"]
    section = Section(
        "Hybrid search relevance: library vs LangChain PGVectorStore",
        f"P@10 on the labelled set ({len(queries)} queries"
        + (", every 8th of each type" if quick else "")
        + ') over the relevance corpus, `mode="hybrid"` against `PGVectorStore` with its '
        "`HybridSearchConfig`, k = 100, on one scratch database of an embedded PostgreSQL 18 "
        "+ pgvector: the same rows, vectors (the offline default model) and HNSW "
        "(`tests/data/relevance_peer.py`; per mode and type: `docs/relevance.md`).",
        ("Query type", "n", "facade.search P@10", "PGVectorStore P@10", "Difference"),
    )
    for kind in (*[t for t in TYPES_SHOWN if t in counts], "keyword", "all"):
        if kind != "all" and kind not in counts:
            continue
        n = len(queries) if kind == "all" else counts[kind]
        a, b = ours[kind].precision, peer[kind].precision
        label = f"**{kind}**" if kind == "all" else kind
        section.rows.append((label, n, f"{a:.3f}", f"{b:.3f}", f"{a - b:+.3f}"))
    a, b = ours["all"].precision, peer["all"].precision
    section.notes.append(
        f"Overall the library's hybrid P@10 is {a:.3f} against the peer's {b:.3f}: "
        + ("the library is more relevant." if a > b else "**the peer is more relevant**.")
    )
    figures = {
        "queries": len(queries),
        "p_at_10": {
            name: {kind: score.precision for kind, score in by_kind.items()}
            for name, by_kind in found.items()
        },
    }
    return section, figures


def main(argv: list[str] | None = None) -> int:
    from tests.benchmarks.common import quiet_logging
    from tests.benchmarks.report import markdown_table

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    quiet_logging()
    section, _ = measure(quick=args.quick)
    print("\n".join(markdown_table(section.columns, section.rows)))
    for note in section.notes:
        print(f"\n{note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
