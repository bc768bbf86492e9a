"""Rule-based filter extraction: free text → ``{"id", "email", "company", "client_id"}``.

Deterministic, no I/O, a few microseconds per query. Each rule claims the span it reads, so a
later rule cannot re-read it (``client_id=7`` never also yields ``id=7``). Text that names no
filter yields ``{}``: the agent then never queries a table unfiltered.

>>> parse_filters_from_text("leads from Acme Inc. with email BOB@ACME.COM")
{'email': 'bob@acme.com', 'company': 'Acme Inc'}
>>> parse_filters_from_text("client_id=7, lead #42")
{'id': 42, 'client_id': 7}

Values only ever become bound query values (``eq``, ``icontains``, or ``ieq`` for the email's
case-insensitive equality): never SQL, never a pattern.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from collections.abc import Mapping
from typing import Any

from persistence.query import Filter, Op
from rag_agent.conditions import legacy_conditions
from rag_agent.specs import Understanding

__all__ = [
    "FILTER_KEYS",
    "MAX_TEXT_LENGTH",
    "filters_to_query",
    "normalize_filters",
    "parse_filters_from_text",
    "understand",
]

#: The filters the agent understands, in canonical order.
FILTER_KEYS = ("id", "email", "company", "client_id")
#: Only this many leading characters are parsed: a query is a sentence, not a document.
MAX_TEXT_LENGTH = 2000
_MAX_COMPANY_LENGTH = 120
_MAX_COMPANY_TOKENS = 6
_MAX_INT = 2**63 - 1  # PostgreSQL bigint

_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_EMAIL_RE = re.compile(
    r"(?<![\w.+%-])[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}\.)+"
    r"(?:[A-Za-z]{2,24}|[Xx][Nn]--[A-Za-z0-9-]{1,59})(?![\w-])"
)
_NUMBER_OR_UUID = rf"(?P<value>{_UUID}|\d{{1,19}})(?![\w-])(?:['\u2019]s\b)?"
_SEP = r"""\s*["'`]?\s*(?:[:=]{1,2}|\bis\b|\bof\b|\bequals\b)?\s*["'`]?\s*#?\s*"""
_CLIENT_RE = re.compile(
    rf"\bclient(?:s)?(?:[\s_-]*(?:id|number|num|no|nr)\b\.?)?{_SEP}{_NUMBER_OR_UUID}",
    re.IGNORECASE,
)
_ID_RES = (
    re.compile(
        rf"(?<![\w-])(?:lead[\s_-]*)?(?:id|uuid)\b{_SEP}{_NUMBER_OR_UUID}",
        re.IGNORECASE,
    ),
    re.compile(
        rf"\blead\s*(?:#|\bno\.?|\bnr\.?|\bnumber\b|\bnum\b\.?)\s*#?\s*{_NUMBER_OR_UUID}",
        re.IGNORECASE,
    ),
    re.compile(rf"\blead\s+{_NUMBER_OR_UUID}", re.IGNORECASE),
    re.compile(r"(?<![\w&#])#\s?(?P<value>\d{1,19})(?![\w-])"),
    re.compile(rf"(?<![\w-])(?P<value>{_UUID})(?![\w-])"),
)

_QUOTED = r"""(?:"(?P<dq>[^"\n]{1,120})"|'(?P<sq>[^'\n]{1,120})'|[“”](?P<cq>[^“”\n]{1,120})[“”])"""
# "company: X", "company name is X", "employer = X"; ``(?!\w)`` keeps "companyX" out.
_KEYED_RE = re.compile(
    r"\b(?:company[\s_-]*name|company|organi[sz]ation|employer|firm)(?![\w-])\s*"
    r"""["'`]?\s*(?:[:=]{1,2}|\bis\b|\bnamed\b|\bcalled\b|\bequals\b|\blike\b)?\s*"""
    rf"(?:{_QUOTED}|(?P<bare>(?=\S)))",
    re.IGNORECASE,
)
# "at acme", "from Acme Inc.", "for Initech", "employed by Globex", "working at 'Foo, Bar'"
_PREP_RE = re.compile(
    rf"\b(?:at|from|for|by|of)\s+(?:{_QUOTED}|(?P<bare>(?=\S)))",
    re.IGNORECASE,
)
# "acme leads", "Acme's contacts", "the Globex prospects"
_BEFORE_NOUN_RE = re.compile(
    r"(?P<name>(?:[^\W_][\w&.'\u2019+-]*\s+){1,4}?)"
    r"(?:leads?|contacts?|prospects?)\b",
    re.IGNORECASE,
)
_TOKEN_RE = re.compile(r"[ \t]*([^\W_][\w&.'\u2019+-]*|&)")
_DOMAIN_RE = re.compile(r"(?P<name>[^\W_][\w-]*)\.(?:com|io|net|org|co|ai|dev|app|biz|us|uk|de)")


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Words that end a company name: clause structure, then (for looser triggers) ordinary words.
_STRUCTURAL_STOP = _words(
    "and or but with without where whose who which that in on at from for of by to into about "
    "via than then between per limit offset page sorted sort order ordered ordering email "
    "emails e-mail mail id ids client clients status score title phone created updated since "
    "before after during if when while please lead leads contact contacts prospect prospects"
)
_SOFT_STOP = _STRUCTURAL_STOP | _words(
    "the a an all any some every each my our your their his her its this that these those me "
    "us i you we they it show find get list give fetch search look lookup retrieve display "
    "pull return want need what how is are was were be been do does did can could would "
    "should may have has had there here people person persons record records row rows entry "
    "entries customer customers account accounts company companies companys user users table "
    "tables data database db info information details name names date dates first last top "
    "recent latest newest oldest next previous today yesterday tomorrow tonight week weeks "
    "month months year years day days ago now new open closed qualified unqualified hot warm "
    "cold active inactive pending won lost stale current existing other same more less many "
    "few most number numbers count total every employees staff us only just also not no yes "
    "ok okay hi hello hey thanks thank sure least best worst high low linkedin"
)
_ARTICLES = frozenset({"the", "a", "an"})
# Stop words that may still continue a name already started ("Bluth Company").
_NAME_NOUNS = frozenset({"company", "companies", "group", "people"})
_TRAILING = ".,;:!?'\"\u2019`)]}"


def _claim(text: str, start: int, end: int) -> str:
    # NUL cannot occur in the text (replaced up front), so it marks a claimed span.
    return text[:start] + "\x00" * (end - start) + text[end:]


def _int_or_uuid(raw: str) -> int | str | None:
    if raw.isdigit():
        value = int(raw)
        return value if value <= _MAX_INT else None
    return str(uuid.UUID(raw))


def _bare_name(text: str, pos: int, stop: frozenset[str]) -> str | None:
    tokens: list[str] = []
    while len(tokens) < _MAX_COMPANY_TOKENS:
        match = _TOKEN_RE.match(text, pos)
        if match is None:
            break
        token = match.group(1)
        word = token.rstrip(_TRAILING).lower()
        if word.endswith(("'s", "\u2019s")):
            word = word[:-2]
        if not tokens and word in _ARTICLES:
            pos = match.end()
            continue
        if (word in stop and (not tokens or word not in _NAME_NOUNS)) or word.isdigit() or not word:
            break
        tokens.append(token)
        pos = match.end()
        if token[-1] in ",;:!?)" or (token.endswith(".") and not _is_abbreviation(token)):
            break  # a sentence or clause ends here
    return _clean_company(" ".join(tokens)) if tokens else None


def _is_abbreviation(token: str) -> bool:
    return token.rstrip(".").lower() in {"inc", "co", "corp", "ltd", "llc", "plc", "s.a", "b.v"}


def _clean_company(raw: str) -> str | None:
    value = " ".join(raw.split()).strip(_TRAILING + " ")
    if value.lower().endswith(("'s", "\u2019s")):
        value = value[:-2]
    domain = _DOMAIN_RE.fullmatch(value)
    if domain is not None:
        value = domain.group("name")
    if not value or len(value) > _MAX_COMPANY_LENGTH or not any(c.isalpha() for c in value):
        return None
    if value.lower() in _SOFT_STOP:
        return None
    return value


def _company(text: str) -> str | None:
    for regex, stop in ((_KEYED_RE, _STRUCTURAL_STOP), (_PREP_RE, _SOFT_STOP)):
        for match in regex.finditer(text):
            quoted = match.group("dq") or match.group("sq") or match.group("cq")
            if quoted is not None:
                value = _clean_company(quoted)
            else:
                value = _bare_name(text, match.end(), stop)
            if value is not None:
                return value
    for match in _BEFORE_NOUN_RE.finditer(text):
        words = match.group("name").split()
        kept: list[str] = []
        for word in reversed(words):  # walk back from the noun until a stop word
            if word.rstrip(_TRAILING).lower().removesuffix("'s") in _SOFT_STOP:
                break
            kept.insert(0, word)
        if kept:
            value = _clean_company(" ".join(kept))
            if value is not None:
                return value
    return None


def parse_filters_from_text(text: str) -> dict[str, Any]:
    """Extract ``id``, ``email``, ``company`` and ``client_id`` from free text.

    ``id``/``client_id`` are ``int`` (or a canonical UUID string), ``email`` is lower-cased,
    ``company`` keeps the user's spelling without trailing punctuation. Keys appear only when
    found; anything that is not a ``str`` yields ``{}``.
    """
    if not isinstance(text, str) or not text:
        return {}
    text = text[:MAX_TEXT_LENGTH].replace("\x00", " ")
    found: dict[str, Any] = {}

    email = _EMAIL_RE.search(text)
    if email is not None:
        found["email"] = email.group().lower()
        text = _claim(text, *email.span())

    client = _CLIENT_RE.search(text)
    if client is not None:
        value = _int_or_uuid(client.group("value"))
        if value is not None:
            found["client_id"] = value
        text = _claim(text, *client.span())

    for regex in _ID_RES:
        match = regex.search(text)
        if match is not None:
            value = _int_or_uuid(match.group("value"))
            if value is not None:
                found["id"] = value
            text = _claim(text, *match.span())
            break

    company = _company(text)
    if company is not None:
        found["company"] = company
    return {key: found[key] for key in FILTER_KEYS if key in found}


def normalize_filters(filters: object) -> dict[str, Any]:
    """Validate filters from any source (an LLM, a tool call): unknown keys and bad values drop.

    Returns the canonical form ``parse_filters_from_text`` produces; anything unusable counts as
    empty, so an invalid LLM answer can never widen a query.
    """
    if not isinstance(filters, Mapping):
        return {}
    clean: dict[str, Any] = {}
    for key in ("id", "client_id"):
        value = filters.get(key)
        if type(value) is int and 0 <= value <= _MAX_INT:
            clean[key] = value
        elif isinstance(value, str) and value.strip():
            raw = value.strip().lstrip("#")
            if raw.isdigit() or re.fullmatch(_UUID, raw):
                parsed = _int_or_uuid(raw)
                if parsed is not None:
                    clean[key] = parsed
    email = filters.get("email")
    if isinstance(email, str):
        match = _EMAIL_RE.fullmatch(email.strip())
        if match is not None:
            clean["email"] = match.group().lower()
    company = filters.get("company")
    if isinstance(company, str) and "\x00" not in company:
        value = " ".join(company.split()).strip(_TRAILING + " ")
        if value and len(value) <= _MAX_COMPANY_LENGTH:
            clean["company"] = value
    return {key: clean[key] for key in FILTER_KEYS if key in clean}


def filters_to_query(filters: Mapping[str, Any]) -> tuple[Filter, ...]:
    """Translate canonical filters into query ``Filter`` objects, in canonical order.

    ``company`` → ``company_name icontains``; ``email`` → ``ieq`` (case-insensitive equality,
    which a ``lower(email)`` index serves); ``id``/``client_id`` → ``eq``.
    """
    out: list[Filter] = []
    for key in FILTER_KEYS:
        if key not in filters:
            continue
        value = filters[key]
        if key == "company":
            out.append(Filter("company_name", Op.ICONTAINS, value))
        elif key == "email":
            out.append(Filter("email", Op.IEQ, value))
        else:
            out.append(Filter(key, Op.EQ, value))
    return tuple(out)


def understand(text: str, *, table: str | None = None, now: dt.datetime) -> Understanding:
    """What ``text`` asks for, as conditions the rules understood (``source="rules"``)."""
    return Understanding(conditions=legacy_conditions(parse_filters_from_text(text), "rules"))
