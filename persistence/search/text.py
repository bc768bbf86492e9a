"""From a request to the words a search ranks by — shared by every backend, so every backend
ranks by the same words.

Agents pass whole requests ("customers who want to stop paying"): a static embedding averages
word vectors, so request framing ("customers who", "people asking", the table's own row nouns)
swamps the topic, and a keyword leg spends its budget on words every row has. :func:`topical_text`
removes that framing before *both* legs; :func:`keyword_terms` gives the bounded list of words the
keyword leg matches (each one a bound value, never query syntax).
"""

from __future__ import annotations

import re

__all__ = ["MAX_KEYWORD_TERMS", "is_short_text_column", "keyword_terms", "topical_text"]

#: The keyword leg ranks at most this many words: every OR-term widens the candidate set, and
#: ranking candidates is what a keyword search spends its time on.
MAX_KEYWORD_TERMS = 8

_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*", re.UNICODE)
_FRAMING = frozenset(
    """a an the of to in on for from with about by at as and or is are was were be been it its
    this that these those which who whom whose what where when why how any all some me my our
    we you your they their them he she his her i find show list get give search look looking
    please rows records row record entries entry""".split()  # noqa: SIM905
)


def topical_text(text: str, table: str | None = None) -> str:
    """``text`` without request framing; the whole text when nothing topical would be left."""
    words = _WORD.findall(text)
    kept = [w for w in words if w.lower() not in _FRAMING]
    return " ".join(kept) if kept else " ".join(words)


def keyword_terms(text: str, table: str | None = None) -> tuple[str, ...]:
    """The distinct lower-cased words of :func:`topical_text`, in order, at most
    :data:`MAX_KEYWORD_TERMS`."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(topical_text(text, table)):
        seen.setdefault(word.lower(), None)
    return tuple(seen)[:MAX_KEYWORD_TERMS]


#: Columns holding a few words (names, companies, e-mails, titles, subjects): the keyword leg also
#: matches them by trigram similarity (pg_trgm's ``word_similarity``), which forgives typos.
_SHORT_TEXT_SUFFIXES = ("name", "email", "company", "title", "subject")


def is_short_text_column(column: str) -> bool:
    """True for a column the trigram leg ranks (by its name, so every backend agrees)."""
    return column.endswith(_SHORT_TEXT_SUFFIXES)
