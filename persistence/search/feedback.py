"""One round of pseudo-relevance feedback on the semantic leg, shared by every backend.

A static embedding of a short question sits between topics; the rows it ranks first are, more
often than not, on the right one. Moving the query vector toward them and ranking again sharpens
the leg: ``refine(q, top) = normalize(q + FEEDBACK_WEIGHT * mean(top[:FEEDBACK_ROWS]))``.
"""

from __future__ import annotations

from collections.abc import Sequence

from persistence.search.embedder import Vector, normalize

__all__ = ["FEEDBACK_ROWS", "FEEDBACK_WEIGHT", "refine"]

#: How many of the first semantic hits the query moves toward: measured on the labelled set
#: (docs/relevance.md), 5 ranked best (3, 4, 6 and 10 a little below; weights 0.3 to 1.0 around
#: 0.5 no better).
FEEDBACK_ROWS = 5
#: How far it moves: the mean of those hits counts this much against the query's own vector.
FEEDBACK_WEIGHT = 0.5


def refine(query: Vector, top: Sequence[Vector]) -> Vector:
    """``query`` moved toward the mean of the first :data:`FEEDBACK_ROWS` vectors of ``top``;
    ``query`` itself when ``top`` is empty."""
    used = top[:FEEDBACK_ROWS]
    if not used:
        return query
    mean = [sum(column) / len(used) for column in zip(*used, strict=True)]
    return normalize([q + FEEDBACK_WEIGHT * m for q, m in zip(query, mean, strict=True)])
