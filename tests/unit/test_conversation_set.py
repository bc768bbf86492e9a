"""The labelled conversation set itself (``tests/data/conversations.py``), checked without an
agent: its size and spread, and every truth re-derived or bounded from the rows."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from tests.data import conversations as module
from tests.data.conversations import (
    KINDS,
    LIMIT,
    PAGE,
    RELATED_CAP,
    SCHEMAS,
    LabelledConversation,
    Turn,
    conversations,
    relations,
)
from tests.data.schema_questions import names_table, schema_rows

ALL = conversations()
PAIRS = [(c, i) for c in ALL for i in range(1, len(c.turns))]
#: The ordinal an item follow-up names: "the second one", "#3 of that list", "number 2 of those".
ORDINALS = {"first": 1, "second": 2, "third": 3, "last": -1}
#: Words that ask for rows, so a refinement after a count is no longer a count.
ROW_WORDS = re.compile(r"\b(show|list|which|who)\b", re.IGNORECASE)


def follow_id(pair: tuple[LabelledConversation, int]) -> str:
    return f"{pair[0].id}-{pair[1] + 1}"


def ordinal(text: str) -> int:
    word = re.search(r"\b(first|second|third|last)\b", text)
    if word:
        return ORDINALS[word[1]]
    number = re.search(r"(?:#|number )(\d+)", text)
    assert number, text
    return int(number[1])


def test_at_least_100_two_and_three_turn_conversations_over_both_schemas() -> None:
    assert len(ALL) >= 100
    assert len({c.id for c in ALL}) == len(ALL)
    for schema in SCHEMAS:
        mine = [c for c in ALL if c.schema == schema]
        assert len(mine) >= 50, schema
        assert {len(c.turns) for c in mine} == {2, 3}, schema


def test_every_follow_up_kind_on_both_schemas() -> None:
    spread = Counter((c.schema, t.kind) for c in ALL for t in c.turns[1:])
    assert {(s, k) for s in SCHEMAS for k in KINDS} <= set(spread)
    assert all(spread[s, k] >= 5 for s in SCHEMAS for k in KINDS), spread
    for c in ALL:
        assert c.turns[0].kind == "first"
        assert c.kinds == tuple(t.kind for t in c.turns[1:])
        assert set(c.kinds) <= set(KINDS)


@pytest.mark.parametrize("labelled", ALL, ids=lambda c: c.id)
def test_every_truth_is_non_empty_and_made_of_existing_rows(labelled: LabelledConversation) -> None:
    data = schema_rows(labelled.schema)
    for turn in labelled.turns:
        assert turn.truth_count > 0, turn.text
        existing = {r["id"] for r in data[turn.table]}
        if turn.answer == "count":
            assert turn.truth_ids == frozenset()
            assert turn.limit is None
        else:
            assert turn.answer == "rows"
            assert len(turn.truth_ids) == turn.truth_count
            assert turn.truth_ids <= existing, turn.text


def test_how_many_turns_are_counts_and_counts_stay_counts() -> None:
    for c in ALL:
        for index, turn in enumerate(c.turns):
            if "how many" in turn.text:
                assert turn.answer == "count", (c.id, turn.text)
            before = c.turns[index - 1] if index else None
            if turn.kind == "refine" and before is not None and before.answer == "count":
                expected = "rows" if ROW_WORDS.search(turn.text) else "count"
                assert turn.answer == expected, (c.id, turn.text)


def test_opening_turns_name_their_table_plainly() -> None:
    for c in ALL:
        first = c.turns[0]
        assert first.given_table is None, (c.id, first.text)
        assert names_table(first.table, first.text), (c.id, first.text)
        assert all(t.given_table is None for t in c.turns[1:]), c.id


@pytest.mark.parametrize(
    "pair", [p for p in PAIRS if p[0].turns[p[1]].kind == "related"], ids=follow_id
)
def test_related_turns_are_the_rows_linked_to_every_previous_row(
    pair: tuple[LabelledConversation, int],
) -> None:
    """Re-derived through the declared foreign key, from all the previous rows (at most 100)."""
    labelled, index = pair
    before, turn = labelled.turns[index - 1], labelled.turns[index]
    assert before.answer == "rows" and before.limit is None
    assert 0 < before.truth_count <= RELATED_CAP
    assert _linked(labelled.schema, before.table, before.truth_ids, turn.table) == turn.truth_ids


@pytest.mark.parametrize(
    "pair", [p for p in PAIRS if p[0].turns[p[1]].kind == "item"], ids=follow_id
)
def test_item_turns_are_the_nth_record_of_the_previous_page(
    pair: tuple[LabelledConversation, int],
) -> None:
    labelled, index = pair
    before, turn = labelled.turns[index - 1], labelled.turns[index]
    assert before.answer == "rows" and before.limit is None
    assert 0 < before.truth_count <= min(RELATED_CAP, LIMIT)  # the page holds every true row
    n = ordinal(turn.text)
    record = sorted(before.truth_ids)[n - 1 if n > 0 else n]
    if turn.table == before.table:
        assert turn.truth_ids == {record}
    else:
        assert turn.truth_ids == _linked(labelled.schema, before.table, {record}, turn.table)


@pytest.mark.parametrize(
    "pair", [p for p in PAIRS if p[0].turns[p[1]].kind == "page"], ids=follow_id
)
def test_page_turns_are_the_next_slice_of_the_same_selection(
    pair: tuple[LabelledConversation, int],
) -> None:
    labelled, index = pair
    before, turn = labelled.turns[index - 1], labelled.turns[index]
    assert before.limit == turn.limit == PAGE
    assert turn.offset == before.offset + PAGE
    assert (turn.table, turn.truth_ids) == (before.table, before.truth_ids)
    assert turn.page_ids == frozenset(sorted(turn.truth_ids)[turn.offset : turn.offset + PAGE])
    assert turn.page_ids  # a next page that holds rows
    assert len(labelled.turns[0].page_ids or ()) == PAGE


def test_refinements_keep_the_previous_table_and_narrow_or_widen_it() -> None:
    """A refinement reads the previous table; "not X" of a previous condition widens it,
    everything else narrows (the month replacements aside)."""
    for labelled, index in PAIRS:
        before, turn = labelled.turns[index - 1], labelled.turns[index]
        if turn.kind != "refine":
            continue
        assert turn.table == before.table, labelled.id
        widened = re.match(r"not ", turn.text) is not None
        replaced = turn.text.startswith("and in ")
        if before.answer == "rows" and turn.answer == "rows" and not (widened or replaced):
            assert turn.truth_ids <= before.truth_ids, (labelled.id, turn.text)
        if widened and before.answer == "rows":
            assert turn.truth_ids >= before.truth_ids, (labelled.id, turn.text)


def test_the_set_is_deterministic_and_json_ready() -> None:
    import json

    again = (*module._sample(), *module._second())
    assert [c.as_dict() for c in again] == [c.as_dict() for c in ALL]
    text = json.dumps([c.as_dict() for c in ALL])
    assert json.loads(text)[0]["turns"][0]["kind"] == "first"


def test_the_module_prints_the_counts(capsys: pytest.CaptureFixture[str]) -> None:
    module._main()
    out = capsys.readouterr().out
    assert f"total {len(ALL)} conversations" in out
    for kind in KINDS:
        assert kind in out


def test_turn_pages_are_only_asked_on_paging_conversations() -> None:
    for c in ALL:
        limits = [t.limit for t in c.turns]
        if "page" in c.kinds:
            assert limits == [PAGE] * len(c.turns), c.id
        else:
            assert limits == [None] * len(c.turns), c.id
        assert all(isinstance(t, Turn) for t in c.turns)


def _linked(
    schema: str, table: str, ids: frozenset[object] | set[object], other: str
) -> set[object]:
    """The ids of ``other``'s rows linked by the declared foreign key to ``ids`` of ``table``."""
    data = schema_rows(schema)
    (relation,) = [
        r for r in relations(schema) if {r.parent_table, r.child_table} == {table, other}
    ]
    if relation.parent_table == table:
        return {r["id"] for r in data[other] if r[relation.child_column] in ids}
    keys = {r[relation.child_column] for r in data[table] if r["id"] in ids}
    return {r["id"] for r in data[other] if r["id"] in keys}
