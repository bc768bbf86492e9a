"""``topic_of``'s early return (every word left is framing or a table's word) gives what its
word-by-word reading gives: the reading is kept here as it was written before the early return,
and both are compared on text of framing words, table words, particles, topical words, claimed
spans (NUL) and non-ASCII letters, in any case."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rag_agent.understanding.rules import topic
from rag_agent.understanding.rules.topic import FRAMING_WORDS, is_topical


def _topic_read_word_by_word(unclaimed: str) -> str:
    words: list[str] = []
    for run in unclaimed.split("\x00"):
        if not run:
            continue
        previous_kept = False
        for word in topic._WORD.findall(run):
            lower = word.lower()
            framing = lower in FRAMING_WORDS or lower in topic._TABLE_WORDS
            if not framing or (previous_kept and lower in topic._PARTICLES):
                words.append(word)
                previous_kept = not framing
            else:
                previous_kept = False
    return " ".join(words) if is_topical(words) else ""


_WORDS = sorted(FRAMING_WORDS)[::7] + sorted(topic._TABLE_WORDS) + sorted(topic._PARTICLES)
_PIECES = st.one_of(
    st.sampled_from(_WORDS),
    st.sampled_from(_WORDS),
    st.sampled_from(["refund", "sign", "stop paying", "x", "ab", "é", "\u0130", "\u212a", "7"]),
    st.sampled_from(["\x00", "\x00\x00", "'", "\u2019", "-", "_", ",", "?"]),
)
_GLUE = st.sampled_from(["", " ", " ", " ", "  ", "\x00", "\t"])
_TEXT = st.lists(st.tuples(_GLUE, _PIECES), max_size=10).map(
    lambda pairs: "".join(glue + piece for glue, piece in pairs)
)


@settings(max_examples=1500, deadline=None)
@given(text=_TEXT, case=st.sampled_from([str.strip, str.lower, str.upper, str.title]))
def test_the_topic_found_at_once_is_the_one_read_word_by_word(text: str, case: object) -> None:
    text = case(text)  # type: ignore[operator]
    assert topic.topic_of(text) == _topic_read_word_by_word(text), text
