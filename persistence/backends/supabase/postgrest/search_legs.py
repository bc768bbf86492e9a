"""The fallback search's legs over fetched rows
(:mod:`persistence.backends.supabase.postgrest.search`): each ranks row positions in the fetched
list, best first, ties by position (the rows are in id
order), exactly as the memory backend's legs rank."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

from persistence.search.bm25 import bm25_scores, tokens
from persistence.search.embedder import Vector
from persistence.search.feedback import FEEDBACK_ROWS, refine
from persistence.search.trigram import WORD_SIMILARITY_THRESHOLD, TrigramNeedle

__all__ = ["keyword_leg", "semantic_leg", "trigram_leg"]

Row = dict[str, Any]


def _by_score(scored: list[tuple[float, int]]) -> list[int]:
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [position for _, position in scored]


def keyword_leg(
    universe: Sequence[Row], texts: Sequence[str], terms: Sequence[str], candidates: Sequence[Row]
) -> list[int]:
    """BM25 over the fetched rows; a full-text candidate BM25 does not score (a stemmed match)
    ranks after those it does, in id order."""
    scores = bm25_scores([tokens(t) for t in texts], terms)
    scored = _by_score([(s, i) for i, s in enumerate(scores) if s > 0])
    matched = {str(r.get("id")) for r in candidates}
    stemmed = [i for i, r in enumerate(universe) if scores[i] <= 0 and str(r.get("id")) in matched]
    return scored + stemmed


def trigram_leg(universe: Sequence[Row], columns: Sequence[str], text: str) -> list[int]:
    needle = TrigramNeedle(text)
    scored = []
    for position, row in enumerate(universe):
        values = [v for c in columns if isinstance(v := row.get(c), str)]
        best = max((needle.similarity(v, WORD_SIMILARITY_THRESHOLD) for v in values), default=0.0)
        if best >= WORD_SIMILARITY_THRESHOLD:
            scored.append((best, position))
    return _by_score(scored)


def _dot(a: Sequence[float], b: Sequence[float]) -> float:
    return float(sum(map(operator.mul, a, b)))


def semantic_leg(
    query: Vector, vectors: Sequence[Vector | None], *, feedback: bool = True
) -> list[int]:
    present = {i: v for i, v in enumerate(vectors) if v is not None}
    if not present:
        return []
    first = _by_score([(_dot(query, v), i) for i, v in present.items()])
    if not feedback:  # persistence.search.feedback.takes_feedback
        return first
    refined = refine(query, [present[i] for i in first[:FEEDBACK_ROWS]])
    return _by_score([(_dot(refined, v), i) for i, v in present.items()])
