"""``understand(text, *, table, now)``: free text → an :class:`~rag_agent.specs.Understanding`.

Deterministic, no I/O. The rules run in a fixed order, each claiming the span it reads: counts,
e-mail addresses, ids and references (``client 7``), titles, the table the text names, explicit
``column=value`` pairs, scores and step counts, dates, statuses, channels/sources/directions,
missing values, names, subjects, industries, then the company, last, so that nothing another rule
understood is taken for a company. What is recognised but cannot be applied to the table (no such
column) goes to ``ignored`` with the reason; nothing is guessed.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid

from persistence import Op
from rag_agent.specs import Ignored, Understanding
from rag_agent.understanding.rules import fields, grouping, names
from rag_agent.understanding.rules.dates import find_dates
from rag_agent.understanding.rules.reading import Reading, plural
from rag_agent.understanding.rules.related import read_related
from rag_agent.understanding.rules.topic import topic_of
from rag_agent.understanding.rules.vocabulary import (
    CHANNEL_WORDS,
    COMPANY_COLUMNS,
    DATE_COLUMNS,
    DEFAULT_TABLE,
    DIRECTION_WORDS,
    REFERENCE_WORDS,
    SOURCE_WORDS,
    STATUS_WORDS,
    TABLE_WORDS,
)

_ACRONYM = re.compile(r"[A-Z]{2,4}")
__all__ = ["EMAIL_RE", "MAX_TEXT_LENGTH", "UUID_PATTERN", "no_company_column", "understand"]

#: Only this many leading characters are read: a query is a sentence, not a document.
MAX_TEXT_LENGTH = 2000
_MAX_INT = 2**63 - 1  # PostgreSQL bigint
_WEAK_MAX_WORDS = 5

UUID_PATTERN = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
#: An e-mail address: the local-part characters RFC 5321 allows in practice (letters, digits,
#: ``. _ % + - '``), a domain of labels and a TLD (or an IDN ``xn--`` TLD).
EMAIL_RE = re.compile(
    r"(?<![\w.+%-])[A-Za-z0-9_%+-][A-Za-z0-9._%+'-]{0,63}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}\.)+"
    r"(?:[A-Za-z]{2,24}|[Xx][Nn]--[A-Za-z0-9-]{1,59})(?![\w-])"
)
_VALUE = rf"(?P<value>{UUID_PATTERN}|[0-9]{{1,19}})(?![\w-])(?:['\u2019]s\b)?"
_SEP = r"""\s*["'`]?\s*(?:[:=]{1,2}|\bis\b|\bof\b|\bequals\b)?\s*["'`]?\s*#?\s*"""
_ENTITY = "|".join(sorted(REFERENCE_WORDS, key=len, reverse=True))
_REFERENCE_RE = re.compile(
    rf"\b(?P<entity>{_ENTITY})(?:[\s_-]*(?P<key>id|uuid|number|num|no|nr)\b\.?)?{_SEP}{_VALUE}",
    re.IGNORECASE,
)
_OWN_ID_RES = (
    re.compile(rf"(?<![\w-])(?:id|uuid)\b{_SEP}{_VALUE}", re.IGNORECASE),
    re.compile(r"(?<![\w&#])#\s?(?P<value>[0-9]{1,19})(?![\w-])"),
    re.compile(rf"(?<![\w-])(?P<value>{UUID_PATTERN})(?![\w-])"),
)
# Table words, except in phrases where they name no table ("lead time", "sequence of events").
_TABLE_RE = re.compile(
    r"\b(?:" + "|".join(sorted(TABLE_WORDS, key=len, reverse=True)).replace(" ", r"\s+") + r")\b"
    r"(?!\s+(?:time|times|singer|generation|gen|magnet|of\s+events?|of\s+steps)\b)",
    re.IGNORECASE,
)
_COUNT_RE = re.compile(
    r"\bhow\s+many\b|\b(?:the\s+)?(?:total\s+)?number\s+of\b|(?<!step\s)\bcount(?:\s+of)?\b",
    re.IGNORECASE,
)
_VAGUE_RE = re.compile(
    r"\b(?P<word>hot|warm|cold|best|good|promising)\b(?=\s+(?:leads?|prospects?|contacts?|ones)\b)",
    re.IGNORECASE,
)
# Words after a bare "status" that are not its value.
_NOT_A_VALUE = frozenset({
    "of", "and", "or", "by", "for", "is", "in", "with", "to", "the", "a", "an", "per", "quo",
    "breakdown", "column", "field", "value", "values", "change", "changes", "update", "updates",
    "report", "count", "counts", "distribution", "history", "overview", "summary",
})  # fmt: skip
_KEYED_COLUMNS = ("status", "channel", "direction", "source", "first_name", "last_name", "phone")
_COLUMN_RE = re.compile(
    rf"""(?<![\w.])["'`]?(?P<col>{"|".join(_KEYED_COLUMNS)})["'`]?\s*(?P<op>!=|==|=|:|\bis\b)?\s*"""
    r"""(?:"(?P<dq>[^"\n\x00]{1,120})"|'(?P<sq>[^'\n\x00]{1,120})'|(?P<bare>[^\s,;"'}\x00]+))""",
    re.IGNORECASE,
)
_PERSON_NAME_RE = re.compile(
    r"\b(?P<col>first\s+name|last\s+name|surname)\s*(?:is\s+|[:=]\s*)?(?P<value>[A-Za-z][\w'-]*)",
    re.IGNORECASE,
)
_EXCLUDE_RE = re.compile(
    r"\b(?:not\s+(?:at|from|with|in|for)|except(?:\s+(?:for|at|from))?|excluding|other\s+than|"
    r"outside(?:\s+of)?|besides|apart\s+from)\s+",
    re.IGNORECASE,
)
# "in Berlin", "based in Germany": a capitalised place after the claimed dates ("in March").
_PLACE_RE = re.compile(
    r"\b(?:(?i:based|located)\s+)?(?i:in|near|around)\s+[A-Z][\w'-]*(?:\s+(?:[A-Z][\w'-]*|[0-9]+))*"
)
_PERSON_RE = re.compile(
    r"\b(?i:leads?|contacts?|prospects?|people|person|someone|anyone|somebody)\s+"
    r"(?i:named|called)\s+(?P<first>[A-Z][\w'-]*)(?:\s+(?P<last>[A-Z][\w'-]*))?"
)
# Pre-checks (``Reading.finditer``'s ``needs``): every match of the rule holds one of these.
_ID_CHARS = (*"0123456789", "-", "#")  # a number, or the hyphens of a UUID
_VAGUE_WORDS = ("hot", "warm", "cold", "best", "good", "promising")
_EXCLUDE_WORDS = ("not", "except", "excluding", "other", "outside", "besides", "apart")
_WORDS = {
    "channel": CHANNEL_WORDS,
    "direction": DIRECTION_WORDS,
    "source": SOURCE_WORDS,
}


def _int_or_uuid(raw: str) -> int | str | None:
    if raw.isdigit():
        value = int(raw)
        return value if value <= _MAX_INT else None
    return str(uuid.UUID(raw))


def _references(reading: Reading) -> list[tuple[str, str | None, int | str, bool]]:
    """Claim every id and reference: (its table, its foreign key, value, named as a column)."""
    found: list[tuple[str, str | None, int | str, bool]] = []
    for match in reading.finditer(_REFERENCE_RE, _ID_CHARS):
        value = _int_or_uuid(match["value"])
        table, key = REFERENCE_WORDS[match["entity"].lower()]
        if value is not None:
            # "client_id", "clientid": a column; "client 7", "client id 7": the client itself
            written = match.group()[len(match["entity"]) :]
            as_column = bool(match["key"]) and not written[:1].isspace()
            found.append((table, key, value, as_column))
        reading.claim(*match.span())
    for regex in _OWN_ID_RES:
        for match in reading.finditer(regex, _ID_CHARS):
            value = _int_or_uuid(match["value"])
            if value is not None:
                found.append(("", "id", value, True))
            reading.claim(*match.span())
    return found


def _apply_references(
    reading: Reading, references: list[tuple[str, str | None, int | str, bool]]
) -> None:
    for table, key, value, _ in references:
        column = "id" if table in ("", reading.table) else key
        if column is not None and reading.has(column):
            reading.add(column, Op.EQ, value)
            continue
        noun = table.removesuffix("s").replace("inquirie", "inquiry") or "id"
        reason = (
            f"{plural(reading.table)} have no id column"
            if column == "id"
            else f"{plural(reading.table)} do not reference {plural(table)}"
        )
        if all(item.text != f"{noun} {value}" for item in reading.ignored):
            reading.ignored.append(Ignored(f"{noun} {value}", reason))


def _named_table(reading: Reading) -> tuple[str, tuple[int, int]] | None:
    match = _TABLE_RE.search(reading.text)
    if match is None:
        return None
    return TABLE_WORDS[" ".join(match.group().lower().split())], match.span()


def _keyed_columns(reading: Reading) -> None:
    """``status: open``, ``channel=email``, ``first name Ana``: checked against the vocabulary."""
    for match in reading.finditer(_COLUMN_RE, _KEYED_COLUMNS):
        column = match["col"].lower()
        raw = match["dq"] or match["sq"] or match["bare"]
        word = " ".join(raw.lower().split())
        vocabulary = STATUS_WORDS.get(reading.table, {}) if column == "status" else None
        vocabulary = _WORDS.get(column, vocabulary)
        known_status = any(word in words for words in STATUS_WORDS.values())
        # "status won": a value all the same, so an unknown one is reported, never dropped in
        # silence; "by status", "status of", "status and …" give none.
        status_value = column == "status" and (known_status or word.isalpha())
        if match["op"] is None and not (status_value and word not in _NOT_A_VALUE):
            continue
        if vocabulary is None:
            reading.apply(*match.span(), column, Op.IEQ, raw.strip(), f"{column} column")
        elif word in vocabulary:
            reading.apply(*match.span(), column, Op.EQ, vocabulary[word], f"{column} column")
        else:
            known = ", ".join(sorted(set(vocabulary.values()))) or "none"
            reason = f"{raw!r} is not a {column} of {plural(reading.table)} ({known})"
            reading.ignore(*match.span(), reason)
    for match in reading.finditer(_PERSON_NAME_RE, ("name",)):
        column = "first_name" if match["col"].lower().startswith("first") else "last_name"
        reading.apply(*match.span(), column, Op.IEQ, match["value"], "person names")


def _dates(reading: Reading, now: dt.datetime) -> None:
    column = DATE_COLUMNS.get(reading.table)
    for match in find_dates(reading.text, now):
        future = any(op is Op.GTE and value > now for op, value in match.bounds)
        if match.ignored_reason is not None or column is None or future:
            reason = match.ignored_reason or (
                f"{plural(reading.table)} have no date column"
                if column is None
                else "a date in the future: no row is dated then yet"
            )
            reading.ignore(match.start, match.end, reason)
            continue
        for op, value in match.bounds:
            reading.add(column, op, value)
        reading.claim(match.start, match.end)


def _vague(reading: Reading) -> None:
    for match in reading.finditer(_VAGUE_RE, _VAGUE_WORDS):
        reason = f"no column says how {match['word'].lower()} a lead is"
        reading.ignore(*match.span(), reason)


def _exclusions_places_people(reading: Reading) -> None:
    """``not at Acme``, ``in Berlin``, ``leads named Ana Silva``: read before the company rule,
    so none of them is taken for a company."""
    for match in reading.finditer(_EXCLUDE_RE, _EXCLUDE_WORDS):
        found = names.bare_phrase(reading.text, match.end())
        if found is not None:
            reading.ignore(match.start(), found[1], "the rules do not exclude values")
    places = reading.finditer(_PLACE_RE) if reading.may_capitalise else []  # a place: [A-Z]
    for match in places:
        reading.ignore(*match.span(), f"no column of {plural(reading.table)} holds a location")
    for match in reading.finditer(_PERSON_RE, ("named", "called")):
        if match["last"] is None:
            reading.ignore(*match.span(), "one name may be a first or a last name")
        elif reading.has("first_name"):
            reading.add("first_name", Op.IEQ, match["first"])
            reading.add("last_name", Op.IEQ, match["last"])
            reading.claim(*match.span())
        else:
            reading.ignore(*match.span(), f"{plural(reading.table)} have no person names")


def no_company_column(table: str) -> str:
    """Why a company named in a request on ``table`` was not applied (the pipeline may still
    read it through a related table: :mod:`rag_agent.pipeline.company_link`)."""
    return f"no column of {plural(table)} holds a company"


def _company(reading: Reading) -> bool:
    """Read the company; ``True`` when only weak evidence (a lone capitalised name) found one."""
    column = COMPANY_COLUMNS.get(reading.table, None if reading.known else "company_name")
    found = names.find_company(reading.text)
    weak = False
    if found is None and not reading.conditions and not reading.ignored:
        words = reading.original.split()
        if len(words) <= _WEAK_MAX_WORDS:
            found, weak = names.find_lone_name(reading.text), True
    if found is None:
        return False
    if column is None:
        reading.ignore(found.start, found.end, no_company_column(reading.table))
        return False
    reading.add(column, Op.ICONTAINS, found.value)
    reading.claim(found.start, found.end)
    return weak


def understand(text: str, *, table: str | None = None, now: dt.datetime) -> Understanding:
    """What ``text`` asks of ``table`` (or of the table it names), with dates against ``now``.

    ``table`` is the table the caller asked for, ``None`` when not given: the text may then name
    one ("campaigns of client 7"), and its words are read against ``leads`` when it names none
    (``Understanding.table`` stays ``None``). A table given by the caller wins over one the text
    names (the text's is then ignored, with the reason). ``now`` must be an aware datetime.
    Only the first :data:`MAX_TEXT_LENGTH` characters are read; a non-``str`` reads as empty.

    >>> import datetime as dt
    >>> now = dt.datetime(2025, 6, 18, 12, tzinfo=dt.UTC)
    >>> found = understand("how many campaigns of client 7 are paused?", now=now)
    >>> found.table, found.count_only, [(c.column, c.op.value, c.value) for c in found.conditions]
    ('campaigns', True, [('client_id', 'eq', 7), ('status', 'eq', 'paused')])
    """
    if not isinstance(text, str) or not text.strip():
        return Understanding(table=table)
    original = text[:MAX_TEXT_LENGTH].replace("\x00", " ")
    reading = Reading(original, table or DEFAULT_TABLE)
    count_only = False
    for match in reading.finditer(_COUNT_RE, ("how", "number", "count")):
        count_only = True
        reading.claim(*match.span())
    groupings = grouping.find_groupings(reading)
    emails = reading.finditer(EMAIL_RE, ("@",))
    for match in emails:
        reading.claim(*match.span())
    references = _references(reading)
    titles = fields.find_titles(reading)  # claimed before table words: "account executive"
    include = read_related(reading)  # before table words: "with its conversations"

    named = _named_table(reading)
    target = table
    if named is not None and table is None:
        target = named[0]
    elif named is not None and named[0] != table:
        # not claimed: "email campaigns" still reads as a channel, which leads have not
        reading.ignore(*named[1], f"the request is for {plural(str(table))}", claim=False)
    if target is None:
        target = next((t for t, _, _, as_column in references if t and not as_column), None)
    reading.table = target or DEFAULT_TABLE
    group_by = grouping.apply_groupings(reading, groupings)

    for match in emails:
        email = match.group().lower()
        reading.apply(*match.span(), "email", Op.IEQ, email, "email column")
    _apply_references(reading, references)
    for start, end, title in titles:
        # An acronym is the whole title or nothing: "CTO" as a substring is in "Director".
        op = Op.IEQ if _ACRONYM.fullmatch(title) else Op.ICONTAINS
        reading.apply(start, end, "title", op, title, "title column")
    for read in (
        _keyed_columns,
        fields.read_scores,
        lambda r: _dates(r, now),
        fields.read_statuses,
        fields.read_channels,
        fields.read_missing,
        fields.read_names,
        fields.read_subjects,
        fields.read_industry,
        _vague,
        _exclusions_places_people,
    ):
        read(reading)
    weak = _company(reading)
    if named is not None:  # the table word is framing: "inquiries about refunds"
        reading.claim(*named[1])
    return Understanding(
        table=target,
        conditions=tuple(reading.conditions),
        count_only=count_only,
        ignored=tuple(reading.ignored),
        weak=weak,
        group_by=group_by,
        include=include,
        topic=topic_of(reading.text),
    )
