"""Fusion weights chosen per query: a text naming an identifier lets the keyword leg lead, and
the memory backend fuses with exactly those weights."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from persistence import MemoryStore, create_persistence_agent, create_read_only_facade
from persistence.search import RRF_K
from persistence.search.fusion import DEFAULT_WEIGHTS, IDENTIFIER_WEIGHTS, fuse, weights_for
from persistence.search.text import names_identifier
from tests.support.search import HashEmbeddings


@pytest.mark.parametrize(
    ("text", "identifier"),
    [
        ("where is order #48213?", True),
        ("problem with INV-2025-1522", True),
        ("ticket ab12cd", True),
        ("invoices from 2024", False),  # a year is no identifier
        ("customers who want to stop paying", False),
        ("2fa codes", False),  # three characters: a word, not an id
        ("", False),
    ],
)
def test_identifier_texts_get_the_identifier_weights(text: str, identifier: bool) -> None:
    assert names_identifier(text) is identifier
    assert weights_for(text) is (IDENTIFIER_WEIGHTS if identifier else DEFAULT_WEIGHTS)


@given(st.text(alphabet=st.characters(categories=["L", "Zs", "P"]), max_size=60))
def test_a_text_without_digits_keeps_the_default_weights(text: str) -> None:
    assert weights_for(text, "inquiries") is DEFAULT_WEIGHTS


_KEYS = st.one_of(st.integers(min_value=0, max_value=500), st.just(1000))


@given(
    st.lists(_KEYS, min_size=1, max_size=100, unique=True),
    st.lists(_KEYS, max_size=100, unique=True),
)
def test_the_keyword_legs_row_comes_first(semantic: list[int], trigram: list[int]) -> None:
    """Under the identifier weights, the one row the keyword leg ranks (the row holding the
    identifier) comes first, wherever the semantic and trigram legs rank it, if at all (its key
    is the largest, so no tie-break favours it)."""
    holder = 1000
    legs = {"keyword": [holder], "trigram": trigram, "semantic": semantic}
    assert fuse(legs, IDENTIFIER_WEIGHTS)[0][0] == holder
    if holder not in semantic + trigram and trigram[:1] == semantic[:1]:
        # under the default weights, a row first in both other legs leads instead
        assert fuse(legs, DEFAULT_WEIGHTS)[0][0] != holder


def _store() -> MemoryStore:
    store = MemoryStore()
    writer = create_persistence_agent(kind="memory", store=store)
    rows = [
        {"subject": "Invoice question", "body": f"about the invoice total {i}"} for i in range(30)
    ]
    rows.append({"subject": "Payment", "body": "please look at INV-2025-4242 for us"})
    writer.batch("inquiries", rows)
    return store


def test_memory_hybrid_ranks_the_identifier_row_first_with_the_identifier_weights() -> None:
    facade = create_read_only_facade(kind="memory", store=_store(), embeddings=HashEmbeddings())
    text = "invoice INV-2025-4242"
    result = facade.search("inquiries", text, k=10)
    assert result.legs == ("keyword", "trigram", "semantic")
    assert "INV-2025-4242" in result.rows[0]["body"]
    for hit in result.hits:
        expected = sum(
            IDENTIFIER_WEIGHTS[leg] / (RRF_K + rank)
            for leg, rank in hit.ranks.items()
            if rank is not None
        )
        assert math.isclose(hit.score, expected, rel_tol=1e-12)


def test_feedback_only_where_the_semantic_leg_leads_the_fusion() -> None:
    """A text naming an identifier (the keyword leg leads) takes no feedback step; every other
    text does, and so do weights naming no keyword leg."""
    from persistence.search.feedback import takes_feedback

    assert takes_feedback(weights_for("customers who want to stop paying"))
    assert not takes_feedback(weights_for("problem with INV-2025-1522"))
    assert takes_feedback({"semantic": 1.0})
    assert not takes_feedback({"keyword": 1.0})
