"""The parser rules that return at once when their gates are all closed (references, keyed
columns, exclusions/places/people) read what they read with no gate at all: each is run on a
reading that knows the text's words and on one that knows none (every regex then runs), and
both readings must end the same, on text mixing the gates' words, ids, names and odd
characters, in any case, on every table of the sample."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_agent.understanding.rules import parser
from rag_agent.understanding.rules.reading import Reading
from rag_agent.understanding.rules.sample_vocabulary import sample_vocabulary

_RULES: dict[str, Callable[[Reading], object]] = {
    "references": parser._references,
    "keyed columns": parser._keyed_columns,
    "exclusions, places, people": parser._exclusions_places_people,
}
_WORDS = sorted(
    parser._EXCLUDE_WORDS
    | parser._PLACE_WORDS
    | parser._PERSON_WORDS
    | {
        ":",
        "=",
        "name",
        "first name",
        "last name",
        "surname",
        "status",
        "stage",
        "won",
        "new",
        "Acme",
        "Berlin",
        "Ana Silva",
        "leads",
        "client",
        "campaign",
        "id",
        "uuid",
        "#",
        "#7",
        "7",
        "42",
        "-",
        "client 7",
        "lead #3",
        "550e8400-e29b-41d4-a716-446655440000",
        "other than",
        "apart from",
        "except for",
        "based in",
        "named",
        "called",
        "'s",
        "é",
        "\u212a",
        "x",
        "in Berlin",
        "near Lyon",
        "not at Acme",
        "leads named Ana Silva",
        "first name Ana",
        "status: won",
        "stage=new",
        "id 7",
        "client_id=3",
        "uuid 550e8400-e29b-41d4-a716-446655440000",
    }
)
_GLUE = st.sampled_from(["", " ", " ", " ", " ", " ", ", ", ": ", "=", "-", "_"])
_TEXT = st.lists(st.tuples(_GLUE, st.sampled_from(_WORDS)), min_size=1, max_size=10).map(
    lambda pairs: "".join(glue + word for glue, word in pairs).strip() or "x"
)
_TABLES = sorted(sample_vocabulary().tables)


def _state(reading: Reading) -> tuple[object, ...]:
    return (reading.text, list(reading.conditions), list(reading.ignored))


@pytest.mark.parametrize("name", sorted(_RULES))
@settings(max_examples=400, deadline=None)
@given(
    text=_TEXT,
    case=st.sampled_from([str.strip, str.lower, str.upper, str.title]),
    table=st.sampled_from(_TABLES),
)
def test_a_rule_with_its_gates_reads_what_it_reads_without_them(
    name: str, text: str, case: Callable[[str], str], table: str
) -> None:
    rule = _RULES[name]
    text = case(text)
    gated = Reading(text, table, sample_vocabulary())
    ungated = Reading(text, table, sample_vocabulary())
    ungated.said, ungated._folded = None, None  # no word known: every regex runs
    assert rule(gated) == rule(ungated), text
    assert _state(gated) == _state(ungated), text
