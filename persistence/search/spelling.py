""" "Did you mean": a search text's misspelled words replaced by words of the table itself,
before every leg ranks — shared by every backend, so every backend corrects alike.

A word is corrected only when all of these hold (anything else is left as typed):

* it is plain ASCII letters, at least :data:`MIN_WORD_LENGTH` of them (no digit: identifiers,
  order numbers and years are never touched), and not request framing
  (:data:`~persistence.search.text.FRAMING_WORDS`);
* the table's vocabulary does not hold it (a word some row holds is never "corrected");
* a vocabulary word held by at least :data:`MIN_DOCUMENT_FREQUENCY` rows is one edit away
  (a letter dropped, added, changed, or two neighbours swapped: optimal string alignment
  distance 1) and shares enough trigrams with it (pg_trgm's ``similarity`` at least
  :data:`CANDIDATE_SIMILARITY`, which a trigram index answers on PostgreSQL). Among several,
  the one most rows hold wins, then the alphabetically first.

At most :data:`MAX_CORRECTIONS` words of one text are looked up. The vocabulary is what the
backend has: the memory backend counts the words of the table's rows; PostgreSQL reads the words
table the admin step ``rag-agent index`` writes, and skips correction (saying so) without it.

>>> vocabulary = CountedVocabulary({"cancel": 40, "subscription": 12, "order": 90})
>>> correct("canncel subscrpition for order 48213", vocabulary).text
'cancel subscription for order 48213'
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from persistence.search.text import FRAMING_WORDS, MAX_KEYWORD_TERMS
from persistence.search.trigram import similarity, trigrams

__all__ = [
    "CANDIDATE_SIMILARITY",
    "MAX_CORRECTIONS",
    "MIN_DOCUMENT_FREQUENCY",
    "MIN_WORD_LENGTH",
    "Correction",
    "CountedVocabulary",
    "Vocabulary",
    "correct",
    "correctable",
    "edit_distance",
    "has_correctable",
    "is_vocabulary_word",
    "looked_up",
]

#: Shorter words are left alone: one edit away from a three-letter word are dozens of others.
MIN_WORD_LENGTH = 4
#: A candidate must share this share of trigrams with the typed word (pg_trgm ``similarity``);
#: pg_trgm's default ``similarity_threshold``, which its GIN index serves.
CANDIDATE_SIMILARITY = 0.3
#: A candidate must be held by at least this many rows: a word one row holds is as likely
#: a typo itself.
MIN_DOCUMENT_FREQUENCY = 2
#: At most this many words of one text are looked up (each is one index probe on PostgreSQL).
MAX_CORRECTIONS = MAX_KEYWORD_TERMS

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_VOCABULARY_WORD = re.compile(rf"[a-z]{{{MIN_WORD_LENGTH},}}")


class Vocabulary(Protocol):
    """A table's words and how many rows hold each (lower-case ASCII words only)."""

    def known(self, words: Sequence[str]) -> set[str]:
        """Which of ``words`` some row holds."""

    def similar(self, words: Sequence[str]) -> Mapping[str, Sequence[tuple[str, int]]]:
        """For each of ``words``, the vocabulary words held by at least
        :data:`MIN_DOCUMENT_FREQUENCY` rows whose trigram similarity to it is at least
        :data:`CANDIDATE_SIMILARITY`, with their row counts."""


def is_vocabulary_word(word: str) -> bool:
    """Whether ``word`` (a lower-cased token) may be in a vocabulary: ASCII letters only, at
    least :data:`MIN_WORD_LENGTH` of them (what a correction can be)."""
    return _VOCABULARY_WORD.fullmatch(word) is not None


def correctable(word: str) -> bool:
    """Whether a typed word may be corrected at all (before asking the vocabulary)."""
    lowered = word.lower()
    return is_vocabulary_word(lowered) and lowered not in FRAMING_WORDS


def has_correctable(text: str) -> bool:
    """Whether ``text`` has a word :func:`correct` might replace (no vocabulary needed)."""
    return any(correctable(word) for word in _WORD.findall(text))


@dataclass(frozen=True, slots=True)
class Correction:
    """``text`` with its corrections made; ``changes`` the ``(typed, corrected)`` pairs, in
    order (empty when nothing changed)."""

    text: str
    changes: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str | None:
        """A sentence for ``SearchResult.degraded``-style notes, or ``None``."""
        if not self.changes:
            return None
        pairs = ", ".join(f"{typed!r} as {fixed!r}" for typed, fixed in self.changes)
        return f"misspelled words read as the table's own words: {pairs}"


def looked_up(text: str) -> list[str]:
    """The words of ``text`` :func:`correct` asks the vocabulary about: its correctable words,
    lower-cased, once each, the first :data:`MAX_CORRECTIONS`. A text none of whose words is
    missing from the vocabulary is left as typed."""
    typed = dict.fromkeys(w.lower() for w in _WORD.findall(text) if correctable(w))
    return list(typed)[:MAX_CORRECTIONS]


def correct(text: str, vocabulary: Vocabulary) -> Correction:
    """``text`` with each misspelled word replaced (see the module docstring)."""
    typed = looked_up(text)
    if not typed:
        return Correction(text)
    known = vocabulary.known(typed)
    unknown = [w for w in typed if w not in known]
    if not unknown:
        return Correction(text)
    candidates = vocabulary.similar(unknown)
    chosen: dict[str, str] = {}
    for word in unknown:
        best = choose(word, candidates.get(word, ()))
        if best is not None:
            chosen[word] = best
    if not chosen:
        return Correction(text)
    changes: list[tuple[str, str]] = []

    def replace(match: re.Match[str]) -> str:
        word = match.group(0)
        fixed = chosen.get(word.lower()) if correctable(word) else None
        if fixed is None:
            return word
        changes.append((word, fixed))
        return fixed

    return Correction(_WORD.sub(replace, text), tuple(dict.fromkeys(changes)))


def choose(word: str, candidates: Iterable[tuple[str, int]]) -> str | None:
    """The candidate one edit from ``word`` that most rows hold (then alphabetically first),
    or ``None``."""
    best: tuple[int, str] | None = None
    for candidate, frequency in candidates:
        if (
            candidate == word
            or frequency < MIN_DOCUMENT_FREQUENCY
            or not is_vocabulary_word(candidate)
            or edit_distance(word, candidate, 1) > 1
        ):
            continue
        key = (-frequency, candidate)
        if best is None or key < best:
            best = key
    return None if best is None else best[1]


def edit_distance(a: str, b: str, cap: int) -> int:
    """Optimal string alignment distance of ``a`` and ``b`` (insertions, deletions,
    substitutions and swaps of neighbours), or ``cap + 1`` when it is above ``cap``."""
    if abs(len(a) - len(b)) > cap:
        return cap + 1
    before: list[int] = []
    previous = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        current = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            value = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                value = min(value, before[j - 2] + 1)
            current[j] = value
        if min(current) > cap:
            return cap + 1
        before, previous = previous, current
    return min(previous[-1], cap + 1)


class CountedVocabulary:
    """A :class:`Vocabulary` from word counts held in memory (how many rows hold each word),
    with a trigram index over the words so a lookup reads only words sharing a trigram.
    Immutable once built: safe to share between threads."""

    def __init__(self, frequencies: Mapping[str, int]) -> None:
        self._frequencies = {
            w: n for w, n in frequencies.items() if n > 0 and is_vocabulary_word(w)
        }
        self._index: dict[str, list[str]] = {}
        for word, count in self._frequencies.items():
            if count >= MIN_DOCUMENT_FREQUENCY:
                for gram in set(trigrams(word)):
                    self._index.setdefault(gram, []).append(word)

    def __len__(self) -> int:
        return len(self._frequencies)

    def known(self, words: Sequence[str]) -> set[str]:
        return {w for w in words if w in self._frequencies}

    def similar(self, words: Sequence[str]) -> dict[str, list[tuple[str, int]]]:
        found: dict[str, list[tuple[str, int]]] = {}
        for word in words:
            pool = {c for gram in set(trigrams(word)) for c in self._index.get(gram, ())}
            found[word] = sorted(
                (c, self._frequencies[c])
                for c in pool
                if similarity(word, c) >= CANDIDATE_SIMILARITY
            )
        return found
