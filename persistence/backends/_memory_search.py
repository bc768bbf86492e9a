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

Every leg ranks every row it can (memory is exact). The legs are fused in the order keyword,
trigram, semantic, in the two tiers every backend fuses
(:func:`~persistence.search.fusion.fuse_tiers`): the first rows from the legs' first
:data:`~persistence.search.model.TIER_DEPTH` rows, the rest from the whole legs. When at least
``offset + k`` rows match the filters but fewer are ranked by any leg (a keyword search whose
words few rows hold), the page is filled with the remaining matching rows in ``id`` order, with
score 0 and no rank in any leg: when ``offset + k`` rows match, exactly ``k`` come back.

Row vectors are kept in a :class:`VectorCache` per store (see there).
"""

from __future__ import annotations

import array
import hashlib
import itertools
import operator
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

from cachetools import LRUCache

from persistence.search import SearchHit, SearchMode, SearchRequest, SearchResult
from persistence.search.bm25 import bm25_scores, tokens
from persistence.search.embedder import Embedder, Vector
from persistence.search.feedback import FEEDBACK_ROWS, refine
from persistence.search.fusion import fuse_tiers, weights_for
from persistence.search.model import TIER_DEPTH
from persistence.search.text import is_short_text_column, keyword_terms, topical_text
from persistence.search.trigram import WORD_SIMILARITY_THRESHOLD, TrigramNeedle

__all__ = ["MAX_CACHED_VECTORS", "VectorCache", "search_rows", "vector_cache"]

Row = Mapping[str, Any]
#: A row vector as the cache holds it: packed doubles, a quarter of a tuple of floats' memory
#: (256 dimensions: about 2 KB instead of 8 KB), the same values.
RowVector: TypeAlias = "array.array[float]"
#: The most row vectors one store keeps (least recently used go first): at 256 dimensions a
#: vector takes about 2 KB, so this bounds the cache near 400 MB at worst.
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
        self._entries: LRUCache[tuple[str, str, int, Any], tuple[bytes, RowVector | None]] = (
            LRUCache(maxsize)
        )
        self._versions: dict[str, int] = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def vectors(
        self, table: str, rows: Sequence[Row], texts: Sequence[str], embedder: Embedder, dim: int
    ) -> list[RowVector | None]:
        """Each row's vector (``None`` for a row with no text or a text without direction),
        embedding only rows not cached for this text and model."""
        self._forget_deleted(table)
        model = embedder.model_id
        digests = [
            hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
            for text in texts
        ]
        found: list[RowVector | None] = [None] * len(rows)
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
                for position, fresh_vector in zip(missing, fresh, strict=True):
                    vector = None if fresh_vector is None else array.array("d", fresh_vector)
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
        present = store._ids(table)
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


def _dot(a: Sequence[float], b: Sequence[float]) -> float:
    return float(sum(map(operator.mul, a, b)))


# The legs rank row *positions* in ``rows`` (which the store gives in id order): a position is
# always comparable, so ties break by id even where a learned id column mixes types.


def _by_score(scored: list[tuple[float, int]]) -> list[int]:
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [position for _, position in scored]


def _keyword_leg(texts: Sequence[str], terms: Sequence[str]) -> list[int]:
    scores = bm25_scores([tokens(text) for text in texts], terms)
    return _by_score([(score, i) for i, score in enumerate(scores) if score > 0])


def _trigram_leg(rows: Sequence[Row], columns: Sequence[str], query: str) -> list[int]:
    needle = TrigramNeedle(query)
    scored = []
    for position, row in enumerate(rows):
        values = [v for c in columns if isinstance(v := row.get(c), str)]
        best = max((needle.similarity(v, WORD_SIMILARITY_THRESHOLD) for v in values), default=0.0)
        if best >= WORD_SIMILARITY_THRESHOLD:
            scored.append((best, position))
    return _by_score(scored)


def _semantic_leg(
    table: str,
    rows: Sequence[Row],
    texts: Sequence[str],
    query: str,
    embedder: Embedder,
    cache: VectorCache,
) -> list[int]:
    if not rows:
        return []
    query_vector = embedder.embed_query(query)
    vectors = cache.vectors(table, rows, texts, embedder, len(query_vector))
    present = {position: v for position, v in enumerate(vectors) if v is not None}
    if not present:
        return []
    cosines = _cosines(list(present.values()))
    first = _by_score(list(zip(cosines(query_vector), present, strict=True)))
    refined = refine(query_vector, [tuple(present[p]) for p in first[:FEEDBACK_ROWS]])
    return _by_score(list(zip(cosines(refined), present, strict=True)))


def _cosines(vectors: list[RowVector]) -> Callable[[Vector], list[float]]:
    """Dot products of a query with every vector (all unit length: cosines). With numpy
    installed (it is wherever the default embeddings are), one matrix product instead of a
    Python loop: ten times faster on thousands of rows, equal up to summation order."""
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy comes with the semantic extra
        return lambda query: [_dot(query, v) for v in vectors]
    matrix = np.vstack([np.frombuffer(v, dtype=np.float64) for v in vectors])

    def products(query: Vector) -> list[float]:
        result: list[float] = (matrix @ np.asarray(query, dtype=np.float64)).tolist()
        return result

    return products


def search_rows(
    table: str,
    rows: Sequence[Row],
    request: SearchRequest,
    text_columns: tuple[str, ...],
    embedder: Embedder | None,
    *,
    project: Callable[[Row], dict[str, Any]],
    cache: VectorCache,
) -> SearchResult:
    """Rank ``rows`` (the rows matching the filters, in ``id`` order) by ``request``; each hit's
    row is ``project(row)`` (the columns the caller may see, copied)."""
    query = topical_text(request.text, table)
    mode, why = request.runnable_mode(embedder is not None)
    notes = [] if why is None else [why]
    texts = [_text(row, text_columns) for row in rows]
    legs: dict[str, list[int]] = {}
    if mode is not SearchMode.SEMANTIC:
        terms = keyword_terms(request.text, table)
        if terms:
            legs["keyword"] = _keyword_leg(texts, terms)
        else:
            notes.append("the text has no words to match, so the keyword leg ranked nothing")
        short = [c for c in text_columns if is_short_text_column(c)]
        if short:
            legs["trigram"] = _trigram_leg(rows, short, query)
    if mode is not SearchMode.KEYWORD and embedder is not None:
        legs["semantic"] = _semantic_leg(table, rows, texts, query, embedder, cache)
    # The fused order in tiers, as every backend's: the first tier fuses the legs' first rows.
    first = {name: leg[:TIER_DEPTH] for name, leg in legs.items()}
    fused = fuse_tiers(first, lambda: legs, weights_for(request.text, table), request.depth)
    hits = [
        SearchHit(project(rows[position]), score, ranks)
        for position, score, ranks in fused[request.offset : request.depth]
    ]
    if len(hits) < request.k and len(fused) < len(rows):
        # Fewer rows ranked than the page needs: fill with the unranked matching rows, id order.
        ranked = {position for position, _, _ in fused}
        unranked = (row for position, row in enumerate(rows) if position not in ranked)
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
