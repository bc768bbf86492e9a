"""Spelling correction of a search text against the table's own words: what it corrects, what
it never touches, how far it goes, and that the memory backend searches the corrected text."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from persistence import MemoryStore, create_persistence_agent, create_read_only_facade
from persistence.search.spelling import (
    MAX_CORRECTIONS,
    CountedVocabulary,
    choose,
    correct,
    correctable,
    edit_distance,
)
from persistence.search.trigram import similarity
from tests.conftest import corpus_lines
from tests.support.search import HashEmbeddings

VOCABULARY = CountedVocabulary(
    {
        "cancel": 40,
        "subscription": 12,
        "invoice": 30,
        "password": 25,
        "refund": 18,
        "order": 90,
        "parcel": 1,  # held by one row: never a correction
        "reach": 3,
        "teach": 0,  # no row: not a word of the table
    }
)


class TestCorrect:
    @pytest.mark.parametrize(
        ("typed", "expected"),
        [
            ("canncel subscrpition", "cancel subscription"),  # doubled letter, swap
            ("invoce", "invoice"),  # a letter dropped
            ("pasword reset", "password reset"),
            ("Refnd please", "refund please"),  # and the case of a corrected word
        ],
    )
    def test_one_edit_from_a_table_word_is_corrected(self, typed: str, expected: str) -> None:
        assert correct(typed, VOCABULARY).text == expected

    def test_changes_say_what_was_read_as_what(self) -> None:
        found = correct("canncel the invoce, canncel it", VOCABULARY)
        assert found.changes == (("canncel", "cancel"), ("invoce", "invoice"))
        assert found.describe() is not None and "'canncel' as 'cancel'" in found.describe()

    @pytest.mark.parametrize(
        "text",
        [
            "order 48213",  # a table word
            "INV-2025-1522",  # identifiers and numbers
            "ordr1 48213x",  # a word holding a digit
            "parcl",  # its only neighbour is held by one row
            "the of and",  # framing
            "cnacel",  # two edits from "cancel" (a swap then a swap back elsewhere)
            "ord",  # shorter than four letters
        ],
    )
    def test_left_alone(self, text: str) -> None:
        found = correct(text, VOCABULARY)
        assert found.text == text and found.changes == ()

    def test_a_real_word_the_table_lacks_is_read_as_its_neighbour(self) -> None:
        """The known cost: without a dictionary, a word no row holds one edit from a word rows
        hold is taken for a typo of it (measured on the labelled set: a few paraphrases)."""
        assert correct("teach beginners", VOCABULARY).changes == (("teach", "reach"),)

    def test_the_most_frequent_neighbour_wins_then_the_alphabetically_first(self) -> None:
        assert choose("bolt", [("bold", 5), ("boat", 9), ("bost", 9)]) == "boat"
        assert choose("hose", [("house", 2), ("horse", 2)]) == "horse"

    def test_at_most_max_corrections_words_are_looked_up(self) -> None:
        typed = " ".join(["invoce"] + [f"wordz{'abcdefghij'[i]}x" for i in range(10)])
        seen: list[list[str]] = []

        class Recording(CountedVocabulary):
            def similar(self, words):  # type: ignore[no-untyped-def]
                seen.append(list(words))
                return super().similar(words)

        correct(typed, Recording({"invoice": 3}))
        assert seen and len(seen[0]) <= MAX_CORRECTIONS

    def test_similarity_is_pg_trgms(self) -> None:
        # pg_trgm: SELECT similarity('word', 'two words') = 0.363636 (4 / 11).
        assert similarity("word", "two words") == pytest.approx(4 / 11, abs=1e-6)
        assert similarity("", "word") == 0.0


class TestProperties:
    @given(st.text(max_size=80))
    def test_words_with_digits_and_short_words_are_never_changed(self, text: str) -> None:
        found = correct(text, VOCABULARY)
        for typed, fixed in found.changes:
            assert correctable(typed) and fixed in {
                "cancel",
                "subscription",
                "invoice",
                "password",
                "refund",
                "order",
                "reach",
            }
            assert edit_distance(typed.lower(), fixed, 1) == 1
        for token in re.findall(r"[^\W_]+", text):
            if any(c.isdigit() for c in token) or len(token) < 4:
                assert token in found.text

    @given(st.lists(st.sampled_from(["cancel", "invoice", "order", "48213", "INV-7"]), max_size=8))
    def test_a_text_of_table_words_is_unchanged(self, words: list[str]) -> None:
        text = " ".join(words)
        assert correct(text, VOCABULARY).text == text

    @given(st.text(alphabet="abcdefghij", min_size=4, max_size=9), st.text(max_size=9))
    def test_edit_distance_is_symmetric_and_capped(self, a: str, b: str) -> None:
        assert edit_distance(a, b, 2) == edit_distance(b, a, 2) <= 3
        assert edit_distance(a, a, 1) == 0


def test_hostile_corpus_text_is_only_ever_words() -> None:
    """A table whose rows hold SQL-injection payloads: its vocabulary is plain lower-case
    letters, and a correction made from it is one such word, so no payload's syntax reaches a
    keyword term, a tsquery or a statement (the PostgreSQL lookup binds each word as a value)."""
    payloads = corpus_lines()
    counts: dict[str, int] = {}
    for line in payloads:
        for word in set(re.findall(r"[^\W_]+", line.casefold())):
            counts[word] = counts.get(word, 0) + 1
    vocabulary = CountedVocabulary(counts)
    for line in payloads[:300]:
        found = correct(line, vocabulary)
        for _, fixed in found.changes:
            assert re.fullmatch(r"[a-z]{4,}", fixed)


class TestMemoryBackend:
    def _store(self) -> MemoryStore:
        store = MemoryStore()
        rows = [
            {"subject": "Cancel subscription", "body": "please cancel our subscription"},
            {"subject": "Cancel plan", "body": "cancel the plan and its subscription today"},
            {"subject": "Invoice", "body": "wrong amount on the invoice"},
            {"subject": "Order 48213", "body": "where is order 48213"},
        ]
        create_persistence_agent(kind="memory", store=store).batch("inquiries", rows)
        return store

    def test_a_typo_finds_the_rows_and_says_so(self) -> None:
        facade = create_read_only_facade(kind="memory", store=self._store())
        result = facade.search("inquiries", "canncel subscrpition", k=2, mode="keyword")
        assert result.corrections == (("canncel", "cancel"), ("subscrpition", "subscription"))
        assert result.query == "cancel subscription"
        assert [row["subject"] for row in result.rows] == ["Cancel subscription", "Cancel plan"]

    def test_a_correct_text_has_no_corrections(self) -> None:
        facade = create_read_only_facade(
            kind="memory", store=self._store(), embeddings=HashEmbeddings()
        )
        result = facade.search("inquiries", "where is order 48213", k=1)
        assert result.corrections == () and result.rows[0]["subject"] == "Order 48213"

    def test_the_vocabulary_follows_writes(self) -> None:
        store = self._store()
        facade = create_read_only_facade(kind="memory", store=store)
        assert facade.search("inquiries", "webhok", mode="keyword").corrections == ()
        create_persistence_agent(kind="memory", store=store).batch(
            "inquiries", [{"subject": "webhook", "body": "webhook failing"}] * 2
        )
        result = facade.search("inquiries", "webhok", k=2, mode="keyword")
        assert result.corrections == (("webhok", "webhook"),)
        assert {row["subject"] for row in result.rows} == {"webhook"}
