"""The memory backend's keyword rankers: BM25 and pg_trgm's word similarity."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from persistence.search.bm25 import K1, B, bm25_scores, tokens
from persistence.search.trigram import WORD_SIMILARITY_THRESHOLD, trigrams, word_similarity


class TestTokens:
    def test_words_are_case_folded_runs_of_letters_and_digits(self) -> None:
        assert tokens("Straße, ID-42_x!") == ["strasse", "id", "42", "x"]

    def test_no_words(self) -> None:
        assert tokens("!!! --- ___") == []


class TestBM25:
    def test_the_formula_on_a_hand_computed_corpus(self) -> None:
        """One term in two documents of different lengths: the textbook BM25 value."""
        documents = [["card", "declined"], ["card", "new", "new", "new"], ["other"]]
        scores = bm25_scores(documents, ["card"])
        idf = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))
        average = (2 + 4 + 1) / 3
        for score, length in zip(scores[:2], (2, 4), strict=True):
            expected = idf * (K1 + 1) / (1 + K1 * (1 - B + B * length / average))
            assert math.isclose(score, expected)
        assert scores[2] == 0.0

    def test_a_shorter_row_about_a_word_ranks_above_a_longer_one(self) -> None:
        short, long = bm25_scores([tokens("refund"), tokens("refund " + "words " * 30)], ["refund"])
        assert short > long > 0

    def test_or_semantics(self) -> None:
        """A document holding any term scores; holding more scores more."""
        scores = bm25_scores([["a"], ["b"], ["a", "b"], ["c"]], ["a", "b"])
        assert scores[0] > 0 and scores[1] > 0 and scores[2] > max(scores[:2])
        assert scores[3] == 0

    def test_terms_are_case_folded_and_deduplicated(self) -> None:
        documents = [["refund"], ["other"]]
        assert bm25_scores(documents, ["REFUND", "refund"]) == bm25_scores(documents, ["refund"])

    def test_empty_inputs(self) -> None:
        assert bm25_scores([], ["a"]) == []
        assert bm25_scores([["a"]], []) == [0.0]
        assert bm25_scores([[]], ["a"]) == [0.0]

    @given(st.lists(st.lists(st.sampled_from("abcde"), max_size=8), min_size=1, max_size=8))
    def test_scores_are_finite_and_non_negative(self, documents: list[list[str]]) -> None:
        scores = bm25_scores(documents, ["a", "c"])
        assert all(math.isfinite(s) and s >= 0 for s in scores)
        assert all(
            (s > 0) == bool({"a", "c"} & set(d)) for s, d in zip(scores, documents, strict=True)
        )


class TestTrigrams:
    def test_words_are_padded_two_spaces_in_front_one_behind(self) -> None:
        assert trigrams("Ab") == ["  a", " ab", "ab "]
        assert trigrams("a-b") == ["  a", " a ", "  b", " b "]

    def test_known_values(self) -> None:
        """pg_trgm's documented behaviour: a word inside a longer text matches fully."""
        assert word_similarity("word", "two words") == struct_float4(0.8)
        assert word_similarity("Globx", "Globex Industries") == struct_float4(2 / 3)
        assert word_similarity("acme", "ACME corp") == 1.0
        assert word_similarity("", "anything") == 0.0
        assert word_similarity("!!!", "!!!") == 0.0

    def test_the_threshold_is_pg_trgm_default_in_single_precision(self) -> None:
        assert struct_float4(0.6) == WORD_SIMILARITY_THRESHOLD
        assert word_similarity("Globx", "Globex") >= WORD_SIMILARITY_THRESHOLD

    @given(st.text(max_size=12), st.text(max_size=30))
    def test_similarity_is_a_fraction(self, needle: str, haystack: str) -> None:
        assert 0.0 <= word_similarity(needle, haystack) <= 1.0

    @given(st.text(alphabet="abcxyz ", min_size=1, max_size=12))
    def test_a_text_contains_itself(self, text: str) -> None:
        expected = 1.0 if trigrams(text) else 0.0
        assert word_similarity(text, text) == expected


def struct_float4(value: float) -> float:
    import struct

    result: float = struct.unpack("f", struct.pack("f", value))[0]
    return result
