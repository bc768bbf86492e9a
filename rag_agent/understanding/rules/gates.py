"""The words a question says, read once, so that a rule can skip a regular expression that
cannot match it.

Each rule's regular expression scans the whole question, yet most questions hold none of the
words every match of it holds: a date needs a digit, a month, a weekday or a word such as
"last"; a job title needs "cto", "director" or the like. :func:`said` reads the question's
words once (the maximal runs of ASCII letters and digits, lower case), and a rule asks
:meth:`Said.any_of` (a word written whole) or :meth:`Said.starts_any` (a word beginning so)
before it scans. A gate may let through a question its regex then finds nothing in, never the
reverse: the words a gate lists stand whole in every match (between characters that are no
letter or digit: a ``\\b``, a space, a colon), so a question without them holds no match. The
property tests check every gate against its regex.

Only ASCII text is read: case-insensitive matching has cases that lower-casing does not show
(the Kelvin sign matches ``k``), so a question with any other character is never gated.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

__all__ = ["Said", "said"]

_RUN_RE = re.compile(r"[a-z0-9]+")
_DIGIT_RE = re.compile(r"[0-9]")
_FOUR_DIGITS_RE = re.compile(r"(?<![A-Za-z0-9])[0-9]{4}(?![A-Za-z0-9])")


class Said(NamedTuple):
    """The words of an ASCII question: its maximal runs of letters and digits, lower case.

    A named tuple (immutable, made by :func:`said` straight from its fields): one is made per
    question, and a frozen dataclass's ``__init__`` sets each field through
    ``object.__setattr__``."""

    words: frozenset[str]
    #: Whether the question holds a digit.
    digits: bool
    #: Whether a word of the question is four digits (a year).
    four_digits: bool
    #: The question, lower case (where :meth:`starts_any` looks for where a word starts).
    folded: str = ""

    def any_of(self, words: frozenset[str]) -> bool:
        """Whether one of ``words`` (lower case) is a word of the question."""
        return not words.isdisjoint(self.words)

    def starts_any(self, prefixes: tuple[str, ...]) -> bool:
        """Whether a word of the question begins with one of ``prefixes`` (lower case)."""
        pattern = _starts(prefixes)
        if pattern is None:
            return any(word.startswith(prefixes) for word in self.words)
        return pattern.search(self.folded) is not None


@functools.lru_cache(maxsize=64)
def _starts(prefixes: tuple[str, ...]) -> re.Pattern[str] | None:
    """One of ``prefixes`` where a word starts: a prefix of letters and digits met in the text
    right after no letter or digit begins the word (a maximal run) that holds it. ``None`` when
    a prefix is empty or holds another character (then the words are walked)."""
    if not prefixes or not all(_RUN_RE.fullmatch(prefix) for prefix in prefixes):
        return None
    return re.compile("(?<![a-z0-9])(?:" + "|".join(map(re.escape, prefixes)) + ")")


def said(text: str) -> Said | None:
    """The words of ``text``; ``None`` when it is not ASCII (then no rule may be skipped)."""
    if not text.isascii():
        return None
    folded = text.lower()
    words = frozenset(_RUN_RE.findall(folded))
    digits = _DIGIT_RE.search(text) is not None
    four_digits = digits and _FOUR_DIGITS_RE.search(text) is not None
    return _new(Said, (words, digits, four_digits, folded))


#: A :class:`Said` made straight from its four fields (no argument binding).
_new = tuple.__new__
