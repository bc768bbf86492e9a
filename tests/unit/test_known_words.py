"""The words a words table was seen to hold, remembered per table for a while: a text is known
only when every word is, none expired, and the oldest words go first past the limit."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from persistence.backends.postgres.known_words import KnownWords

_WORDS = st.lists(st.sampled_from(["cancel", "refund", "parcel", "login", "invoice"]), max_size=6)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@given(added=_WORDS, asked=_WORDS)
def test_a_text_is_known_when_every_word_was_added(added: list[str], asked: list[str]) -> None:
    known = KnownWords(clock=Clock())
    known.add("t", added)
    assert known.hold("t", asked) == (set(asked) <= set(added))
    assert not known.hold("other", asked)  # nothing was added under another key


def test_words_expire() -> None:
    clock = Clock()
    known = KnownWords(seconds=60.0, clock=clock)
    known.add("t", ["cancel"])
    clock.now = 59.0
    assert known.hold("t", ["cancel"])
    known.add("t", ["refund"])
    clock.now = 60.0
    assert not known.hold("t", ["cancel"])  # added at 0
    assert known.hold("t", ["refund"])  # added at 59


def test_the_oldest_words_go_first() -> None:
    clock = Clock()
    known = KnownWords(limit=2, clock=clock)
    known.add("t", ["cancel", "refund"])
    known.add("t", ["cancel"])  # seen again: now the newest
    known.add("t", ["parcel"])
    assert known.hold("t", ["cancel", "parcel"])
    assert not known.hold("t", ["refund"])


def test_keys_are_apart() -> None:
    known = KnownWords(clock=Clock())
    known.add(("public", "inquiries", ("subject",)), ["cancel"])
    assert not known.hold(("public", "inquiries", ("subject", "body")), ["cancel"])
