"""The rule parser answers every labelled query exactly as recorded (``rule_parser_outputs.json``:
the ``repr`` of each ``Understanding``, for four tables; recorded before the performance round,
re-recorded when the rules came to read the database's learned vocabulary, each change reviewed),
and its pre-checks and gates never change an answer on texts built from the labelled queries'
words."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_agent.understanding.rules import understand
from rag_agent.understanding.rules.reading import Reading
from tests.data.accuracy import NOW

_DATA = Path(__file__).resolve().parents[1] / "data"
_RECORDED = json.loads((_DATA / "rule_parser_outputs.json").read_text(encoding="utf-8"))
_TEXTS = [
    json.loads(line)["text"]
    for line in (_DATA / "labelled_queries.jsonl").read_text(encoding="utf-8").splitlines()
    if line.strip()
]
_WORDS = sorted({word for text in _TEXTS for word in text.split()})


@pytest.mark.parametrize("item", _RECORDED, ids=lambda item: f"{item['table']}:{item['text']}")
def test_recorded_output(item: dict[str, str]) -> None:
    assert repr(understand(item["text"], table=item["table"], now=NOW)) == item["understood"]


def test_every_labelled_query_is_recorded() -> None:
    assert {item["text"] for item in _RECORDED} == set(_TEXTS)


class _Unchecked(Reading):
    """A reading whose pre-checks and gates always pass: every rule's regex runs, as before
    them."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.said = None  # the words are unknown: no gate closes
        self._folded = None  # nor is the lower-cased text: no pre-check closes either

    def may_hold(self, words: tuple[str, ...]) -> bool:
        return True

    @property
    def may_capitalise(self) -> bool:
        return True


_TEXT = st.lists(
    st.one_of(st.sampled_from(_WORDS), st.text(min_size=1, max_size=8)), max_size=14
).map(" ".join)


@settings(max_examples=300, deadline=None)
@given(text=_TEXT, table=st.sampled_from([None, "leads", "campaigns", "messages", "clients"]))
def test_prechecks_change_nothing(text: str, table: str | None) -> None:
    import rag_agent.understanding.rules.parser as parser

    checked = understand(text, table=table, now=NOW)
    original = parser.Reading
    parser.Reading = _Unchecked  # type: ignore[misc]
    try:
        unchecked = understand(text, table=table, now=NOW)
    finally:
        parser.Reading = original  # type: ignore[misc]
    assert checked == unchecked
