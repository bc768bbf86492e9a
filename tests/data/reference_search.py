"""The search contract's ranking computed directly over the corpus, for measuring the shared
query-text, fusion and feedback modules on their own (``--backend reference``).

Keyword leg: BM25 (:mod:`persistence.search.bm25`'s constants and tokens) of
:func:`~persistence.search.text.keyword_terms` over the row's text columns. Trigram leg: pg_trgm's
word similarity of the topical text to the short text columns (the subject), as the backends do.
Semantic leg: cosine of the :func:`~persistence.search.text.topical_text` embedding against the
rows' embeddings, refined once by :func:`~persistence.search.feedback.refine`.
Hybrid: :func:`~persistence.search.fusion.fuse` with
:func:`~persistence.search.fusion.weights_for`'s weights. Filters restrict the rows before every
leg. Before any leg, misspelled words are corrected against the table's words
(:func:`~persistence.search.spelling.correct`).
The memory backend ranks the same way, in pure Python; this one uses numpy, ten times faster.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from persistence.search import bm25, feedback, fusion, spelling, text, trigram
from tests.data.search_corpus import Corpus

K1, B = bm25.K1, bm25.B


class ReferenceSearch:
    """Ranks one table of ``corpus``; ``embeddings`` is any LangChain-style ``Embeddings``."""

    def __init__(self, corpus: Corpus, table: str, embeddings: Any) -> None:
        self.table = table
        self.rows = corpus.rows[table]
        self.ids = np.array([row["id"] for row in self.rows])
        texts = [_row_text(table, row) for row in self.rows]
        self.postings: dict[str, dict[int, int]] = {}
        lengths = []
        for index, row_text in enumerate(texts):
            words = bm25.tokens(row_text)
            lengths.append(len(words))
            for word, count in Counter(words).items():
                self.postings.setdefault(word, {})[index] = count
        self.vocabulary = spelling.CountedVocabulary(
            {word: len(posting) for word, posting in self.postings.items()}
        )
        self.lengths = np.array(lengths, dtype=float)
        self.average = float(self.lengths.mean())
        self.embeddings = embeddings
        self.vectors = _unit(np.asarray(embeddings.embed_documents(texts), dtype=float))

    def search(
        self, query: str, mode: str, *, where: Callable[[Mapping[str, Any]], bool], k: int
    ) -> list[int]:
        """Ids of the ``k`` best rows meeting ``where``, best first."""
        query = spelling.correct(query, self.vocabulary).text
        mask = np.array([where(row) for row in self.rows])
        legs: dict[str, Sequence[int]] = {}
        if mode in ("keyword", "hybrid"):
            legs["keyword"] = self._keyword(query, mask, k)
            if self.table == "inquiries":
                legs["trigram"] = self._trigram(query, mask, k)
        if mode in ("semantic", "hybrid"):
            legs["semantic"] = self._semantic(query, mask, k)
        if mode == "semantic":
            return list(legs[mode])[:k]
        return [key for key, _, _ in fusion.fuse(legs, fusion.weights_for(query, self.table))][:k]

    def _keyword(self, query: str, mask: np.ndarray, k: int) -> list[int]:
        scores = np.zeros(len(self.rows))
        total = len(self.rows)
        for term in text.keyword_terms(query, self.table):
            posting = self.postings.get(term)
            if not posting:
                continue
            idf = math.log(1 + (total - len(posting) + 0.5) / (len(posting) + 0.5))
            index = np.fromiter(posting, dtype=int)
            tf = np.fromiter(posting.values(), dtype=float)
            norm = K1 * (1 - B + B * self.lengths[index] / self.average)
            scores[index] += idf * tf * (K1 + 1) / (tf + norm)
        return self._top(np.where(mask & (scores > 0), scores, -np.inf), k)

    def _trigram(self, query: str, mask: np.ndarray, k: int) -> list[int]:
        topical = text.topical_text(query, self.table)
        found = []
        for index in np.flatnonzero(mask):
            similarity = trigram.word_similarity(topical, self.rows[index]["subject"])
            if similarity >= trigram.WORD_SIMILARITY_THRESHOLD:
                found.append((-similarity, int(self.ids[index])))
        return [key for _, key in sorted(found)[:k]]

    def _semantic(self, query: str, mask: np.ndarray, k: int) -> list[int]:
        vector = np.asarray(self.embeddings.embed_query(text.topical_text(query, self.table)))
        first = self._cosine_top(vector, mask, max(k, feedback.FEEDBACK_ROWS))
        top = [tuple(self.vectors[i]) for i in first[: feedback.FEEDBACK_ROWS]]
        refined = np.asarray(feedback.refine(tuple(_unit(vector[None])[0]), top))
        return [int(self.ids[i]) for i in self._cosine_top(refined, mask, k)]

    def _cosine_top(self, vector: np.ndarray, mask: np.ndarray, k: int) -> list[int]:
        scores = np.where(mask, self.vectors @ vector, -np.inf)
        order = np.lexsort((self.ids, -scores))[:k]
        return [int(i) for i in order if np.isfinite(scores[i])]

    def _top(self, scores: np.ndarray, k: int) -> list[int]:
        order = np.lexsort((self.ids, -scores))[:k]
        return [int(self.ids[i]) for i in order if np.isfinite(scores[i])]


def _row_text(table: str, row: Mapping[str, Any]) -> str:
    return " ".join(str(v) for c, v in row.items() if c in ("subject", "body") and v)


def _unit(matrix: np.ndarray) -> np.ndarray:
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
