"""Related rows asked for in words: "lead 42 with its conversations", "… and their messages",
"including conversations and messages" → the child tables wanted, in order (the pipeline maps
each onto a relation path of the table read, or reports it ignored).

Claimed before the table is read from the text, so the words that ask for children never name
the table itself ("ann@acme.io with her conversations" reads leads).
"""

from __future__ import annotations

import re

from rag_agent.understanding.rules.patterns import word_start
from rag_agent.understanding.rules.reading import Reading
from rag_agent.understanding.rules.vocabulary import TABLE_WORDS

__all__ = ["read_related"]

_WORD = "|".join(sorted((w for w in TABLE_WORDS if " " not in w), key=len, reverse=True))
_OWNER = r"(?:(?:all|its|their|his|her|last|latest|recent|most\s+recent)\s+)*"
# The leading words as :func:`.patterns.word_start` writes them: the search tests one set of
# first letters at each position instead of each word's first letter in turn.
_LEADS = ("with", "including", "plus", r"along\s+with", r"together\s+with",
          r"and\s+(?=(?:its|their|his|her)\s)")  # fmt: skip
_RELATED_RE = re.compile(
    word_start(_LEADS) + rf"(?i:\s*{_OWNER}(?P<first>{_WORD})"
    rf"(?:\s*(?:,|and|&|plus|with)\s+{_OWNER}(?P<second>{_WORD}))?\b)"
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
