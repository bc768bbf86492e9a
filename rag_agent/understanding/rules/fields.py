"""Rules for phrases that name a role rather than a column: job titles, "about …" subjects,
"the campaign called …" names, and company descriptors ("the logistics company").

Each ``read_*`` function reads a :class:`~rag_agent.understanding.rules.reading.Reading` in
place; the column a phrase applies to is the table's column in that role, from its
:class:`~rag_agent.understanding.rules.lexicon.Lexicon`, and a phrase whose table has none is
ignored with the reason.
"""

from __future__ import annotations

import re

from persistence import Op
from rag_agent.understanding.rules import names
from rag_agent.understanding.rules.patterns import first_letter
from rag_agent.understanding.rules.reading import Reading, plural

__all__ = ["find_titles", "read_industry", "read_names", "read_subjects"]

_ACRONYMS = "ceo cto cfo coo cmo cio ciso cro cpo cdo chro"
_FUNCTIONS = (
    r"(?:sales|marketing|operations|ops|procurement|engineering|product|finance|it|hr|people|"
    r"growth|design|data|security|purchasing|partnerships|revenue|business\s+development|"
    r"customer\s+success|support|legal|technology|it)"
)
_TITLE_KEY = r"(?:(?:with\s+(?:the\s+|a\s+)?)?(?:job\s+)?(?:title|role)\s*(?:is|:|=|of|as)?\s*)?"
_TITLE_RE = re.compile(
    _TITLE_KEY
    + r"(?:\b(?P<acr>"
    + "|".join(_ACRONYMS.split())
    + r")s?\b"
    + rf"|\b(?P<vp>vp|svp|evp|vice\s+president)s?(?:\s+of|,)?\s+(?P<vpf>{_FUNCTIONS})\b"
    + rf"|\b(?P<role>(?:head|director)s?\s+of\s+{_FUNCTIONS}|{_FUNCTIONS}\s+(?:director|manager)s?"
    + r"|account\s+executives?|office\s+managers?|co-?founders?|founders?|owners?|"
    + r"managers?|directors?|engineers?)\b)",
    re.IGNORECASE,
)
_DESCRIPTOR_RE = re.compile(
    r"(?:\b(?:the|a|an|any|our)\s+)?(?<![\w-])(?P<ind>[a-z][a-z&-]+(?:\s+[a-z][a-z&-]+)?)\s+"
    r"(?:company|companies|firm|firms|startup|startups|business|businesses)\b"
)  # "the retail industry" names a column: the column rules read it
# (the two below written by :func:`.patterns.first_letter`: one test of the letters a match may
# start with at each position, instead of every alternative in turn)
_SUBJECT = (
    r"\b(?:about|regarding|re:|concerning|mentioning|that\s+mentions?|containing|saying|"
    r"with\s+(?:the\s+)?subject(?:\s+line)?\s*(?::|is)?|with\s+the\s+words?)\s+"
)
_SUBJECT_RE = re.compile(first_letter("arcmtsw", _SUBJECT), re.IGNORECASE)
_NAMED = (
    r"\b(?P<kind>campaign|sequence|cadence|client|account)s?\s+(?:named|called|titled)\s+"
    r"""(?:"(?P<dq>[^"\n\x00]{1,120})"|'(?P<sq>[^'\n\x00]{1,120})'|(?P<bare>(?=\S)))"""
)
_NAMED_RE = re.compile(first_letter("csa", _NAMED), re.IGNORECASE)
# "t(?<!\wt)he" is "\bthe": each branch starts with a character, so the search skips ahead to
# a quote or a "t" instead of trying the pattern at every position.
_NAME_BEFORE_RE = re.compile(
    r"""(?:"(?P<dq>[^"\n\x00]{1,120})"|t(?<!\wt)he\s+(?P<bare>[A-Z][\w&'-]*(?:\s+[\w&'-]+){0,3}?))"""
    r"\s+(?P<kind>campaign|sequence|cadence)\b"
)

# Gates (``Reading.finditer``'s ``words``, see :mod:`.gates`): every match of the rule holds one
# of these written whole (a title, its plural, "co-founder"'s "founder").
_TITLED = (*_ACRONYMS.split(), "vp", "svp", "evp", "head", "director", "manager", "executive",
           "founder", "cofounder", "owner", "engineer")  # fmt: skip
_TITLE_WORDS = frozenset(word + plural for word in _TITLED for plural in ("", "s")) | {"vice"}
# Pre-checks (``Reading.finditer``'s ``needs``): every match of the rule holds one of these.
_DESCRIPTOR_NEEDS = ("compan", "firm", "startup", "business")
_SUBJECT_NEEDS = (
    "about",
    "regarding",
    "re:",
    "concerning",
    "mention",
    "containing",
    "saying",
    "subject",
    "word",
)
_NAMED_NEEDS = ("named", "called", "titled")
_NAME_BEFORE_NEEDS = ("campaign", "sequence", "cadence")


def _title_value(match: re.Match[str]) -> str:
    if match["acr"]:
        return match["acr"].upper()
    if match["vp"]:
        return "VP " + " ".join(match["vpf"].split())
    role = " ".join(match["role"].split())
    words = role.split(" ")
    if words[0].lower() in ("heads", "directors"):
        words[0] = words[0][:-1]
    if words[-1].lower().endswith("s") and words[-1].lower() not in ("sales", "ops", "operations"):
        words[-1] = words[-1][:-1]
    return " ".join(words)


def find_titles(reading: Reading) -> list[tuple[int, int, str]]:
    """Claim ``CTO``, ``VP of sales``, ``head of marketing``, ``founders``: (start, end, title).

    Read before the table is known (``account executive`` is no account), applied after.
    """
    found = []
    for match in reading.finditer(_TITLE_RE, words=_TITLE_WORDS):
        found.append((match.start(), match.end(), _title_value(match)))
        reading.claim(*match.span())
    return found


def read_industry(reading: Reading) -> None:
    """``the logistics company``: a company descriptor no learned value of the table meant
    (those are read as values first) is reported, never taken for a company's name."""
    for match in reading.finditer(_DESCRIPTOR_RE, _DESCRIPTOR_NEEDS):
        words, start = match["ind"].split(), match.start()
        if len(words) == 2 and names.is_stop_word(words[0]):  # "from big companies"
            words, start = words[1:], match.start("ind") + match["ind"].index(words[1], 1)
        if any(names.is_stop_word(word) for word in words):
            continue
        if reading.text[start : match.end()] != reading.original[start : match.end()]:
            continue  # partly claimed by an earlier rule
        reason = f"no column of {plural(reading.table)} describes a company (industry, size)"
        reading.ignore(start, match.end(), reason)


def read_subjects(reading: Reading) -> None:
    """``inquiries about pricing`` → the table's subject-like text column ``icontains``."""
    column = reading.lexicon.first("text")
    if column is None:
        return
    for match in reading.finditer(_SUBJECT_RE, _SUBJECT_NEEDS):
        quoted = re.match(r"""["'“](?P<q>[^"'”\n\x00]{1,120})["'”]""", reading.text[match.end() :])
        if quoted is not None:
            reading.add(column, Op.ICONTAINS, quoted["q"].strip())
            reading.claim(match.start(), match.end() + quoted.end())
            continue
        found = names.bare_phrase(reading.text, match.end())
        if found is not None:
            reading.add(column, Op.ICONTAINS, found[0])
            reading.claim(match.start(), found[1])


def read_names(reading: Reading) -> None:
    """``the campaign called Spring outreach``, ``client named Helios Solar`` → its name."""
    for regex, needs in ((_NAMED_RE, _NAMED_NEEDS), (_NAME_BEFORE_RE, _NAME_BEFORE_NEEDS)):
        for match in reading.finditer(regex, needs):
            kind = match["kind"].lower().replace("account", "client").replace("cadence", "sequence")
            table = f"{kind}s"
            value: str | None = match["dq"] or (match.groupdict().get("sq"))
            end = match.end()
            if value is None and regex is _NAMED_RE:
                found = names.bare_phrase(reading.text, match.end())
                if found is None:
                    continue
                value, end = found
            elif value is None:
                value = " ".join(match["bare"].split())
            column = reading.lexicon.first("name") or reading.lexicon.first("company")
            if table != reading.table:
                reading.ignore(match.start(), end, f"the request is for {plural(reading.table)}")
            elif column is None:
                reading.ignore(match.start(), end, f"{plural(reading.table)} have no name")
            else:
                reading.add(column, Op.ICONTAINS, value)
                reading.claim(match.start(), end)
