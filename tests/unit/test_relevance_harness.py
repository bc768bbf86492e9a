"""The relevance harness: its metrics on hand-made rankings, the labelled set's honesty, and a run
on a small slice that catches a broken search (no assertion on how good the ranking is beyond a
floor far above chance)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.data import relevance
from tests.data.search_corpus import build
from tests.data.search_queries import check_paraphrases, load, make_queries, relevant_ids
from tests.data.search_topics import TOPICS


def test_precision_counts_relevant_rows_among_the_first_ten_out_of_at_most_ten() -> None:
    ranking = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
    assert relevance.precision_at(ranking, {1, 3, 11, 50}) == pytest.approx(2 / 4)
    assert relevance.precision_at(ranking, set(range(1, 40))) == 1.0
    assert relevance.precision_at(ranking, {11}) == 0.0
    assert relevance.precision_at([7], {7}) == 1.0  # one relevant row, found first
    assert relevance.precision_at([], {7}) == 0.0
    assert relevance.precision_at([1], set()) == 0.0


def test_ndcg_discounts_by_position() -> None:
    assert relevance.ndcg_at([1, 2], {1}) == 1.0
    assert relevance.ndcg_at([2, 1], {1}) == pytest.approx(1 / math.log2(3))
    both_late = relevance.ndcg_at([5, 6, 1, 2], {1, 2})
    ideal = 1 + 1 / math.log2(3)
    assert both_late == pytest.approx((1 / math.log2(4) + 1 / math.log2(5)) / ideal)


def test_recall_is_out_of_the_relevant_rows_capped_at_the_depth() -> None:
    assert relevance.recall_at([1, 2, 3], {1, 3, 9, 10}) == 0.5
    assert relevance.recall_at(list(range(100)), set(range(200))) == 1.0
    assert relevance.recall_at([5], {1}) == 0.0


@given(
    st.lists(st.integers(0, 60), unique=True, max_size=120),
    st.sets(st.integers(0, 60), min_size=1),
)
def test_metrics_lie_in_the_unit_interval_and_a_perfect_ranking_scores_one(
    ranking: list[int], relevant: set[int]
) -> None:
    for metric in (relevance.precision_at, relevance.ndcg_at, relevance.recall_at):
        assert 0.0 <= metric(ranking, relevant) <= 1.0
        perfect = sorted(relevant) + [x for x in ranking if x not in relevant]
        assert metric(perfect, relevant) == pytest.approx(1.0)


def test_the_mean_and_the_table_cover_every_type_and_mode() -> None:
    scores = [relevance.Score(1.0, 1.0, 0.5), relevance.Score(0.0, 0.5, 0.5)]
    assert relevance.mean(scores) == relevance.Score(0.5, 0.75, 0.5)
    table = relevance.markdown(
        {"hybrid": {"framed": scores[0], "all": scores[0]}}, {"framed": 1, "all": 1}
    )
    assert "| framed | 1 | 1.000 | 1.000 | 0.500 |" in table
    assert "| **all** | 1 |" in table


def test_the_labelled_set_is_what_the_builder_writes_and_is_honest() -> None:
    corpus = build()
    written = load()
    assert written == make_queries(corpus)
    assert len(written) >= 300
    assert {q["table"] for q in written} == {"inquiries", "messages"}
    assert {q["type"] for q in written} == set(relevance.TYPES)
    # Paraphrases share no topic word with any row they must find.
    assert check_paraphrases(corpus, written) == []
    assert all(relevant_ids(corpus, q) for q in written)


def test_the_corpus_is_seeded_and_labels_every_row() -> None:
    first, second = build(messages=300, inquiries=60), build(messages=300, inquiries=60)
    assert first.rows["messages"] == second.rows["messages"]
    assert set(first.topics["inquiries"].values()) <= {*TOPICS, "general"}
    assert len(first.topics["messages"]) == 300


def test_the_harness_ranks_a_small_slice_far_above_chance() -> None:
    corpus = build(messages=1_500, inquiries=400)
    queries = [q for q in load() if q["type"] in ("keyword", "framed")][::8]
    embeddings = relevance.default_embeddings()
    facade = relevance.memory_facade(corpus, embeddings)
    results = relevance.evaluate(
        corpus, queries, dict.fromkeys(relevance.MODES, relevance.facade_ranker(facade))
    )
    # Fourteen topics and chit-chat: a random ranking scores about 0.06 here.
    assert results["hybrid"]["all"].precision > 0.5
    assert set(results) == set(relevance.MODES)
