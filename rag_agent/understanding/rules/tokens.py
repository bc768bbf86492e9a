"""The words of a request, tokenised once, and phrase look-ups by dict instead of by scan.

The column rules ask, at many positions of a request, "does a phrase of this column start
here?". Scanning every phrase at every position costs the number of phrases times the number of
words, per rule and per question; instead each set of phrases is indexed once (by its first
stem, longest phrase first: :func:`phrase_index`, cached by the lexicon that owns the phrases)
and a position is answered by one dict look-up (:func:`phrase_at`).

The rules claim spans of the text as they read it (NUL characters), so the words change as the
request is read: they are tokenised once, and a claim drops the words it covers
(:func:`unclaimed`) rather than tokenising the text again (see
:attr:`~rag_agent.understanding.rules.reading.Reading.words`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from persistence.vocabulary import stem

__all__ = [
    "NEGATING_PREFIXES",
    "WORD_RE",
    "PhraseIndex",
    "Token",
    "Words",
    "phrase_at",
    "phrase_index",
    "start_stems",
    "tokenize",
    "unclaimed",
]

#: A word: letters and digits, with one apostrophe inside ("isn't", "o'brien").
WORD_RE = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)?")
#: Prefixes that negate the word they are written onto ("inactive", "non-qualified").
NEGATING_PREFIXES = ("non", "un", "in", "dis")

#: Phrases (tuples of stems) by their first stem, longest first.
PhraseIndex = Mapping[str, tuple[tuple[str, ...], ...]]


class Token(NamedTuple):
    """One word of the text: as written (lower case), its stem, and its span."""

    text: str
    stem: str
    start: int
    end: int


def tokenize(text: str) -> tuple[Token, ...]:
    """The words of ``text`` (claimed spans are NUL, so they hold none)."""
    found = []
    for match in WORD_RE.finditer(text):
        word = match.group().lower()
        found.append(_new(Token, (word, _stem_of(word), match.start(), match.end())))
    return tuple(found)


#: A token made straight from its four fields (no argument binding nor length check, as in
#: ``Token(...)`` or ``Token._make``): a request makes one per word.
_new = tuple.__new__


def unclaimed(
    found: tuple[Token, ...], text: str, claims: Sequence[tuple[int, int]]
) -> tuple[Token, ...]:
    """The words of ``text``, which is the text ``found`` was read from with the spans
    ``claims`` masked (``0 <= start <= end <= len(text)`` each).

    A word wholly inside a claimed span is gone and a word outside every one is unchanged
    (masking turns characters into NUL, which joins no words and starts none), so only a word
    claimed in part makes the text be read afresh.
    """
    kept = []
    for token in found:
        for start, end in claims:
            if token.start < end and start < token.end:
                if start <= token.start and token.end <= end:
                    break  # claimed whole
                return tokenize(text)  # claimed in part: what is left of it is read anew
        else:
            kept.append(token)
    return tuple(kept)


class Words:
    """The words of a text being read, with the indexes the rules look phrases up in (each
    built when first asked for, once per state of the text)."""

    __slots__ = ("_positions", "_starts", "tokens")

    def __init__(self, tokens: tuple[Token, ...]) -> None:
        self.tokens = tokens
        self._positions: dict[str, tuple[int, ...]] | None = None
        self._starts: frozenset[str] | None = None

    @property
    def positions(self) -> Mapping[str, tuple[int, ...]]:
        """Where each stem stands among :attr:`tokens`: stem → indexes, in order."""
        if self._positions is None:
            found: dict[str, list[int]] = {}
            for index, token in enumerate(self.tokens):
                found.setdefault(token.stem, []).append(index)
            self._positions = {word: tuple(indexes) for word, indexes in found.items()}
        return self._positions

    @property
    def start_stems(self) -> frozenset[str]:
        """:func:`start_stems` of every token: no phrase whose first stem is not here starts
        anywhere in the text."""
        if self._starts is None:
            self._starts = frozenset().union(*(start_stems(t.text) for t in self.tokens))
        return self._starts

    def starts_in(self, index: PhraseIndex) -> list[int]:
        """The indexes of :attr:`tokens` where a phrase of ``index`` may start (its first stem
        stands there), in order: every other index is known to hold none. One pass over the
        words (a request has a few), without building :attr:`positions` for it."""
        return [i for i, token in enumerate(self.tokens) if token.stem in index]


@functools.lru_cache(maxsize=65536)
def _stem_of(word: str) -> str:
    return stem(word.replace("\u2019", "'"))


@functools.lru_cache(maxsize=65536)
def start_stems(word: str) -> frozenset[str]:
    """The stems a phrase met at the token ``word`` may start with: the token's own stem, and
    the stem of the word without a negating prefix ("inactive" → "activ")."""
    found = {_stem_of(word)}
    found.update(
        stem(word[len(prefix) :].lstrip("-"))
        for prefix in NEGATING_PREFIXES
        if word.startswith(prefix)
    )
    return frozenset(found)


def phrase_index(phrases: Iterable[tuple[str, ...]]) -> PhraseIndex:
    """``phrases`` by their first stem, longest first (an empty phrase is never met)."""
    index: dict[str, list[tuple[str, ...]]] = {}
    for phrase in sorted(set(phrases), key=len, reverse=True):
        if phrase:
            index.setdefault(phrase[0], []).append(phrase)
    return {first: tuple(found) for first, found in index.items()}


def phrase_at(found: Sequence[Token], i: int, index: PhraseIndex) -> int:
    """The length of the longest phrase of ``index`` at ``found[i]`` (0: none)."""
    if i >= len(found):
        return 0
    for phrase in index.get(found[i].stem, ()):
        length = len(phrase)
        if length == 1 or tuple(t.stem for t in found[i : i + length]) == phrase:
            return length
    return 0
