"""Counts per group: "leads by status", "per campaign", "broken down by channel".

A grouping phrase is ``by``/``per``/``for each``/``broken down by``/``grouped by``/``split by``
followed by a word of :data:`~rag_agent.understanding.rules.vocabulary.GROUP_WORDS` (a column of the
table's vocabulary). A word that names a record ("per campaign 5") is a reference, not a grouping,
and "sorted by score" is an order, not a grouping: neither is read here. A grouping on a column the
table has not ("messages by status") is ignored with the reason.
"""

from __future__ import annotations

import re

from rag_agent.understanding.rules.reading import Reading, plural
from rag_agent.understanding.rules.vocabulary import GROUP_WORDS

__all__ = ["MAX_GROUPS", "apply_groupings", "find_groupings"]

#: Columns one request may be grouped by (the facade's limit).
MAX_GROUPS = 3

_WORD = "|".join(sorted((re.escape(w) for w in GROUP_WORDS), key=len, reverse=True))
_GROUP_RE = re.compile(
    r"(?<!\bsorted\s)(?<!\bordered\s)(?<!\branked\s)"
    r"\b(?:(?:broken\s+down|grouped|split|breakdown)\s+by|by|per|for\s+(?:each|every))\s+"
    rf"(?:the\s+|their\s+|its\s+)?(?P<word>{_WORD})\b(?!\s*(?:#|no\.?\s*|number\s+)?[0-9])"
    r"(?:\s*(?:,|and)\s+(?:by\s+)?(?P<second>" + _WORD + r")\b(?!\s*[0-9]))?",
    re.IGNORECASE,
)


#: A grouping word found: its span and the word as written.
Found = tuple[int, int, str]


def find_groupings(reading: Reading) -> list[Found]:
    """Every grouping phrase, claimed before table words are read (so that "per campaign" does
    not name the campaigns table); the words it groups by, with their spans."""
    found: list[Found] = []
    for match in reading.finditer(_GROUP_RE, ("by", "per", "for")):
        for name in ("word", "second"):
            if match.group(name) is not None:
                found.append((*match.span(name), match.group(name)))
        reading.claim(*match.span())
    return found


def apply_groupings(reading: Reading, found: list[Found]) -> tuple[str, ...]:
    """The columns of ``reading.table`` the text groups by, in the order written (each once, at
    most three); a word naming no column of the table is ignored with the reason."""
    columns: list[str] = []
    for start, end, word in found:
        column = GROUP_WORDS[word.lower()]
        if not reading.has(column):
            reading.ignore(start, end, f"{plural(reading.table)} cannot be grouped by {word}")
        elif column not in columns and len(columns) < MAX_GROUPS:
            columns.append(column)
    return tuple(columns)
