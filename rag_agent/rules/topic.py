"""The topical remainder of a request: the words no rule read, without request framing.

The rules claim the spans they understand (``at Acme``, ``last week``, ``client 7``); what is
left of "inquiries from customers who want to stop paying" after the table word and the framing
("from customers who want to") is the topic, ``stop paying``, which the pipeline ranks rows by
(:mod:`rag_agent.ranking`). A request whose leftovers are only framing ("show me leads at Acme
please") has no topic, and is answered exactly as before.

Framing is removed here, before both search legs: a static embedding averages word vectors, so
"customers who want to" would swamp the topic, and a keyword leg would spend its terms on words
every row has.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from rag_agent.rules.vocabulary import TABLE_WORDS

__all__ = ["FRAMING_WORDS", "WEAK_WORDS", "is_topical", "topic_of"]

_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*", re.UNICODE)

#: Words that frame a request rather than say what it is about: verbs of asking, pronouns,
#: articles, prepositions, question words, and the generic nouns for the people rows are about.
FRAMING_WORDS = frozenset(
    """a an the of to in on for from with about by at as and or is are was were be been being
    am it its this that these those which who whom whose what where when why how any all some
    every each me my our we us you your they their them he she his her him i mine ours
    find show list get give fetch search look looking lookup retrieve display pull return see
    please want wants wanted wanting need needs needed would like could can should may might
    must will shall do does did done has have had having tell know asking ask asks asked
    request requests requested requesting mentioning mention mentions mentioned saying say
    says said talking talk talks regarding concerning related relating
    customer customers client clients user users people person persons someone somebody
    anyone anybody everyone one ones folks anything everything something whoever whatever
    whichever wherever hmm hm um uh ok okay
    rows row records record entries entry data info information details results result
    there here just also only then than so such very really any other others
    created updated modified sent received dated limit offset page pages sorted sort order
    ordered newest oldest latest recent recently first last top next previous
    email emails mail phone company companies status score title name names named called id
    ids number""".split()  # noqa: SIM905
)

#: Words kept in a topic (they change its meaning: "could not sign in") that are no topic alone.
WEAK_WORDS = frozenset(
    """not no never nobody nothing cannot can't couldn't didn't doesn't don't isn't wasn't
    won't without new old all more most less""".split()  # noqa: SIM905
)


#: Particles kept after a topical word: "sign in", "log out", "opt out", "follow up".
_PARTICLES = frozenset(["in", "on", "up", "out", "off", "down", "over", "back"])


def _table_words() -> frozenset[str]:
    words: set[str] = set()
    for phrase in TABLE_WORDS:
        words.update(phrase.replace("_", " ").split())
    return frozenset(words)


_TABLE_WORDS = _table_words()


def topic_of(unclaimed: str) -> str:
    """The topical words of ``unclaimed`` (the request with every span a rule read masked by
    NUL characters), in order, framing and table words removed; ``""`` when none is topical.

    >>> topic_of("inquiries from customers who want to stop paying")
    'stop paying'
    >>> topic_of("show me leads \\x00\\x00\\x00\\x00\\x00\\x00\\x00 please")
    ''
    """
    words: list[str] = []
    for run in unclaimed.split("\x00"):
        previous_kept = False
        for word in _WORD.findall(run):
            lower = word.lower()
            framing = lower in FRAMING_WORDS or lower in _TABLE_WORDS
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
