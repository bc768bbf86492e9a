"""Okapi BM25, small: the memory backend's keyword leg.

A length-normalised rank (a long row mentioning a word once does not outrank a short row about
it), with OR semantics: a row scores when it holds any of the terms. Tokens are the runs of
letters and digits of the text, case-folded; terms are compared to tokens exactly (no stemming,
unlike PostgreSQL's text-search configurations).

``score(row) = sum over terms t of idf(t) * tf * (K1 + 1) / (tf + K1 * (1 - B + B * len / avglen))``
with ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))`` (always positive), over a corpus of
``N`` documents (the rows matching the search's filters).

>>> bm25_scores([tokens("card declined"), tokens("a new card")], ("declined",))[0] > 0
True
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

__all__ = ["K1", "B", "bm25_scores", "tokens"]

#: Term-frequency saturation: the second mention of a word counts less than the first.
K1 = 1.2
#: Length normalisation: 0 ignores a row's length, 1 divides fully by it.
B = 0.75

_TOKEN = re.compile(r"[^\W_]+")


def tokens(text: str) -> list[str]:
    """The case-folded words of ``text``, in order."""
    return [token.casefold() for token in _TOKEN.findall(text)]


def bm25_scores(documents: Sequence[Sequence[str]], terms: Sequence[str]) -> list[float]:
    """Each document's BM25 score for ``terms`` (0.0 for a document holding none of them)."""
    wanted = list(dict.fromkeys(term.casefold() for term in terms))
    if not documents or not wanted:
        return [0.0] * len(documents)
    counts = [Counter(document) for document in documents]
    lengths = [len(document) for document in documents]
    average = sum(lengths) / len(documents) or 1.0
    total = len(documents)
    idf = {}
    for term in wanted:
        df = sum(1 for counter in counts if term in counter)
        idf[term] = math.log(1.0 + (total - df + 0.5) / (df + 0.5))
    scores = []
    for counter, length in zip(counts, lengths, strict=True):
        norm = K1 * (1.0 - B + B * length / average)
        score = 0.0
        for term in wanted:  # a fixed order: the same floating-point sum every time
            tf = counter.get(term, 0)
            if tf:
                score += idf[term] * tf * (K1 + 1.0) / (tf + norm)
        scores.append(score)
    return scores
