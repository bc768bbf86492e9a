"""From a request to the words a search ranks by — shared by every backend, so every backend
ranks by the same words.

Agents pass whole requests ("customers who want to stop paying"): a static embedding averages
word vectors, so request framing ("customers who", "people asking", the table's own row nouns)
swamps the topic, and a keyword leg spends its budget on words every row has. :func:`topical_text`
removes that framing before *both* legs; :func:`keyword_terms` gives the bounded list of words the
keyword leg matches (each one a bound value, never query syntax).

>>> topical_text("customers who want to stop paying", "inquiries")
'stop paying'
>>> topical_text("inquiries from people asking about a refund", "inquiries")
'refund'
>>> keyword_terms("messages where someone could not sign in", "messages")
('could', 'not', 'sign')
"""

from __future__ import annotations

import re

__all__ = [
    "FRAMING_WORDS",
    "MAX_KEYWORD_TERMS",
    "REQUEST_WORDS",
    "WEAK_WORDS",
    "is_short_text_column",
    "keyword_terms",
    "names_identifier",
    "topical_text",
]

#: The keyword leg ranks at most this many words: every OR-term widens the candidate set, and
#: ranking candidates is what a keyword search spends its time on. Framing removed, requests
#: rarely have more; on the labelled set (docs/relevance.md) 6 ranks as well as 8.
MAX_KEYWORD_TERMS = 6

_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*", re.UNICODE)
#: A keyword term is a run of letters and digits, as the keyword legs tokenise rows (BM25's
#: tokens; PostgreSQL's parser splits "can't" and "INV-2025-7" the same way).
_TERM = re.compile(r"[^\W_]+", re.UNICODE)
#: The one list of request framing (the rules' topical remainder,
#: :mod:`rag_agent.understanding.rules.topic`, uses it too): articles, pronouns, prepositions,
#: question words and the words that ask for rows.
#: Both search legs drop these from a search text.
FRAMING_WORDS = frozenset(
    """a an the of to in on for from with about by at as and or is are was were be been it its
    this that these those which who whom whose what where when why how any all some me my our
    we us you your they their them he she his her i someone somebody anyone anybody if whether
    find show list get give search look looking please rows records row record entries
    entry""".split()  # noqa: SIM905
)
#: What a request to a database says beyond :data:`FRAMING_WORDS`: verbs of asking and wanting,
#: the generic nouns for the people rows are about, column and ordering words ("status",
#: "latest", "email"). The rules' topical remainder drops them too (what is left there once the
#: rules read their conditions is never a column's word); a search text keeps them, since its
#: own phrase patterns strip the asking ("customers who want to") and a topic may need a word
#: such as "data" ("exporting data") or "could" ("could not sign in").
REQUEST_WORDS = frozenset(
    """am being every each him mine ours
    display fetch lookup retrieve pull return see
    want wants wanted wanting need needs needed would like could can should may might
    must will shall do does did done has have had having tell know asking ask asks asked
    request requests requested requesting mentioning mention mentions mentioned saying say
    says said talking talk talks regarding concerning related relating
    customer customers client clients user users people person persons
    everyone one ones folks anything everything something whoever whatever
    whichever wherever hmm hm um uh ok okay
    data info information details results result
    there here just also only then than so such very really other others
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
#: Who the rows come from, as a request names them: "customers who ...", "people asking ...".
_ASKERS = (
    r"customers?|clients?|people|persons?|users?|prospects?|leads?|contacts?|someone|somebody|"
    r"anyone|anybody|folks|buyers?|companies|accounts?"
)
#: How a request says "rows about": "asking about", "requests to", "complaining that", ...
_ASKING = (
    r"ask(?:s|ed|ing)?|request(?:s|ed|ing)?|complain(?:s|ed|ing)?|complaints?|want(?:s|ed|ing)?|"
    r"wish(?:es|ing)?\s+to|need(?:s|ed|ing)?\s+to|trying\s+to|tried\s+to|mention(?:s|ed|ing)?|"
    r"talk(?:s|ed|ing)?\s+about|writ(?:es|ing)\s+about|say(?:s|ing)?|questions?|enquir(?:y|ies)"
)
_LINK = r"(?:\s+(?:about|for|to|that|why|where|how|if|whether|whose|on|regarding))?"
_FRAME_PHRASES = (
    # "customers who want to", "people asking about", "clients complaining that"
    re.compile(rf"\b(?:new\s+)?(?:{_ASKERS})\s+(?:who|that|which)?\s*(?:{_ASKING}){_LINK}\b", re.I),
    # "from customers who", "people who", "someone whose", "from people"
    re.compile(rf"\b(?:from\s+)?(?:new\s+)?(?:{_ASKERS})\s+(?:who|that|whose|which)\b", re.I),
    # "requests to", "asking for", "complaints about" without a subject
    re.compile(
        rf"\b(?:{_ASKING})\s+(?:about|for|to|that|why|where|how|if|whether|regarding)\b", re.I
    ),
    # a leading asker: "new customers ...", "people ..."
    # (plural only: a leading "customer database" is about a database)
    re.compile(r"^\s*(?:new\s+)?(?:customers|clients|people|users|prospects|leads|folks)\b", re.I),
)
#: Row nouns every table's rows are: a request names them ("inquiries where ...") but no row
#: is about them.
_ROW_NOUNS = frozenset(
    """inquiries inquiry enquiries enquiry messages message conversations conversation leads
    lead clients client campaigns campaign sequences sequence tickets ticket""".split()  # noqa: SIM905
)


def _row_nouns(table: str | None) -> frozenset[str]:
    if not table:
        return _ROW_NOUNS
    name = table.lower()
    singular = name[:-3] + "y" if name.endswith("ies") else name.rstrip("s")
    return _ROW_NOUNS | {name, singular, name.replace("_", " "), singular.replace("_", " ")}


def topical_text(text: str, table: str | None = None) -> str:
    """``text`` without request framing and row nouns; the whole text when nothing topical
    would be left."""
    stripped = text
    for phrase in _FRAME_PHRASES:
        stripped = phrase.sub(" ", stripped)
    nouns = _row_nouns(table)
    kept = [w for w in _WORD.findall(stripped) if w.lower() not in FRAMING_WORDS | nouns]
    return " ".join(kept) if kept else " ".join(_WORD.findall(text))


def keyword_terms(text: str, table: str | None = None) -> tuple[str, ...]:
    """The distinct lower-cased words of :func:`topical_text` (runs of letters and digits, one
    letter alone dropped), in order, at most :data:`MAX_KEYWORD_TERMS`.

    When the text names an identifier (a word of four or more characters holding a digit, not a
    year: an order number, an invoice id), the identifiers alone: the request wants the rows
    holding them, and its other words ("order", "invoice") are on thousands of rows that would
    be fused alongside them.

    >>> keyword_terms("where is order #48213?")
    ('48213',)
    """
    seen: dict[str, None] = {}
    for word in _TERM.findall(topical_text(text, table)):
        if len(word) > 1 or word.isdigit():
            seen.setdefault(word.lower(), None)
    identifiers = [word for word in seen if _is_identifier(word)]
    return tuple(identifiers or seen)[:MAX_KEYWORD_TERMS]


def names_identifier(text: str, table: str | None = None) -> bool:
    """Whether ``text`` names an identifier, so that its keyword terms are the identifiers
    alone (:func:`keyword_terms`): the rows holding it are the answer.

    >>> names_identifier("problem with INV-2025-1522"), names_identifier("invoices from 2024")
    (True, False)
    """
    return any(_is_identifier(term) for term in keyword_terms(text, table))


def _is_identifier(word: str) -> bool:
    return len(word) >= 4 and any(c.isdigit() for c in word) and not _YEAR.fullmatch(word)


_YEAR = re.compile(r"(?:19|20)\d\d")


#: Columns holding a few words (names, companies, e-mails, titles, subjects): the keyword leg also
#: matches them by trigram similarity (pg_trgm's ``word_similarity``), which forgives typos.
_SHORT_TEXT_SUFFIXES = ("name", "email", "company", "title", "subject")


def is_short_text_column(column: str) -> bool:
    """True for a column the trigram leg ranks (by its name, so every backend agrees)."""
    return column.endswith(_SHORT_TEXT_SUFFIXES)
