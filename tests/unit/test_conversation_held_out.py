"""The agent on the second conversation set (:mod:`tests.data.conversations_held_out`):
follow-ups worded as people type them, over both schemas, written without reading the
follow-up rules.

It was held out once: on memory, without an LLM, 64 of its 84 conversations were answered right
when it was written (0.762; PostgreSQL the same). The rules were then mended for the general gaps
it showed ("go on", "page 2", "#2", "what about June?", "leaving out …", "… instead", another
table named beside an ordinal, "Holdings" in a name read as "on hold"), which brought it to 78/84
(0.929); it is no longer held out. :data:`HELD_OUT_FLOOR` guards that figure with room for two
conversations more to go wrong. The six still wrong: "what did they say?" and "who sent them?"
(a table named by a verb), "and by phone?" after a count, "just the rejected ones" on staged
leads, and a misspelt "nxt page".

The set's shape is checked too: at least 60 conversations of two or three turns, about half on
each schema, every follow-up kind on both schemas, and no follow-up worded as one of the
labelled set's."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.data.conversation_accuracy import Report, evaluate
from tests.data.conversations import KINDS, SCHEMAS, conversations
from tests.data.conversations_held_out import held_out
from tests.unit.test_conversation_accuracy import wrong_turns

# Two runs of 84 conversations on memory: seconds today, a margin for a busy machine.
pytestmark = pytest.mark.timeout(600)

#: The measured rate on memory (78/84 = 0.929) less two conversations.
HELD_OUT_FLOOR = 0.9


# --- the set ------------------------------------------------------------------------------------


def test_the_held_out_set_has_every_kind_on_both_schemas() -> None:
    made = held_out()
    assert len(made) >= 60
    per_schema = Counter(c.schema for c in made)
    assert all(per_schema[s] >= 30 for s in SCHEMAS), per_schema
    kinds = Counter((c.schema, k) for c in made for k in c.kinds)
    assert {(s, k) for s in SCHEMAS for k in KINDS} <= set(kinds), kinds
    assert all(2 <= len(c.turns) <= 3 for c in made)
    assert len({c.id for c in made}) == len(made)
    assert not {c.id for c in made} & {c.id for c in conversations()}


def test_no_follow_up_is_worded_as_in_the_labelled_set() -> None:
    seen = {t.text.casefold() for c in conversations() for t in c.turns[1:]}
    reused = {t.text for c in held_out() for t in c.turns[1:] if t.text.casefold() in seen}
    assert reused == set()


def test_the_held_out_set_holds_negations_counts_and_a_previous_page() -> None:
    texts = {t.text for c in held_out() for t in c.turns[1:]}
    answers = Counter(t.answer for c in held_out() for t in c.turns[1:] if t.kind == "refine")
    assert answers["count"] >= 4
    assert any(t.startswith(("drop the", "leave out", "excluding", "without")) for t in texts)
    backwards = [t for c in held_out() for t in c.turns if t.kind == "page" and t.offset == 0]
    assert backwards


# --- the agent on memory ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def memory_report() -> Report:
    return evaluate("memory", conversation_set="held_out")


def test_held_out_conversations_stay_at_or_above_the_floor_on_memory(
    memory_report: Report,
) -> None:
    assert memory_report.conversation_set == "held_out"
    assert memory_report.overall()[1] == len(held_out())
    assert memory_report.rate() >= HELD_OUT_FLOOR, (
        memory_report.figures()["conversations"],
        wrong_turns(memory_report),
    )


def test_a_json_round_trip_gives_the_same_answers_on_the_held_out_set(
    memory_report: Report,
) -> None:
    tripped = evaluate("memory", conversation_set="held_out", round_trip=True)
    assert memory_report.answers() == tripped.answers()
