"""The words of a request, tokenised once, and phrase look-ups by dict instead of by scan.

The column rules ask, at many positions of a request, "does a phrase of this column start
here?". Scanning every phrase at every position costs the number of phrases times the number of
words, per rule and per question; instead each set of phrases is indexed once (by its first
stem, longest phrase first: :func:`phrase_index`, cached by the lexicon that owns the phrases)
and a position is answered by one dict look-up (:func:`phrase_at`).

The rules claim spans of the text as they read it (NUL characters), so the same request is
tokenised in several states; :func:`tokens` keeps the few states one question needs.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from persistence.vocabulary import stem

__all__ = [
    "NEGATING_PREFIXES",
    "PhraseIndex",
    "Token",
    "all_start_stems",
    "phrase_at",
    "phrase_index",
    "positions",
    "start_stems",
    "starts_in",
    "tokens",
]

_TOKEN_RE = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)?")
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


@functools.lru_cache(maxsize=16)
def tokens(text: str) -> tuple[Token, ...]:
    """The words of ``text`` (claimed spans are NUL, so they hold none)."""
    # The rules tokenise the same (partly claimed) text several times within one question:
    # once per text suffices, and a few texts are all one question needs (so no long question
    # is kept after it).
    return tuple(
        Token(word, _stem_of(word), *match.span())
        for match in _TOKEN_RE.finditer(text)
        for word in (match.group().lower(),)
    )


@functools.lru_cache(maxsize=16)
def positions(text: str) -> Mapping[str, tuple[int, ...]]:
    """Where each stem stands among :func:`tokens` of ``text``: stem → indexes, in order."""
    found: dict[str, list[int]] = {}
    for index, token in enumerate(tokens(text)):
        found.setdefault(token.stem, []).append(index)
    return {word: tuple(indexes) for word, indexes in found.items()}


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


@functools.lru_cache(maxsize=16)
def all_start_stems(text: str) -> frozenset[str]:
    """:func:`start_stems` of every token of ``text``: no phrase whose first stem is not here
    starts anywhere in it."""
    return frozenset().union(*(start_stems(token.text) for token in tokens(text)))


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


def starts_in(text: str, index: PhraseIndex) -> list[int]:
    """The indexes of :func:`tokens` of ``text`` where a phrase of ``index`` may start (its first
    stem stands there), in order: every other index is known to hold none."""
    at = positions(text)
    if len(index) < len(at):
        return sorted(i for first in index for i in at.get(first, ()))
    return sorted(i for first, found in at.items() if first in index for i in found)
