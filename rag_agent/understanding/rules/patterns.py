"""Regular-expression pieces written so that a search is cheap at the many places no match
starts.

``\\b(?:lead|leads|campaign|…)`` read case-insensitively is tried at every position of the
question, and at each the engine compares the first letter of every alternative in turn, each
comparison case-insensitive. :func:`word_start` finds the same matches with a pattern that
first checks one set of first letters (a single test per position) and only then the
alternatives that start with the letter found there.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["first_letter", "word_start"]


def word_start(alternatives: Iterable[str]) -> str:
    """A pattern that matches what ``\\b(?:a1|a2|…)`` matches case-insensitively, with the
    same alternative chosen, for the pattern fragments ``alternatives`` (in that order), each
    starting with a lower-case ASCII letter written as itself.

    It is ``(?i:[first letters])``, then the ``\\b`` before that letter (no word character
    before it: a letter is a word character, so that is a ``\\b``), then the alternatives of
    that first letter in their given order: an alternative of another first letter could not
    match there, so the first one that does is the one the plain alternation chooses. A
    character matches at most one of the letters case-insensitively (the Kelvin sign only
    ``k``, the long s only ``s``, the dotted and dotless i only ``i``), so one group is tried.
    The caller compiles it without ``re.IGNORECASE`` (so that the set of first letters is one
    test) and wraps the rest of its pattern in ``(?i:…)``."""
    groups: dict[str, list[str]] = {}
    for alternative in alternatives:
        first = alternative[:1]
        if not (first.isascii() and first.isalpha() and first.islower()):
            raise ValueError(f"an alternative must start with a lower-case letter: {alternative!r}")
        groups.setdefault(first, []).append(alternative[1:])
    branches = "|".join(
        f"(?<=(?i:{first}))(?i:{'|'.join(rests)})" for first, rests in groups.items()
    )
    return rf"(?i:[{''.join(groups)}])(?<!\w.)(?:{branches})"


def first_letter(letters: str, pattern: str) -> str:
    """``pattern`` behind a look-ahead that the character where a match would start is one of
    ``letters`` (read case-insensitively, as the rules' patterns read words; ``@`` and
    ``\\s`` may be among them).

    Every match of ``pattern`` must start with one of them: the same matches are then found
    (the look-ahead only rejects positions where none starts), but the search rejects each
    other position with one test of a set of characters instead of trying every alternative
    of ``pattern`` there, each comparison case-insensitive. The property tests compare each
    pattern written so with the one it replaced."""
    if not letters:
        raise ValueError("a pattern starts with at least one letter")
    return f"(?=(?i:[{letters}]))(?:{pattern})"
