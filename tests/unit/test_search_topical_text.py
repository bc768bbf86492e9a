"""What both search legs rank by: request framing and row nouns removed, identifiers first."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from persistence.search.text import (
    FRAMING_WORDS,
    MAX_KEYWORD_TERMS,
    REQUEST_WORDS,
    WEAK_WORDS,
    keyword_terms,
    topical_text,
)
from rag_agent.understanding.rules import topic


@pytest.mark.parametrize(
    ("text", "table", "topical"),
    [
        ("customers who want to stop paying", "inquiries", "stop paying"),
        ("people asking about login problems", "messages", "login problems"),
        ("requests to reset a password", "inquiries", "reset password"),
        ("messages where someone could not sign in", "messages", "could not sign"),
        ("inquiries from people who want to cancel", "inquiries", "cancel"),
        ("clients complaining that the dashboard is slow", "inquiries", "dashboard slow"),
        ("leads who asked for a discount", "leads", "discount"),
        ("new customers asking for onboarding", "inquiries", "onboarding"),
        # Topical words stay, even those framing phrases are made of elsewhere.
        ("customer database sync", "inquiries", "customer database sync"),
        ("wishes for new capabilities", "messages", "wishes new capabilities"),
    ],
)
def test_framing_and_row_nouns_are_removed(text: str, table: str, topical: str) -> None:
    assert topical_text(text, table) == topical


def test_the_tables_own_row_noun_goes_in_singular_and_plural() -> None:
    assert topical_text("campaign about spring", "campaigns") == "spring"
    assert topical_text("sequences for spring", "sequences") == "spring"


def test_nothing_topical_left_keeps_the_whole_text() -> None:
    assert topical_text("show me the messages", "messages") == "show me the messages"


def test_keyword_terms_are_the_legs_tokens_and_an_identifier_alone() -> None:
    assert keyword_terms("can't log in", "inquiries") == ("can", "log")
    assert keyword_terms("invoice INV-2025-1522 is wrong", "inquiries") == ("1522",)
    assert keyword_terms("where is order #48213?", "messages") == ("48213",)
    # Short numbers and years are words, not identifiers.
    assert keyword_terms("error 500 since 2025", "messages") == ("error", "500", "since", "2025")


@given(st.text(max_size=300))
def test_keyword_terms_are_bounded_distinct_and_lower_case(text: str) -> None:
    terms = keyword_terms(text, "messages")
    assert len(terms) <= MAX_KEYWORD_TERMS
    assert len(set(terms)) == len(terms)
    assert all(term == term.lower() and term for term in terms)


def test_one_framing_list_for_the_search_text_and_the_rules_topic() -> None:
    """The rules' topical remainder drops every word a search text drops, from the same list,
    plus the words of a request to a database; the weak words are the same object."""
    assert topic.FRAMING_WORDS == FRAMING_WORDS | REQUEST_WORDS
    assert topic.WEAK_WORDS is WEAK_WORDS
    assert not FRAMING_WORDS & WEAK_WORDS - {"all"}


@given(st.lists(st.sampled_from(sorted(FRAMING_WORDS)), min_size=1, max_size=6))
def test_framing_alone_is_never_a_topic(words: list[str]) -> None:
    """Only framing words: no topic for the rules; the search text falls back to the whole."""
    text = " ".join(words)
    assert topic.topic_of(text) == ""
    assert topical_text(f"{text} shipping") == "shipping"
