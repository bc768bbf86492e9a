"""Related rows asked for in words: "lead 42 with its conversations", "… and their messages",
"including conversations and messages" → the child tables wanted, in order (the pipeline maps
each onto a relation path of the table read, or reports it ignored).

Claimed before the table is read from the text, so the words that ask for children never name
the table itself ("ann@acme.io with her conversations" reads leads).
"""

from __future__ import annotations

import re

from rag_agent.understanding.rules.reading import Reading
from rag_agent.understanding.rules.vocabulary import TABLE_WORDS

__all__ = ["read_related"]

_WORD = "|".join(sorted((w for w in TABLE_WORDS if " " not in w), key=len, reverse=True))
_OWNER = r"(?:(?:all|its|their|his|her|last|latest|recent|most\s+recent)\s+)*"
_RELATED_RE = re.compile(
    rf"\b(?:with|including|plus|along\s+with|together\s+with|and\s+(?=(?:its|their|his|her)\s))"
    rf"\s*{_OWNER}(?P<first>{_WORD})"
    rf"(?:\s*(?:,|and|&|plus|with)\s+{_OWNER}(?P<second>{_WORD}))?\b",
    re.IGNORECASE,
)


def read_related(reading: Reading) -> tuple[str, ...]:
    """The tables whose rows the text asks to see with each row, in order; their words are
    claimed."""
    wanted: list[str] = []
    for match in reading.finditer(_RELATED_RE, ("with", "including", "plus", "and")):
        for group in ("first", "second"):
            word = match[group]
            if word is not None:
                table = TABLE_WORDS[word.lower()]
                if table not in wanted:
                    wanted.append(table)
        reading.claim(*match.span())
    return tuple(wanted)
