"""Company and other names in free text: what a name may contain, and where one ends.

A name is read after a trigger: a key (``company: X``, ``employer is X``), a preposition (``at``,
``from``, ``for``, ``by``, ``with``, ``employed by``), or before a people noun (``Acme leads``).
It keeps commas before a legal suffix (``Acme, Inc.``), ampersands, apostrophes, percent signs,
dots and hyphens (``Procter & Gamble``, ``O'Reilly Media``, ``100% Pure``, ``Kwik-E-Mart``), and
its legal suffix; only sentence punctuation at its end and a possessive ``'s`` are dropped. A
span that starts with a pronoun, a stop word, a month, a weekday or a relative-date word is no
name (``at home``, ``for now``, ``company we met``). Claimed spans (NUL characters) end a name.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass

from rag_agent.understanding.rules.gates import Said
from rag_agent.understanding.rules.patterns import first_letter

__all__ = [
    "STOP_WORDS",
    "NameMatch",
    "bare_phrase",
    "find_company",
    "find_lone_name",
    "is_stop_word",
]

_MAX_LENGTH = 120
_MAX_TOKENS = 6


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Words that end a name under any trigger: clause structure.
_STRUCTURAL = _words(
    "and or but with without where whose who which that in on at from for of by to into about "
    "via than then between per limit offset page sorted sort order ordered ordering email "
    "emails e-mail mail id ids client clients status score title phone created updated since "
    "before after during if when while please lead leads contact contacts prospect prospects "
    "campaign campaigns conversation conversations message messages inquiry inquiries sequence "
    "sequences account accounts import imports imported started sent received scored scoring "
    "named called whose has have having is are was were"
)
#: Words that are never a name, nor its first word, after a loose trigger.
STOP_WORDS = _STRUCTURAL | _words(
    "the a an all any some every each my our your their his her its this these those me us i "
    "you we they it he she him them mine ours yours show find get list give fetch search look "
    "lookup retrieve display pull return want need what how do does did can could would should "
    "may be been there here people person persons record records row rows entry entries "
    "customer customers company companies companys user users table tables data database db "
    "info information details name names date dates first last top recent latest newest oldest "
    "next previous today yesterday tomorrow tonight week weeks month months year years day days "
    "ago now new open closed qualified unqualified hot warm cold active inactive pending won "
    "lost stale current existing other same more less many few most number numbers count total "
    "employees staff only just also not no yes ok okay hi hello hey thanks thank sure least best "
    "worst high low linkedin home work office school lunch dinner breakfast noon midnight night "
    "morning afternoon evening weekend moment once while time times later soon sale sales free "
    "real example don can won isn aren wasn weren didn doesn let address instance way reply "
    "replies response answer staging staged reach call email contact follow chase ping nurture "
    "convert qualify target see anyone someone everyone nobody everything something nothing us "
    "them web website site online internet event events conference webinar trade show list expo "
    "expos fair fairs summit meetup booth "
    "csv form forms referral referrals call calls meeting meetings demo demos review quarter "
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday "
    "saturday sunday mon tue tues wed thu thur thurs fri sat sun holiday holidays christmas "
    "ceo cto cfo coo cmo cio vp head director manager founder owner president engineer"
)
# Ordinary nouns, months and weekdays that may begin a capitalised name ("the Home Depot",
# "March Networks") when another capitalised word follows.
_SOFT_NOUNS = _words(
    "home office school work web real trade free january february march april may june july "
    "august september october november december monday tuesday wednesday thursday friday "
    "saturday sunday"
)
_ARTICLES = frozenset({"the", "a", "an"})
# Stop words that may still continue a name already started ("Bluth Company").
_NAME_NOUNS = frozenset({"company", "companies", "group", "people", "sales", "home"})
_LEGAL = _words(
    "inc inc. incorporated corp corp. corporation co co. ltd ltd. limited llc l.l.c. llp lp "
    "plc gmbh ag sa s.a. sas sarl srl bv b.v. nv n.v. pty pte kk spa s.p.a."
)
_TRAILING = ".,;:!?'\"\u2019`)]}"

_QUOTED = (
    r"""(?:"(?P<dq>[^"\n\x00]{1,120})"|'(?P<sq>[^'\n\x00]{1,120})'"""
    r"""|[“”](?P<cq>[^“”\n\x00]{1,120})[“”])"""
)
_KEYED = (
    r"\b(?:company[\s_-]*name|company|organi[sz]ation|employer|firm)(?![\w-])\s*"
    r"""["'`]?\s*(?:[:=]{1,2}|\bis\b|\bnamed\b|\bcalled\b|\bequals\b|\blike\b|\bcontains\b|"""
    r"""\bcontaining\b|\bincludes\b|\bincluding\b|\bmatching\b)?\s*"""
    rf"(?:{_QUOTED}|(?P<bare>(?=\S)))"
)
_PREP = (
    rf"(?:(?:\b(?i:at|from|for|by|works?\s+for|working\s+for|employed\s+by)|(?<!\S)@)\s+"
    rf"(?:{_QUOTED}|(?P<bare>(?=\S)))|\b(?i:with)\s+(?P<capital>(?=[A-Z]))"
    r"|(?<=\x00)\s+(?i:of)\s+(?P<after_title>(?=\S)))"
)
# The two above as :func:`.patterns.first_letter` writes them: one test of the characters a
# match may start with at each position (a name after "of" starts at the space after a claim).
_KEYED_RE = re.compile(first_letter("coef", _KEYED), re.IGNORECASE)
_PREP_RE = re.compile(first_letter(r"afbwe@\s", _PREP))
# "[^\W_](?<![^\W_][^\W_])" is a letter or digit no other one precedes: a name's words start
# there, and a match from inside a word would start earlier, at the letter before (a word's
# rest reads as a word), so each word is tried once, not at each of its letters.
_BEFORE_NOUN_RE = re.compile(
    r"(?P<name>(?:[^\W_](?<![^\W_][^\W_])[\w&.'\u2019%+-]*,?\s+){1,4}?)"
    r"(?:leads?|contacts?|prospects?|people)\b",
    re.IGNORECASE,
)
# A people noun as the regex above reads it (after a space): the first and the last one bound
# where a name before one may start and end.
_NOUN_AT_RE = re.compile(r"\s(?:leads?|contacts?|prospects?|people)\b", re.IGNORECASE)
# Pre-checks on the lower-cased text: every match of the regex above them holds one of these.
_KEYED_NEEDS = re.compile("compan|organi|employer|firm")
_NOUN_NEEDS = re.compile("lead|contact|prospect|people")
# Gates (see :mod:`.gates`): every match of the regex holds one of these words written whole.
_PREP_WORDS = frozenset({"at", "from", "for", "by", "with", "of"})  # or "@"
_NOUN_WORDS = frozenset({"lead", "leads", "contact", "contacts", "prospect", "prospects", "people"})
_TOKEN_RE = re.compile(r"""[ \t]*([^\W_](?:[\w&.'\u2019%+!-]|"(?=\w))*,?|&)""")
_DOMAIN_RE = re.compile(r"(?P<name>[^\W_][\w-]*)\.(?:com|io|net|org|co|ai|dev|app|biz|us|uk|de)")
# "[A-Z](?<![\w'\u2019&.-][A-Z])" is "(?<![\w'\u2019&.-])[A-Z]": starting with a capital, the
# search skips ahead to one instead of trying the pattern at every position.
_LONE_RE = re.compile(
    r"(?P<name>[A-Z](?<![\w'\u2019&.-][A-Z])[\w&'\u2019.-]*(?:\s+[A-Z][\w&'.-]*){0,3})"
)


@dataclass(frozen=True, slots=True)
class NameMatch:
    """A name found at ``[start, end)`` of the text."""

    value: str
    start: int
    end: int


def is_stop_word(word: str) -> bool:
    """Whether ``word`` (any case, trailing punctuation ignored) can never begin a name."""
    return word.rstrip(_TRAILING).lower() in STOP_WORDS


_CONTRACTION_RE = re.compile(r"(?P<base>[a-z]+)['\u2019](?:m|re|ve|d|ll|t)")


@functools.lru_cache(maxsize=4096)
def _word(token: str) -> str:
    word = token.rstrip(_TRAILING).lower()
    contraction = _CONTRACTION_RE.fullmatch(word)
    if contraction is not None:
        return contraction["base"]  # "I'm" is "i", "we've" is "we"
    return word[:-2] if word.endswith(("'s", "\u2019s")) else word


def _suffix_ahead(text: str, pos: int) -> bool:
    """Whether a legal suffix comes within the next three capitalised words ("Dean, Witter &
    Co.")."""
    for _ in range(3):
        match = _TOKEN_RE.match(text, pos)
        if match is None:
            return False
        token = match.group(1)
        if token.rstrip(",").lower() in _LEGAL:
            return True
        if not (token[:1].isupper() or token in ("&",)):
            return False
        pos = match.end()
    return False


def _bare(text: str, pos: int, stop: frozenset[str]) -> tuple[str, int] | None:
    """The name starting at ``pos`` and where it ends, or ``None``."""
    tokens: list[str] = []
    end = pos
    ahead: re.Match[str] | None = None  # the word after the one read, when already matched
    while len(tokens) < _MAX_TOKENS:
        match = ahead if ahead is not None and ahead.pos == pos else _TOKEN_RE.match(text, pos)
        if match is None:
            break
        token = match.group(1)
        word = _word(token)
        if not tokens and word in _ARTICLES:
            pos = match.end()
            if word != "the" and stop is STOP_WORDS:  # "at a loss": a company takes no "a"
                following = _TOKEN_RE.match(text, pos)
                if following is None or not following[1][:1].isupper():
                    break
            continue
        following = ahead = _TOKEN_RE.match(text, match.end())
        named_next = following is not None and (
            following[1][:1].isupper() or following[1].rstrip(".,").lower() in _LEGAL
        )
        if word in _SOFT_NOUNS and token[:1].isupper() and named_next:
            pass  # "the Home Depot", "March Networks"; but "at home", "from March"
        elif word.isdigit() and tokens and named_next:
            pass  # "Route 66 Diner", "Studio 54 Inc."
        elif (word in stop and (not tokens or word not in _NAME_NOUNS)) or word.isdigit():
            break
        if not word:
            break
        tokens.append(token)
        pos = end = match.end()
        if token.endswith(",") and not _suffix_ahead(text, pos):
            break  # a comma ends the name unless a legal suffix follows ("Acme, Inc.")
        elif token[-1] in ";:!?)" or (token.endswith(".") and token.lower() not in _LEGAL):
            break  # a sentence or clause ends here
    value = _clean(" ".join(tokens), stop) if tokens else None
    return None if value is None else (value, end)


def bare_phrase(text: str, pos: int) -> tuple[str, int] | None:
    """The phrase at ``pos`` up to the next clause word (any case), and where it ends."""
    return _bare(text, pos, _STRUCTURAL)


def _clean(raw: str, stop: frozenset[str] | None = None) -> str | None:
    value = " ".join(raw.split()).strip(_TRAILING + " ")
    if value.lower().endswith(("'s", "\u2019s")):
        value = value[:-2]
    if value.lower() in (STOP_WORDS if stop is None else stop):
        return None
    domain = _DOMAIN_RE.fullmatch(value)
    if domain is not None:
        value = domain.group("name")  # "Monday.com" is a name, even if "Monday" alone is not
    if not value or len(value) > _MAX_LENGTH or not any(c.isalpha() for c in value):
        return None
    return value


def find_company(text: str, said: Said | None = None) -> NameMatch | None:
    """The first company name of ``text`` under a trigger, or ``None``.

    ``said``: the words of ``text`` (:func:`.gates.said`), when known: a trigger none of them
    is is not looked for.
    """
    folded = text.lower() if text.isascii() else None  # for the pre-checks, as in ``Reading``
    for regex, stop in ((_KEYED_RE, _STRUCTURAL), (_PREP_RE, STOP_WORDS)):
        if regex is _KEYED_RE and folded is not None and _KEYED_NEEDS.search(folded) is None:
            continue  # every keyed name follows one of these words
        if (
            regex is _PREP_RE
            and said is not None
            and not said.any_of(_PREP_WORDS)
            and "@" not in text
        ):
            continue  # every other name follows one of these words, or "@"
        for match in regex.finditer(text):
            quoted = match.group("dq") or match.group("sq") or match.group("cq")
            if quoted is not None:
                value = _clean(quoted)
                if value is not None:
                    return NameMatch(value, match.start(), match.end())
                continue
            start_word = _TOKEN_RE.match(text, match.end())
            first = None if start_word is None else _word(start_word.group(1))
            if regex is _KEYED_RE and first in STOP_WORDS:
                continue  # "the company we met": a pronoun is no name
            found = _bare(text, match.end(), stop)
            if found is not None:
                return NameMatch(found[0], match.start(), found[1])
    if folded is not None and _NOUN_NEEDS.search(folded) is None:
        return None  # no people noun, so no name before one
    if said is not None and not said.any_of(_NOUN_WORDS):
        return None
    for match in _before_noun(text):
        words = match.group("name").split()
        kept: list[str] = []
        for index in range(len(words) - 1, -1, -1):  # walk back from the noun to a stop word
            word = words[index]
            if _word(word) in STOP_WORDS or word.rstrip(",").isdigit():
                break
            kept.insert(0, word)
        before = text[: match.start("name")].split()
        if kept and len(kept) == len(words) and before and before[-1].lower() == "to":
            continue  # "to reach leads": a verb, not a name
        value = _clean(" ".join(kept)) if kept else None
        if value is not None:
            start = match.start("name") + len(match.group("name")) - len(" ".join(kept)) - 1
            return NameMatch(value, max(start, match.start()), match.end("name"))
    return None


def _before_noun(text: str) -> Iterator[re.Match[str]]:
    """The matches of :data:`_BEFORE_NOUN_RE` in ``text``, scanned from the fourth word before
    the first people noun to the last noun: a name is one to four words, each followed by
    spaces, right before its noun, so none starts earlier, and every match ends with a noun
    (so the regex need not try every position of the text)."""
    nouns = [m.span() for m in _NOUN_AT_RE.finditer(text)]
    if not nouns:
        return iter(())
    words = text[: nouns[0][0] + 1].rsplit(None, 4)
    start = len(words[0]) if len(words) == 5 else 0
    # One character past the last noun, which its closing word boundary reads.
    return _BEFORE_NOUN_RE.finditer(text, start, nouns[-1][1] + 1)


def find_lone_name(text: str) -> NameMatch | None:
    """A run of capitalised words with no trigger (``"Initech?"``): weak evidence of a name.

    Not at the start of a sentence unless it is the whole request, never a stop word, never
    followed by a number and holding none (``Route 66``, ``Studio 54``, ``Catch-22``).
    """
    for match in _LONE_RE.finditer(text):
        words = match.group("name").split()
        while words and _word(words[0]) in STOP_WORDS:
            words.pop(0)
        while words and _word(words[-1]) in STOP_WORDS:
            words.pop()
        if not words:
            continue
        rest = text[match.end() :].lstrip()
        if rest[:1].isdigit():
            continue
        value = _clean(" ".join(words))
        if value is not None and not any(c.isdigit() for c in value):  # "Catch-22"
            return NameMatch(value, match.start(), match.end())
    return None
