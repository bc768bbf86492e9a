"""LangChain's ``PGVectorStore`` on the relevance corpus, for ``--backend pgvectorstore``.

The corpus goes into a scratch database exactly as for ``--backend postgres``
(:func:`tests.data.relevance_postgres.postgres_facade`: the rows, the harness's embeddings in each
searched table's side table, a SELECT-only role), on a server with pgvector. Each searched table
then gets a ``PGVectorStore`` table filled from its rows and side table: the same vectors, not
embedded a second time (:func:`tests.benchmarks.pg_search_peer.build_table`), with the columns the
queries filter on as metadata columns. ``hybrid`` ranks with its ``HybridSearchConfig`` (a GIN on
``content_tsv``, its default weighted-sum fusion), ``semantic`` with its vector search alone; it
has no keyword-only search. Filters become its metadata filter (``$eq``, ``$gte``, ``$lt``, …).
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tests.data.search_corpus import Corpus

Ranker = Callable[[Mapping[str, Any], str], list[Any]]

#: The harness's operators as the store's filter operators.
_OPERATORS = {"eq": "$eq", "ne": "$ne", "lt": "$lt", "lte": "$lte", "gt": "$gt", "gte": "$gte",
              "in": "$in"}  # fmt: skip


def where(filters: Sequence[Sequence[Any]]) -> dict[str, Any] | None:
    """The store's metadata filter for a query's ``[column, op, value]`` triples."""
    parts = []
    for column, op, value in filters:
        if column.endswith("_at") and isinstance(value, str):
            value = dt.datetime.fromisoformat(value)
        parts.append({column: {_OPERATORS[op]: value}})
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {"$and": parts}


def peer_ranker(
    corpus: Corpus, embeddings: Any, dsn: str, queries: Sequence[Mapping[str, Any]], depth: int
) -> Ranker:
    """Rankings by ``PGVectorStore`` over a scratch copy of ``corpus``."""
    facade, rank, _ = with_peer(corpus, embeddings, dsn, queries, depth)
    facade.close()
    return rank


def with_peer(
    corpus: Corpus, embeddings: Any, dsn: str, queries: Sequence[Mapping[str, Any]], depth: int
) -> tuple[Any, Ranker, Callable[[], None]]:
    """The facade ``--backend postgres`` ranks with, the peer's rankings on the same scratch
    database (dropped when the process exits), and what closes the peer's connections."""
    from psycopg.conninfo import make_conninfo

    from tests.benchmarks.pg_search_peer import build_table, open_peer
    from tests.data.relevance_postgres import _SEARCHED, postgres_facade

    facade = postgres_facade(corpus, embeddings, dsn)  # the database, its vectors and its role
    name = f"relevance_{os.getpid()}"  # as postgres_facade names them
    scratch = make_conninfo(dsn, dbname=name)
    peers: dict[str, Any] = {}
    for table, columns in _SEARCHED.items():
        metadata = sorted({f[0] for q in queries if q["table"] == table for f in q["filters"]})
        build_table(scratch, table, columns, metadata, name)
        peers[table] = open_peer(
            make_conninfo(scratch, user=name), table, metadata, embeddings, k=depth
        )
    ids = {table: {str(row["id"]): row["id"] for row in corpus.rows[table]} for table in peers}

    def rank(query: Mapping[str, Any], mode: str) -> list[Any]:
        if mode not in ("hybrid", "semantic"):
            raise SystemExit(f"PGVectorStore has no {mode} search: use --modes hybrid,semantic")
        peer = peers[query["table"]]
        found = peer.search(
            query["search_text"], depth, where(query["filters"]), hybrid=mode == "hybrid"
        )
        return [ids[query["table"]][key] for key in found]

    def close() -> None:
        for peer in peers.values():
            peer.close()

    return facade, rank, close
