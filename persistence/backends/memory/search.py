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

Row vectors are kept in a :class:`~persistence.backends.memory.vectors.VectorCache` per store
(see :mod:`persistence.backends.memory.vectors`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from persistence.backends.memory.vectors import VectorCache, counted_vocabulary, vector_cache
from persistence.search import SearchHit, SearchMode, SearchRequest, SearchResult
from persistence.search.bm25 import bm25_scores, tokens
from persistence.search.embedder import Embedder
from persistence.search.feedback import FEEDBACK_ROWS, refine, takes_feedback
from persistence.search.fusion import fuse_tiers, weights_for
from persistence.search.model import TIER_DEPTH
from persistence.search.spelling import Correction, correct
from persistence.search.text import is_short_text_column, keyword_terms, topical_text
from persistence.search.trigram import WORD_SIMILARITY_THRESHOLD, TrigramNeedle

__all__ = ["VectorCache", "search_rows", "vector_cache"]

Row = Mapping[str, Any]


def _text(row: Mapping[str, Any], columns: Sequence[str]) -> str:
    return "\n".join(str(v) for c in columns if (v := row.get(c)) is not None and v != "")


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
    feedback: bool = True,
) -> list[int]:
    if not rows:
        return []
    query_vector = embedder.embed_query(query)
    cosines = cache.cosines(table, rows, texts, embedder, len(query_vector))
    first = _by_score(cosines(query_vector))
    if not first:
        return []
    if not feedback:
        return first
    refined = refine(query_vector, [cosines.vector(p) for p in first[:FEEDBACK_ROWS]])
    return _by_score(cosines(refined))


def search_rows(
    table: str,
    rows: Sequence[Row],
    request: SearchRequest,
    text_columns: tuple[str, ...],
    embedder: Embedder | None,
    *,
    project: Callable[[Row], dict[str, Any]],
    cache: VectorCache,
    every_row: Callable[[], Sequence[Row]] | None = None,
    correct_from_rows: bool = False,
) -> SearchResult:
    """Rank ``rows`` (the rows matching the filters, in ``id`` order) by ``request``; each hit's
    row is ``project(row)`` (the columns the caller may see, copied).

    The text's misspellings are corrected (:mod:`persistence.search.spelling`) by the words of
    ``every_row()`` (the whole table, for a search without filters: its vocabulary is cached
    per table version), or with ``correct_from_rows`` by the words of ``rows`` alone (a filtered
    search: a correction must never be a word only rows outside the filters hold); with
    neither nothing is corrected."""
    texts = [_text(row, text_columns) for row in rows]
    if correct_from_rows:
        corrected = correct(request.text, counted_vocabulary(texts))
    elif every_row is not None:
        vocabulary = cache.vocabulary(
            table, text_columns, lambda: (_text(row, text_columns) for row in every_row())
        )
        corrected = correct(request.text, vocabulary)
    else:
        corrected = Correction(request.text)
    text = corrected.text
    query = topical_text(text, table)
    mode, why = request.runnable_mode(embedder is not None)
    notes = [] if why is None else [why]
    legs: dict[str, list[int]] = {}
    if mode is not SearchMode.SEMANTIC:
        terms = keyword_terms(text, table)
        if terms:
            legs["keyword"] = _keyword_leg(texts, terms)
        else:
            notes.append("the text has no words to match, so the keyword leg ranked nothing")
        short = [c for c in text_columns if is_short_text_column(c)]
        if short:
            legs["trigram"] = _trigram_leg(rows, short, query)
    weights = weights_for(text, table)
    if mode is not SearchMode.KEYWORD and embedder is not None:
        legs["semantic"] = _semantic_leg(
            table, rows, texts, query, embedder, cache, feedback=takes_feedback(weights)
        )
    # The fused order in tiers, as every backend's: the first tier fuses the legs' first rows.
    first = {name: leg[:TIER_DEPTH] for name, leg in legs.items()}
    fused = fuse_tiers(first, lambda: legs, weights, request.depth)
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
        corrections=corrected.changes,
    )
