"""Relevance of search on the labelled set: precision@10, nDCG@10 and recall@100 per mode and
query type, as a Markdown table.

    python -m tests.data.relevance [--backend memory|postgres|reference|pgvectorstore]
                                   [--modes hybrid,keyword]
                                   [--types paraphrase,framed] [--limit N | --quick] [--rag]

Every query of ``search_queries.jsonl`` asks ``facade.search(table, search_text, filters=...,
k=100, mode=...)`` over the seeded corpus of :mod:`tests.data.search_corpus`, embedded with the
default offline model (``--backend pgvectorstore``: LangChain's ``PGVectorStore`` instead of
the facade, on the same PostgreSQL and vectors, :mod:`tests.data.relevance_peer`). Relevance
comes from the corpus's topic labels (see :mod:`tests.data.search_queries`), never from what a
search returned.

Precision@10 counts the relevant rows among the first ten out of ``min(10, |relevant|)`` (an
identifier matches one row, so one right row first is a perfect answer); nDCG@10 uses binary
gains; recall@100 is the share of the relevant rows among the first hundred (capped by
``|relevant|`` at 100).
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tests.data.search_corpus import Corpus, build
from tests.data.search_queries import load, relevant_ids

MODES = ("keyword", "semantic", "hybrid")
TYPES = ("keyword", "paraphrase", "misleading", "identifier", "typo", "framed", "condition")
DEPTH = 100

Ranker = Callable[[Mapping[str, Any], str], list[int]]


def precision_at(ranking: Sequence[Any], relevant: set[Any], k: int = 10) -> float:
    """Relevant rows among the first ``k`` of ``ranking``, out of ``min(k, |relevant|)``."""
    if not relevant:
        return 0.0
    hits = sum(1 for key in ranking[:k] if key in relevant)
    return hits / min(k, len(relevant))


def ndcg_at(ranking: Sequence[Any], relevant: set[Any], k: int = 10) -> float:
    """Normalised discounted cumulative gain of the first ``k`` (binary gains)."""
    if not relevant:
        return 0.0
    gain = sum(1 / math.log2(i + 2) for i, key in enumerate(ranking[:k]) if key in relevant)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(k, len(relevant))))
    return gain / ideal


def recall_at(ranking: Sequence[Any], relevant: set[Any], k: int = DEPTH) -> float:
    """Share of the relevant rows among the first ``k``, out of ``min(k, |relevant|)``."""
    if not relevant:
        return 0.0
    return sum(1 for key in ranking[:k] if key in relevant) / min(k, len(relevant))


@dataclass(frozen=True)
class Score:
    precision: float
    ndcg: float
    recall: float


def score(ranking: Sequence[Any], relevant: set[Any]) -> Score:
    return Score(
        precision_at(ranking, relevant), ndcg_at(ranking, relevant), recall_at(ranking, relevant)
    )


def mean(scores: Iterable[Score]) -> Score:
    items = list(scores)
    if not items:
        return Score(math.nan, math.nan, math.nan)
    n = len(items)
    return Score(
        sum(s.precision for s in items) / n,
        sum(s.ndcg for s in items) / n,
        sum(s.recall for s in items) / n,
    )


def default_embeddings() -> Any:
    """The library's offline default model; a local loader of the same bundled files when the
    library does not provide it yet."""
    try:
        from rag_agent.pipeline.embeddings import default_embeddings as library_default
    except ImportError:
        return _BundledWordLlama()
    embeddings = library_default()
    if embeddings is None:
        raise SystemExit("the default embeddings are not installed (the semantic extra)")
    return embeddings


class _BundledWordLlama:
    """wordllama's bundled 256-dimension model, loaded from the installed package only."""

    model_id = "wordllama:l2_supercat_256"

    def __init__(self) -> None:
        import wordllama
        from safetensors import safe_open
        from tokenizers import Tokenizer
        from wordllama.inference import WordLlamaInference

        root = os.path.dirname(wordllama.__file__)
        tokenizer = Tokenizer.from_file(
            os.path.join(root, "tokenizers", "l2_supercat_tokenizer_config.json")
        )
        with safe_open(os.path.join(root, "weights", "l2_supercat_256.safetensors"), "np") as f:
            weights = f.get_tensor("embedding.weight")
        self._model = WordLlamaInference(weights, tokenizer)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [list(map(float, row)) for row in self._model.embed(texts)]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def _filters(query: Mapping[str, Any]) -> list[Any]:
    from persistence import Filter

    out = []
    for column, op, value in query["filters"]:
        if column.endswith("_at") and isinstance(value, str):
            value = dt.datetime.fromisoformat(value)
        out.append(Filter(column, op, value))
    return out


def facade_ranker(facade: Any) -> Ranker:
    """Rankings by ``facade.search``."""

    def rank(query: Mapping[str, Any], mode: str) -> list[int]:
        result = facade.search(
            query["table"], query["search_text"], filters=_filters(query), k=DEPTH, mode=mode
        )
        return [row["id"] for row in result.rows]

    return rank


def reference_ranker(corpus: Corpus, embeddings: Any) -> Ranker:
    """Rankings by the contract computed in the harness (:mod:`tests.data.reference_search`)."""
    from tests.data.reference_search import ReferenceSearch
    from tests.data.search_queries import _meets

    searches = {
        table: ReferenceSearch(corpus, table, embeddings) for table in ("inquiries", "messages")
    }

    def rank(query: Mapping[str, Any], mode: str) -> list[int]:
        where = query["filters"]
        return searches[query["table"]].search(
            query["search_text"], mode, where=lambda row: _meets(row, where), k=DEPTH
        )

    return rank


def rag_ranker(corpus: Corpus, embeddings: Any) -> Ranker | None:
    """Rankings by ``RAGAgent.run`` on the whole sentence (conditions and topic in one text),
    or ``None`` while the pipeline does not rank records (no ``ranking`` in its metadata)."""
    from rag_agent import create_rag_agent
    from tests.data.search_corpus import load_memory

    agent = create_rag_agent("memory", llm=False, embeddings=embeddings, store=load_memory(corpus))

    def rank(query: Mapping[str, Any], mode: str) -> list[int]:
        envelope = agent.run(query["text"], table=query["table"], limit=DEPTH, return_json=True)
        # A record's row id is in its provenance (the record itself carries allowed columns).
        return [record["provenance"]["row_id"] for record in envelope.get("records", [])]

    probe = agent.run("customers who want to stop paying", table="inquiries", return_json=True)
    if "ranking" not in probe.get("metadata", {}):
        return None
    return rank


def memory_facade(corpus: Corpus, embeddings: Any) -> Any:
    from persistence import create_read_only_facade
    from tests.data.search_corpus import load_memory

    return create_read_only_facade("memory", store=load_memory(corpus), embeddings=embeddings)


def evaluate(
    corpus: Corpus,
    queries: Sequence[Mapping[str, Any]],
    rankers: Mapping[str, Ranker],
) -> dict[str, dict[str, Score]]:
    """``{mode: {type or "all": mean score}}``."""
    relevant = {q["id"]: relevant_ids(corpus, q) for q in queries}
    table: dict[str, dict[str, Score]] = {}
    for mode, rank in rankers.items():
        per_type: dict[str, list[Score]] = defaultdict(list)
        for query in queries:
            found = score(rank(query, mode), relevant[query["id"]])
            per_type[query["type"]].append(found)
            per_type["all"].append(found)
        table[mode] = {kind: mean(items) for kind, items in per_type.items()}
    return table


def markdown(results: Mapping[str, Mapping[str, Score]], counts: Mapping[str, int]) -> str:
    """One row per query type (and "all"), one P@10 / nDCG@10 / R@100 column group per mode."""
    modes = list(results)
    head = "| type | n | " + " | ".join(f"{m} P@10 | {m} nDCG@10 | {m} R@100" for m in modes) + " |"
    rule = "|---|---:|" + "---:|---:|---:|" * len(modes)
    lines = [head, rule]
    for kind in (*[t for t in TYPES if t in counts], "all"):
        cells = []
        for mode in modes:
            s = results[mode].get(kind, Score(math.nan, math.nan, math.nan))
            cells.append(f"{s.precision:.3f} | {s.ndcg:.3f} | {s.recall:.3f}")
        label = f"**{kind}**" if kind == "all" else kind
        lines.append(f"| {label} | {counts[kind]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--backend", choices=("memory", "postgres", "reference", "pgvectorstore"), default="memory"
    )
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--types", default="", help="query types to run (default: all)")
    parser.add_argument("--tables", default="inquiries,messages")
    parser.add_argument(
        "--limit", type=int, default=0, help="every Nth query of each type (a slice)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="every 8th query of each type (about 70)"
    )
    parser.add_argument("--dsn", default=os.environ.get("RELEVANCE_DSN", ""))
    parser.add_argument(
        "--rag", action="store_true", help="also RAGAgent.run on the condition sentences"
    )
    args = parser.parse_args(argv)
    corpus = build()
    queries = [q for q in load() if q["table"] in args.tables.split(",")]
    if args.types:
        queries = [q for q in queries if q["type"] in args.types.split(",")]
    step = args.limit or (8 if args.quick else 0)
    if step:  # every Nth query of each type, so a slice still has every type
        by_type: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
        for query in queries:
            by_type[query["type"]].append(query)
        queries = [q for group in by_type.values() for q in group[::step]]
    embeddings = default_embeddings()
    modes = [m for m in args.modes.split(",") if m]
    if args.backend == "reference":
        rank = reference_ranker(corpus, embeddings)
    elif args.backend == "pgvectorstore":
        from tests.data.relevance_peer import peer_ranker

        rank = peer_ranker(corpus, embeddings, args.dsn, queries, DEPTH)
    elif args.backend == "memory":
        rank = facade_ranker(memory_facade(corpus, embeddings))
    else:
        from tests.data.relevance_postgres import postgres_facade

        rank = facade_ranker(postgres_facade(corpus, embeddings, args.dsn))
    results = evaluate(corpus, queries, dict.fromkeys(modes, rank))
    counts: dict[str, int] = defaultdict(int)
    for query in queries:
        counts[query["type"]] += 1
        counts["all"] += 1
    print(
        f"Backend {args.backend}, {len(queries)} queries, {len(corpus.rows['messages'])} messages, "
        f"{len(corpus.rows['inquiries'])} inquiries.\n"
    )
    print(markdown(results, counts))
    if args.rag:
        _rag_table(corpus, queries, embeddings)
    return 0


def _rag_table(corpus: Corpus, queries: Sequence[Mapping[str, Any]], embeddings: Any) -> None:
    rank = rag_ranker(corpus, embeddings)
    if rank is None:
        print("\nRAGAgent.run does not rank records yet (no metadata.ranking): skipped.")
        return
    sentences = [q for q in queries if q["type"] == "condition"]
    found = evaluate(corpus, sentences, {"rag.run": rank})
    print(f"\nRAGAgent.run on {len(sentences)} sentences with conditions (memory backend):\n")
    print(markdown(found, {"condition": len(sentences), "all": len(sentences)}))


if __name__ == "__main__":
    sys.exit(main())
