"""The topical remainder of a request: the words no rule read, without request framing.

The rules claim the spans they understand (``at Acme``, ``last week``, ``client 7``); what is left
of "inquiries from customers who want to stop paying" after the table word and the framing ("from
customers who want to") is the topic, ``stop paying``, which the pipeline ranks rows by
(:mod:`rag_agent.pipeline.ranking`). A request whose leftovers are only framing ("show me leads at
Acme please") has no topic, and is answered exactly as before.

Framing is removed here, before both search legs: a static embedding averages word vectors, so
"customers who want to" would swamp the topic, and a keyword leg would spend its terms on words
every row has.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from persistence.search.text import FRAMING_WORDS as _FRAMING_WORDS
from persistence.search.text import REQUEST_WORDS, WEAK_WORDS
from rag_agent.understanding.rules.vocabulary import TABLE_WORDS

__all__ = ["FRAMING_WORDS", "WEAK_WORDS", "is_topical", "topic_of"]

_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*", re.UNICODE)

#: Words that frame a request rather than say what it is about: the search text's framing and
#: the words a request to a database adds (column, ordering and asking words), one list owned by
#: :mod:`persistence.search.text` so the rules and the search legs never disagree.
FRAMING_WORDS = _FRAMING_WORDS | REQUEST_WORDS


#: Particles kept after a topical word: "sign in", "log out", "opt out", "follow up".
_PARTICLES = frozenset(["in", "on", "up", "out", "off", "down", "over", "back"])


def _table_words() -> frozenset[str]:
    words: set[str] = set()
    for phrase in TABLE_WORDS:
        words.update(phrase.replace("_", " ").split())
    return frozenset(words)


_TABLE_WORDS = _table_words()
#: Every word that is never topical on its own (framing or a table's word).
_NOT_TOPICAL = FRAMING_WORDS | _TABLE_WORDS


def topic_of(unclaimed: str) -> str:
    """The topical words of ``unclaimed`` (the request with every span a rule read masked by
    NUL characters), in order, framing and table words removed; ``""`` when none is topical.

    >>> topic_of("inquiries from customers who want to stop paying")
    'stop paying'
    >>> topic_of("show me leads \\x00\\x00\\x00\\x00\\x00\\x00\\x00 please")
    ''
    """
    if unclaimed.isascii() and _NOT_TOPICAL.issuperset(_WORD.findall(unclaimed.lower())):
        # Most requests: every word left is framing or a table's word, so none is kept (a
        # particle is kept only after a kept word). Lower-casing ASCII text keeps every word
        # where it was, so the words found are the lower-cased words of the loop below.
        return ""
    words: list[str] = []
    for run in unclaimed.split("\x00"):
        if not run:
            continue  # between two masked characters: no word, and nothing to carry over
        previous_kept = False
        for word in _WORD.findall(run):
            lower = word.lower()
            framing = lower in _NOT_TOPICAL
            if not framing or (previous_kept and lower in _PARTICLES):
                words.append(word)
                previous_kept = not framing
            else:
                previous_kept = False
    return " ".join(words) if is_topical(words) else ""


def is_topical(words: Iterable[str]) -> bool:
    """Whether ``words`` hold a topic: one word of three characters or more, with a letter,
    that is not weak ("x:0A" holds none; "could not sign in" does)."""
    return any(
        len(w) > 2 and w.lower() not in WEAK_WORDS and any(ch.isalpha() for ch in w) for w in words
    )
