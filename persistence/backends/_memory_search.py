"""The memory backend's :meth:`search`: exact hybrid ranking over the rows matching the filters.

The filters are applied first (the backend's own matching, the same as :meth:`read`); every leg
then ranks *those* rows, so a filter is never applied to a ranked list:

* ``keyword``: BM25 (:mod:`persistence.search.bm25`) over the allowed text columns joined, with
  the words of :func:`~persistence.search.text.keyword_terms`; rows with a positive score only;
* ``trigram``: pg_trgm's ``word_similarity(query, value)`` (:mod:`persistence.search.trigram`)
  over the short text columns (:func:`~persistence.search.text.is_short_text_column`), rows whose
  greatest similarity reaches pg_trgm's default threshold, 0.6; only when the table has one;
* ``semantic``: cosine between the query's embedding and each row's (its allowed text columns
  joined), then once more after one round of pseudo-relevance feedback
  (:func:`~persistence.search.feedback.refine`).

Every leg ranks every row it can (memory is exact), so any page is exact. The legs are fused by
:func:`~persistence.search.fusion.fuse` in the order keyword, trigram, semantic. When at least
``offset + k`` rows match the filters but fewer are ranked by any leg (a keyword search whose
words few rows hold), the page is filled with the remaining matching rows in ``id`` order, with
score 0 and no rank in any leg: when ``offset + k`` rows match, exactly ``k`` come back.

Row vectors are kept in a :class:`VectorCache` per store (see there).
"""

from __future__ import annotations

import hashlib
import itertools
import operator
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cachetools import LRUCache

from persistence.search import SearchHit, SearchMode, SearchRequest, SearchResult
from persistence.search.bm25 import bm25_scores, tokens
from persistence.search.embedder import Embedder, Vector
from persistence.search.feedback import refine
from persistence.search.fusion import DEFAULT_WEIGHTS, fuse
from persistence.search.text import is_short_text_column, keyword_terms, topical_text
from persistence.search.trigram import WORD_SIMILARITY_THRESHOLD, word_similarity

__all__ = ["MAX_CACHED_VECTORS", "VectorCache", "search_rows", "vector_cache"]

Row = dict[str, Any]
#: The most row vectors one store keeps (least recently used go first): at 256 dimensions a
#: vector held as floats takes about 8 KB, so this bounds the cache near 1.6 GB at worst.
MAX_CACHED_VECTORS = 200_000


class VectorCache:
    """Row vectors of one store, keyed by table, row id, the embedding model (its id and
    dimension) and a hash of the text embedded.

    Computed on the first search that needs them; a row whose text changed (an update through
    :class:`~persistence.PersistenceAgent` or any other write to the store) no longer matches its
    hash and is embedded again by the next search, which embeds only such rows; a write moves
    the table's version, and the next search then forgets the vectors of deleted rows. Another
    model (or dimension) has its own entries, so a model change re-embeds instead of ranking
    with foreign vectors. Bounded (:data:`MAX_CACHED_VECTORS`, least recently used first).

    Thread-safe: lookups and stores take a lock; embedding runs outside it (two searches may
    embed the same new row twice, and both store the same vector).
    """

    def __init__(self, store: Any, maxsize: int = MAX_CACHED_VECTORS) -> None:
        self._store = weakref.ref(store)
        self._lock = threading.Lock()
        self._entries: LRUCache[tuple[str, str, int, Any], tuple[bytes, Vector | None]] = LRUCache(
            maxsize
        )
        self._versions: dict[str, int] = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def vectors(
        self, table: str, rows: Sequence[Row], texts: Sequence[str], embedder: Embedder, dim: int
    ) -> list[Vector | None]:
        """Each row's vector (``None`` for a row with no text or a text without direction),
        embedding only rows not cached for this text and model."""
        self._forget_deleted(table)
        model = embedder.model_id
        digests = [hashlib.blake2b(text.encode(), digest_size=16).digest() for text in texts]
        found: list[Vector | None] = [None] * len(rows)
        missing: list[int] = []
        with self._lock:
            for position, (row, digest) in enumerate(zip(rows, digests, strict=True)):
                entry = self._entries.get((table, model, dim, row.get("id")))
                if entry is not None and entry[0] == digest:
                    found[position] = entry[1]
                elif texts[position].strip():
                    missing.append(position)
        if missing:
            fresh = embedder.embed_rows([texts[p] for p in missing])
            with self._lock:
                for position, vector in zip(missing, fresh, strict=True):
                    found[position] = vector
                    key = (table, model, dim, rows[position].get("id"))
                    self._entries[key] = (digests[position], vector)
        return found

    def _forget_deleted(self, table: str) -> None:
        store = self._store()
        if store is None:
            return
        version = store.version(table)
        with self._lock:
            if self._versions.get(table) == version:
                return
            self._versions[table] = version
            stale = [key for key in self._entries if key[0] == table]
        if not stale:
            return
        present = {row.get("id") for row in store.rows(table)}
        with self._lock:
            for key in stale:
                if key[3] not in present:
                    self._entries.pop(key, None)


_caches: weakref.WeakKeyDictionary[Any, VectorCache] = weakref.WeakKeyDictionary()
_caches_lock = threading.Lock()


def vector_cache(store: Any) -> VectorCache:
    """The row-vector cache of ``store`` (a ``MemoryStore``), made on first use; shared by every
    backend over that store, so a writer's and a reader's facade see the same vectors."""
    with _caches_lock:
        cache = _caches.get(store)
        if cache is None:
            cache = _caches[store] = VectorCache(store)
        return cache


def _text(row: Mapping[str, Any], columns: Sequence[str]) -> str:
    return "\n".join(str(v) for c in columns if (v := row.get(c)) is not None and v != "")


def _dot(a: Vector, b: Vector) -> float:
    return float(sum(map(operator.mul, a, b)))


def _keyword_leg(rows: Sequence[Row], columns: Sequence[str], terms: Sequence[str]) -> list[Any]:
    scores = bm25_scores([tokens(_text(row, columns)) for row in rows], terms)
    ranked = [(score, row["id"]) for score, row in zip(scores, rows, strict=True) if score > 0]
    ranked.sort(key=lambda item: (-item[0], _id_order(item[1])))
    return [key for _, key in ranked]


def _trigram_leg(rows: Sequence[Row], columns: Sequence[str], query: str) -> list[Any]:
    ranked = []
    for row in rows:
        values = [v for c in columns if isinstance(v := row.get(c), str)]
        best = max((word_similarity(query, v) for v in values), default=0.0)
        if best >= WORD_SIMILARITY_THRESHOLD:
            ranked.append((best, row["id"]))
    ranked.sort(key=lambda item: (-item[0], _id_order(item[1])))
    return [key for _, key in ranked]


def _semantic_leg(
    table: str,
    rows: Sequence[Row],
    columns: Sequence[str],
    query: str,
    embedder: Embedder,
    cache: VectorCache,
) -> list[Any]:
    if not rows:
        return []
    query_vector = embedder.embed_query(query)
    texts = [_text(row, columns) for row in rows]
    vectors = cache.vectors(table, rows, texts, embedder, len(query_vector))
    scored = [(v, row["id"]) for v, row in zip(vectors, rows, strict=True) if v is not None]

    def ranked(q: Vector) -> list[tuple[float, Any, Vector]]:
        result = [(_dot(q, v), key, v) for v, key in scored]
        result.sort(key=lambda item: (-item[0], _id_order(item[1])))
        return result

    first = ranked(query_vector)
    if not first:
        return []
    refined = refine(query_vector, [v for _, _, v in first])
    return [key for _, key, _ in ranked(refined)]


def _id_order(key: Any) -> tuple[str, Any]:
    # Ids of one table share a type; the type name keeps a mixed (learned) column sortable.
    return (type(key).__name__, key)


def search_rows(
    table: str,
    rows: Sequence[Row],
    request: SearchRequest,
    text_columns: tuple[str, ...],
    embedder: Embedder | None,
    *,
    project: Callable[[Row], Row],
    cache: VectorCache,
) -> SearchResult:
    """Rank ``rows`` (the rows matching the filters, in ``id`` order) by ``request``; each hit's
    row is ``project(row)`` (the columns the caller may see, copied)."""
    query = topical_text(request.text, table)
    mode = request.mode
    notes: list[str] = []
    if mode is SearchMode.HYBRID and embedder is None:
        mode = SearchMode.KEYWORD
        notes.append("no embeddings are configured, so the semantic leg did not run")
    legs: dict[str, list[Any]] = {}
    if mode is not SearchMode.SEMANTIC:
        terms = keyword_terms(request.text, table)
        if terms:
            legs["keyword"] = _keyword_leg(rows, text_columns, terms)
        else:
            notes.append("the text has no words to match, so the keyword leg ranked nothing")
        short = [c for c in text_columns if is_short_text_column(c)]
        if short:
            legs["trigram"] = _trigram_leg(rows, short, query)
    if mode is not SearchMode.KEYWORD and embedder is not None:
        legs["semantic"] = _semantic_leg(table, rows, text_columns, query, embedder, cache)
    fused = fuse(legs, DEFAULT_WEIGHTS)
    by_id = {row["id"]: row for row in rows}
    hits = [
        SearchHit(project(by_id[key]), score, ranks)
        for key, score, ranks in fused[request.offset : request.depth]
    ]
    if len(hits) < request.k and len(fused) < len(rows):
        # Fewer rows ranked than the page needs: fill with the unranked matching rows, id order.
        ranked = {key for key, _, _ in fused}
        unranked = (row for row in rows if row["id"] not in ranked)
        skip = max(0, request.offset - len(fused))
        for row in itertools.islice(unranked, skip, skip + request.k - len(hits)):
            hits.append(SearchHit(project(row), 0.0, dict.fromkeys(legs)))
    return SearchResult(
        hits=tuple(hits),
        mode=mode,
        legs=tuple(legs),
        query=query,
        total_count=len(rows),
        degraded="; ".join(notes) or None,
    )
