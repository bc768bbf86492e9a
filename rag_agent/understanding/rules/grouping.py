"""Counts per group: "leads by status", "per campaign", "broken down by channel".

A grouping phrase is ``by``/``per``/``for each``/``broken down by``/``grouped by``/``split by``
followed by a word naming a column (by the learned vocabulary's column words) or a table the
table refers to. A word that names a record ("per campaign 5") is a reference, not a grouping,
and "sorted by score" is an order, not a grouping: neither is read here. A grouping on a column
the table has not ("messages by status") is ignored with the reason.
"""

from __future__ import annotations

import functools
import re

from persistence.vocabulary import SchemaVocabulary, stem, stems
from rag_agent.understanding.rules.patterns import first_letter
from rag_agent.understanding.rules.reading import Reading, plural
from rag_agent.understanding.rules.vocabulary import REFERENCE_WORDS, TABLE_WORDS

__all__ = ["MAX_GROUPS", "apply_groupings", "find_groupings"]

#: Columns one request may be grouped by (the facade's limit).
MAX_GROUPS = 3

_GROUP = (
    r"(?<!\bsorted\s)(?<!\bordered\s)(?<!\branked\s)"
    r"\b(?:(?:broken\s+down|grouped|split|breakdown)\s+by|by|per|for\s+(?:each|every))\s+"
    r"(?:the\s+|their\s+|its\s+)?(?P<word>[a-z][a-z_]*(?:\s+(?!(?:and|or|by)\b)[a-z][a-z_]*)?)\b"
    r"(?!\s*(?:#|no\.?\s*|number\s+)?[0-9])"
    r"(?:\s*(?:,|and)\s+(?:by\s+)?(?P<second>[a-z][a-z_]*(?:\s+(?!(?:and|or|by)\b)[a-z][a-z_]*)?)\b(?!\s*[0-9]))?"
)
# (written by :func:`.patterns.first_letter`: one test of the letters a match may start with at
# each position, instead of every alternative in turn)
_GROUP_RE = re.compile(first_letter("bgspf", _GROUP), re.IGNORECASE)

#: The gate of :data:`_GROUP_RE` (see :mod:`.gates`): every match holds one of these whole.
_GROUP_WORDS = frozenset({"by", "per", "for"})


def _group_words(reading: Reading) -> frozenset[str]:
    """Every word that names a column of any table, or a table: what "by …" may group by."""
    return _words_of(reading.vocabulary)


@functools.lru_cache(maxsize=64)
def _words_of(vocabulary: SchemaVocabulary) -> frozenset[str]:
    # Once per vocabulary (a learned one is kept until the database changes), not per question.
    words = {w for w in TABLE_WORDS if " " not in w}
    for table in vocabulary.tables.values():
        for column in table.columns.values():
            words.update(w for w in column.words if w not in {"is", "has", "at", "on", "id"})
    return frozenset(words)


@functools.lru_cache(maxsize=64)
def _stems_of(words: frozenset[str]) -> frozenset[str]:
    return frozenset(stem(w) for w in words)


def _trim(reading: Reading, phrase: str) -> str | None:
    """The longest leading part of ``phrase`` made of group words, or ``None``."""
    words = phrase.split()
    known = _group_words(reading)
    stems_known = _stems_of(known)
    while words and not all(w.lower() in known or stem(w.lower()) in stems_known for w in words):
        words.pop()
    return " ".join(words) or None


#: A grouping word found: its span and the word as written.
Found = tuple[int, int, str]


def find_groupings(reading: Reading) -> list[Found]:
    """Every grouping phrase, claimed before table words are read (so that "per campaign" does
    not name the campaigns table); the words it groups by, with their spans."""
    found: list[Found] = []
    for match in reading.finditer(_GROUP_RE, words=_GROUP_WORDS):
        end = match.start()
        for name in ("word", "second"):
            if match.group(name) is None:
                continue
            word = _trim(reading, match.group(name))
            if word is None:
                break
            start = match.start(name)
            found.append((start, start + len(word), word))
            end = start + len(word)
        if end > match.start():
            reading.claim(match.start(), end)
    return found


def apply_groupings(reading: Reading, found: list[Found]) -> tuple[str, ...]:
    """The columns of ``reading.table`` the text groups by, in the order written (each once, at
    most three); a word naming no column of the table is ignored with the reason."""
    columns: list[str] = []
    for start, end, word in found:
        column = _column_of(reading, word)
        if column is None or not reading.has(column):
            reading.ignore(start, end, f"{plural(reading.table)} cannot be grouped by {word}")
        elif column not in columns and len(columns) < MAX_GROUPS:
            columns.append(column)
    return tuple(columns)


def _column_of(reading: Reading, word: str) -> str | None:
    """The column of the table ``word`` names: by the column's words, or the column referring
    to the table the word names ("per client" → the table's reference to clients)."""
    lexicon = reading.lexicon
    named = lexicon.names.get(stems(word))
    if named:
        return named[0]
    table = TABLE_WORDS.get(word.lower()) or REFERENCE_WORDS.get(word.lower())
    if table is not None:
        return next((c.name for c in lexicon.columns.values() if c.references == table), None)
    return None
