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
from collections.abc import Iterable, Mapping

from persistence import Op
from persistence.vocabulary import SchemaVocabulary, stem
from rag_agent.specs import Ignored, Understanding
from rag_agent.understanding.rules import fields, grouping, names
from rag_agent.understanding.rules.columns import read_columns, report_other_tables
from rag_agent.understanding.rules.dates import find_dates
from rag_agent.understanding.rules.patterns import first_letter, word_start
from rag_agent.understanding.rules.reading import Reading, plural
from rag_agent.understanding.rules.related import read_related
from rag_agent.understanding.rules.sample_vocabulary import sample_vocabulary, with_sample_fallback
from rag_agent.understanding.rules.topic import topic_of
from rag_agent.understanding.rules.vocabulary import DEFAULT_TABLE, REFERENCE_WORDS, TABLE_WORDS

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
_EMAIL_KEY_RE = re.compile(
    r"\b(?:e-?mail(?:\s+address)?|address)\s*(?:is\b|[:=]|of\b)?\s*[\"'`]?\s*$", re.IGNORECASE
)
_VALUE = rf"(?P<value>{UUID_PATTERN}|[0-9]{{1,19}})(?![\w-])(?:['\u2019]s\b)?"
_SEP = r"""\s*["'`]?\s*(?:[:=]{1,2}|\bis\b|\bof\b|\bequals\b)?\s*["'`]?\s*#?\s*"""
# The entity as :func:`.patterns.word_start` writes it: the search tests one set of first letters
# at each position instead of every entity's first letter in turn.
_REFERENCE_RE = re.compile(
    rf"(?P<entity>{word_start(sorted(REFERENCE_WORDS, key=len, reverse=True))})"
    rf"(?i:(?:[\s_-]*(?P<key>id|uuid|number|num|no|nr)\b\.?)?{_SEP}{_VALUE})"
)
_ID_KEY = rf"(?<![\w-])(?:id|uuid)\b{_SEP}{_VALUE}"
_ID_KEY_RE = re.compile(first_letter("iu", _ID_KEY), re.IGNORECASE)
# "#(?<![\w&#]#)" is "(?<![\w&#])#": starting with the "#", the search skips ahead to one.
_HASH_ID_RE = re.compile(r"#(?<![\w&#]#)\s?(?P<value>[0-9]{1,19})(?![\w-])")
_UUID_RE = re.compile(rf"(?<![\w-])(?P<value>{UUID_PATTERN})(?![\w-])")
_OWN_IDS: tuple[tuple[re.Pattern[str], tuple[str, ...], frozenset[str]], ...] = (
    (_ID_KEY_RE, (*"0123456789", "-"), frozenset({"id", "uuid"})),
    (_HASH_ID_RE, ("#",), frozenset()),
    (_UUID_RE, ("-",), frozenset()),
)
# Table words, except in phrases where they name no table ("lead time", "sequence of events").
# (written by :func:`.patterns.word_start`: one test of the first letters at each position).
_TABLE_RE = re.compile(
    word_start(w.replace(" ", r"\s+") for w in sorted(TABLE_WORDS, key=len, reverse=True))
    + r"\b(?i:(?!\s+(?:time|times|singer|generation|gen|magnet|of\s+events?|of\s+steps)\b))"
)
# The patterns below that :func:`.patterns.first_letter` writes: one test of the letters a match
# may start with at each position, instead of every alternative in turn.
_COUNT = r"\bhow\s+many\b|\b(?:the\s+)?(?:total\s+)?number\s+of\b|(?<!step\s)\bcount(?:\s+of)?\b"
_COUNT_RE = re.compile(first_letter("htnc", _COUNT), re.IGNORECASE)
_VAGUE = (
    r"\b(?P<word>hot|warm|cold|best|good|promising)\b(?=\s+(?:leads?|prospects?|contacts?|ones)\b)"
)
_VAGUE_RE = re.compile(first_letter("hwcbgp", _VAGUE), re.IGNORECASE)
# ``column = value`` written out: any identifier, checked against the table's columns.
_COLUMN_RE = re.compile(
    r"""(?<![\w.])["'`]?(?P<col>[A-Za-z_][A-Za-z0-9_]{0,62})["'`]?\s*(?P<op>!=|==|=|:)\s*"""
    r"""(?:"(?P<dq>[^"\n\x00]{1,120})"|'(?P<sq>[^'\n\x00]{1,120})'|(?P<bare>[^\s,;"'}\x00]+))""",
)
_PERSON_NAME_RE = re.compile(
    r"\b(?P<col>first\s+name|last\s+name|surname)\s*(?:is\s+|[:=]\s*)?(?P<value>[A-Za-z][\w'-]*)",
    re.IGNORECASE,
)
_EXCLUDE = (
    r"\b(?:not\s+(?:at|from|with|in|for)|except(?:\s+(?:for|at|from))?|excluding|other\s+than|"
    r"outside(?:\s+of)?|besides|apart\s+from)\s+"
)
_EXCLUDE_RE = re.compile(first_letter("neoba", _EXCLUDE), re.IGNORECASE)
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
# Gates (``Reading.finditer``'s ``words``, see :mod:`.gates`): every match of the rule holds one
# of these written whole.
_COUNT_WORDS = frozenset({"how", "number", "count"})
_VAGUE_WORDS = frozenset({"hot", "warm", "cold", "best", "good", "promising"})
_EXCLUDE_WORDS = frozenset({"not", "except", "excluding", "other", "outside", "besides", "apart"})
_PLACE_WORDS = frozenset({"in", "near", "around"})
_PERSON_WORDS = frozenset({"named", "called"})
#: Every word of a table's name ("staging" of "staging leads"): the table words' gate.
_TABLE_GATE = frozenset(w for phrase in TABLE_WORDS for w in re.split(r"[\s_]+", phrase))
#: The people nouns a named person follows ("the lead Wanda Zielinski").
_PERSON_NOUNS = frozenset({"lead", "leads", "contact", "contacts", "prospect", "prospects",
                           "person", "people"})  # fmt: skip
#: A reference starts with its entity ("client 7", "client7", "clientid 7").
_ENTITY_STARTS = tuple(REFERENCE_WORDS)
#: The pre-checks of :func:`_keyed_columns`'s two regexes (``column: value``, ``first name``).
_KEYED_NEEDS = (":", "=", "name")
#: The words of :func:`_exclusions_places_people`'s three gates: a text with none skips them.
_EXCLUSION_PLACE_PERSON_WORDS = _EXCLUDE_WORDS | _PLACE_WORDS | _PERSON_WORDS


def _int_or_uuid(raw: str) -> int | str | None:
    if raw.isdigit():
        value = int(raw)
        return value if value <= _MAX_INT else None
    return str(uuid.UUID(raw))


def _references(reading: Reading) -> list[tuple[str, str | None, int | str, bool]]:
    """Claim every id and reference: (its table, its foreign key, value, named as a column)."""
    found: list[tuple[str, str | None, int | str, bool]] = []
    if not reading.may_hold(_ID_CHARS):
        return found  # every id and reference holds a digit, a "#" or a UUID's hyphens
    said = reading.said
    entity = said is None or said.starts_any(_ENTITY_STARTS)
    for match in reading.finditer(_REFERENCE_RE, _ID_CHARS) if entity else ():
        value = _int_or_uuid(match["value"])
        table = REFERENCE_WORDS[match["entity"].lower()]
        key = _reference_column(reading, table)
        if value is not None:
            # "client_id", "clientid": a column; "client 7", "client id 7": the client itself
            written = match.group()[len(match["entity"]) :]
            as_column = bool(match["key"]) and not written[:1].isspace()
            found.append((table, key, value, as_column))
        reading.claim(*match.span())
    # An own id is keyed ("id 7"), after "#" or a UUID (its hyphens); each regex is run after
    # the one before has claimed its ids.
    for regex, needs, words in _OWN_IDS:
        for match in reading.finditer(regex, needs, words):
            value = _int_or_uuid(match["value"])
            if value is not None:
                found.append(("", "id", value, True))
            reading.claim(*match.span())
    return found


def _reference_column(reading: Reading, table: str) -> str | None:
    """The column of the table being read that refers to ``table`` (its foreign key); on a
    table the vocabulary does not describe, the conventional ``<row>_id`` (the facade checks)."""
    if not reading.known:
        return f"{_singular(table)}_id"
    columns = reading.lexicon.columns.values()
    return next((c.name for c in columns if c.references == table), None)


_OWNER_BEFORE_RE = re.compile(
    r"\b(?:owner|owned\s+by|rep|account\s+manager|assigned\s+to)\b(?:\s+(?:is|was|=|:))?\s*$",
    re.IGNORECASE,
)
_OWNER_AFTER_RE = re.compile(r"^(?:['\u2019]s\b|\s+(?:owns?|manages?|handles?)\b)", re.IGNORECASE)


def _email_column(
    reading: Reading, match: re.Match[str]
) -> tuple[str | None, list[tuple[int, int]]]:
    """The e-mail column an address is for, and the words that said so: an owner's when the
    words around it say so ("owned by a@x.io", "a@x.io's leads", "does a@x.io own") and the
    table has one, else the row's own; on a table the vocabulary does not describe, the
    conventional ``email`` (the facade checks)."""
    if not reading.known:
        return "email", []
    columns = reading.lexicon.role("email")
    if not columns:
        return None, []
    owner = [c for c in columns if set(reading.lexicon.columns[c].words) & {"owner", "rep"}]
    text = reading.original
    before = _OWNER_BEFORE_RE.search(text[max(0, match.start() - 40) : match.start()])
    after = _OWNER_AFTER_RE.search(text[match.end() : match.end() + 12])
    if owner and (before or after):
        said = []
        if before is not None:
            offset = max(0, match.start() - 40)
            said.append((offset + before.start(), offset + before.end()))
        if after is not None:
            said.append((match.end() + after.start(), match.end() + after.end()))
        return owner[0], said
    return columns[0], []


def _singular(table: str) -> str:
    return table[:-3] + "y" if table.endswith("ies") else table.removesuffix("s")


def _apply_references(
    reading: Reading, references: list[tuple[str, str | None, int | str, bool]]
) -> None:
    for table, _key, value, _ in references:
        column = "id" if table in ("", reading.table) else _reference_column(reading, table)
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
    if not reading.says(_TABLE_GATE):
        return None
    match = _TABLE_RE.search(reading.text)
    if match is None:
        return None
    return TABLE_WORDS[" ".join(match.group().lower().split())], match.span()


def _column_elsewhere(reading: Reading, column: str) -> bool:
    """Whether ``column`` is a column of another table (so the text meant a column)."""
    return any(column in t.columns for t in reading.vocabulary.tables.values())


def _keyed_columns(reading: Reading) -> None:
    """``stage: won``, ``channel=email``, ``first name Ana``: a column of the table written out
    with its value, the value checked against the column's learned values when it has them."""
    if not reading.may_hold(_KEYED_NEEDS):
        return  # both regexes' pre-checks are closed: no set-up
    lexicon = reading.lexicon
    for match in reading.finditer(_COLUMN_RE, _KEYED_NEEDS[:2]):
        column = match["col"].lower()
        raw = (match["dq"] or match["sq"] or match["bare"]).strip()
        if not lexicon.has(column):
            compound = re.search(r"[A-Za-z]\s+$", reading.text[: match.start()])  # "company name"
            if reading.known and not compound and _column_elsewhere(reading, column):
                reading.ignore(*match.span(), f"{plural(reading.table)} have no {column} column")
            continue
        values = lexicon.columns[column].values
        op = Op.NEQ if match["op"] == "!=" else Op.EQ
        if not lexicon.is_category(column):
            continue  # names, e-mails, numbers, dates: their own rules read them
        same = [v for v in values or () if isinstance(v, str) and v.casefold() == raw.casefold()]
        if same:
            reading.add(column, op, same[0])
            reading.claim(*match.span())
        else:
            known = ", ".join(str(v) for v in (values or ())[:12]) or "none"
            reason = f"{raw!r} is not a {column} of {plural(reading.table)} ({known})"
            reading.ignore(*match.span(), reason)
    first, last = lexicon.first("given"), lexicon.first("family")
    for match in reading.finditer(_PERSON_NAME_RE, _KEYED_NEEDS[2:]):
        column = first if match["col"].lower().startswith("first") else last
        if column is None:
            reading.ignore(*match.span(), f"{plural(reading.table)} have no person names")
        else:
            reading.add(column, Op.IEQ, match["value"])
            reading.claim(*match.span())


_VERB_RE = re.compile(r"[^\W_]+")


def _date_column(reading: Reading) -> tuple[str | None, str | None]:
    """The date column the text's words name ("opened", "launched"), else the table's
    created/received/sent-like one; the naming word is claimed."""
    verbs = {stem(m.group().lower()): m.span() for m in _VERB_RE.finditer(reading.text)}
    column, why = reading.lexicon.date_column(verbs)
    if column is not None:
        for word in set(reading.lexicon.columns[column].stems) - {"at", "on", "date"}:
            if word in verbs:
                reading.claim(*verbs[word])
    return column, why


def _dates(reading: Reading, now: dt.datetime) -> None:
    matches = find_dates(reading.text, now, reading.said)
    if not matches:
        return
    column, why = _date_column(reading)
    for match in matches:
        future = any(op is Op.GTE and value > now for op, value in match.bounds)
        if match.ignored_reason is not None or column is None or future:
            reason = match.ignored_reason or (
                f"{plural(reading.table)} have {why}"
                if column is None
                else "a date in the future: no row is dated then yet"
            )
            reading.ignore(match.start, match.end, reason)
            continue
        for op, value in match.bounds:
            reading.add(column, op, value)
        reading.claim(match.start, match.end)


def _vague(reading: Reading) -> None:
    for match in reading.finditer(_VAGUE_RE, words=_VAGUE_WORDS):
        reason = f"no column says how {match['word'].lower()} a lead is"
        reading.ignore(*match.span(), reason)


def _exclusions_places_people(reading: Reading) -> None:
    """``not at Acme``, ``in Berlin``, ``leads named Ana Silva``: read before the company rule,
    so none of them is taken for a company."""
    said = reading.said
    if said is not None and said.words.isdisjoint(_EXCLUSION_PLACE_PERSON_WORDS):
        return  # the three gates are closed: no set-up
    for match in reading.finditer(_EXCLUDE_RE, words=_EXCLUDE_WORDS):
        found = names.bare_phrase(reading.text, match.end())
        if found is not None:
            reading.ignore(match.start(), found[1], "the rules do not exclude values")
    # a place: [A-Z]
    places = reading.finditer(_PLACE_RE, words=_PLACE_WORDS) if reading.may_capitalise else []
    for match in places:
        reading.ignore(*match.span(), f"no column of {plural(reading.table)} holds a location")
    first, last = reading.lexicon.first("given"), reading.lexicon.first("family")
    full = reading.lexicon.first("person")
    for match in reading.finditer(_PERSON_RE, words=_PERSON_WORDS):
        if match["last"] is None:
            reading.ignore(*match.span(), "one name may be a first or a last name")
        elif first is not None and last is not None:
            reading.add(first, Op.IEQ, match["first"])
            reading.add(last, Op.IEQ, match["last"])
            reading.claim(*match.span())
        elif full is not None:
            reading.add(full, Op.IEQ, f"{match['first']} {match['last']}")
            reading.claim(*match.span())
        else:
            reading.ignore(*match.span(), f"{plural(reading.table)} have no person names")


# Two capitalised words: a person's first and last name when the table's learned names hold them.
# "[A-Z](?<!\w[A-Z])" is "\b[A-Z]": starting with a capital, the search skips ahead to one
# instead of trying the pattern at every position.
_BARE_PERSON_RE = re.compile(
    r"(?P<first>[A-Z](?<!\w[A-Z])[a-z-]+)\s+(?P<last>[A-Z][a-z-]+)(?:['\u2019]s)?\b"
)
_AFTER_PERSON_NOUN = re.compile(r"\b(?:leads?|contacts?|prospects?|person|people)\s+$", re.I)


def _known_people(reading: Reading) -> None:
    """ "find Hugo Costa": a first and a last name each one of the table's learned values (a
    company's name is not read as a person unless both words are people's names)."""
    lexicon = reading.lexicon
    first, last = lexicon.first("given"), lexicon.first("family")
    if first is None or last is None or not reading.may_capitalise:
        return
    firsts, lasts = lexicon.folded_values(first), lexicon.folded_values(last)
    if not firsts or not lasts:
        return  # names not learned (too many): a bare name stays for the other rules
    for match in reading.finditer(_BARE_PERSON_RE):
        if match["first"].casefold() in firsts and match["last"].casefold() in lasts:
            reading.add(first, Op.IEQ, match["first"])
            reading.add(last, Op.IEQ, match["last"])
            reading.claim(*match.span())


def _named_people(reading: Reading) -> None:
    """ "the staged lead Wanda Zielinski": two capitalised words right after a person noun are
    the person's name, on the table's full-name column (or its first and last names)."""
    lexicon = reading.lexicon
    first, last, full = lexicon.first("given"), lexicon.first("family"), lexicon.first("person")
    if not reading.may_capitalise or (full is None and (first is None or last is None)):
        return
    if not reading.says(_PERSON_NOUNS):
        return  # no person noun, so no name right after one
    for match in reading.finditer(_BARE_PERSON_RE):
        if not _AFTER_PERSON_NOUN.search(reading.original[: match.start()]):
            continue
        if full is not None:
            reading.add(full, Op.IEQ, f"{match['first']} {match['last']}")
        else:
            reading.add(str(first), Op.IEQ, match["first"])
            reading.add(str(last), Op.IEQ, match["last"])
        reading.claim(*match.span())


def no_company_column(table: str) -> str:
    """Why a company named in a request on ``table`` was not applied (the pipeline may still
    read it through a related table: :mod:`rag_agent.pipeline.company_link`)."""
    return f"no column of {plural(table)} holds a company"


def _company(reading: Reading) -> bool:
    """Read the company; ``True`` when only weak evidence (a lone capitalised name) found one."""
    column = reading.lexicon.first("company")
    found = names.find_company(reading.text, reading.said)
    weak = False
    if found is None and not reading.conditions and not reading.ignored:
        words = reading.original.split()
        if len(words) <= _WEAK_MAX_WORDS:
            found, weak = names.find_lone_name(reading.text), True
    if found is None or _framing_phrase(reading, found.start, found.end, found.value):
        return False
    if column is None:
        reading.ignore(found.start, found.end, no_company_column(reading.table))
        return False
    reading.add(column, Op.ICONTAINS, found.value)
    reading.claim(found.start, found.end)
    return weak


def _framing_phrase(reading: Reading, start: int, end: int, value: str) -> bool:
    """A lower-case phrase after "the" ("for the board pack") is what the request is for, not a
    company's name (names are written capitalised, or bare: "leads at acme")."""
    said = reading.original[max(0, start - 4) : end].lower()
    return value.islower() and re.search(r"\bthe\s+" + re.escape(value), said) is not None


def understand(
    text: str,
    *,
    table: str | None = None,
    now: dt.datetime,
    vocabulary: SchemaVocabulary | None = None,
    synonyms: Mapping[str, Iterable[str]] | None = None,
) -> Understanding:
    """What ``text`` asks of ``table`` (or of the table it names), with dates against ``now``.

    ``table`` is the table the caller asked for, ``None`` when not given: the text may then name
    one ("campaigns of client 7"), and its words are read against ``leads`` when it names none
    (``Understanding.table`` stays ``None``). A table given by the caller wins over one the text
    names (the text's is then ignored, with the reason). ``now`` must be an aware datetime.
    ``vocabulary`` is the database's (columns, kinds, values, relations); without one, the
    bundled sample's, learned from its data the same way. ``synonyms`` extend the generic
    synonym layer (word → values it may mean).
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
    extra = {k: tuple(v) for k, v in synonyms.items()} if synonyms else None
    known = sample_vocabulary() if vocabulary is None else with_sample_fallback(vocabulary)
    reading = Reading(original, table or DEFAULT_TABLE, known, extra)
    count_only = False
    for match in reading.finditer(_COUNT_RE, words=_COUNT_WORDS):
        count_only = True
        reading.claim(*match.span())
    groupings = grouping.find_groupings(reading)
    emails = reading.finditer(EMAIL_RE, ("@",))
    for match in emails:
        reading.claim(*match.span())
        key = _EMAIL_KEY_RE.search(reading.text[: match.start()])
        if key is not None:  # "email=…", "e-mail is …": the key is no channel, no topic
            reading.claim(key.start(), match.start())
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
    reading.table_span = named[1] if named is not None else None
    group_by = grouping.apply_groupings(reading, groupings)

    for match in emails:
        email = match.group().lower()
        column, owner_words = _email_column(reading, match)
        if column is None:
            reading.ignore(*match.span(), f"{plural(reading.table)} have no email column")
            continue
        reading.add(column, Op.IEQ, email)
        reading.claim(*match.span())
        for start, end in owner_words:  # "whose owner is …", "… own?", "…'s leads"
            reading.claim(start, end)
            titles = [t for t in titles if not (start <= t[0] < end)]
    _apply_references(reading, references)
    for start, end, title in titles:
        # An acronym is the whole title or nothing: "CTO" as a substring is in "Director".
        op = Op.IEQ if _ACRONYM.fullmatch(title) else Op.ICONTAINS
        column = reading.lexicon.first("job") if reading.known else "title"
        if column is None:
            reading.ignore(start, end, f"{plural(reading.table)} have no title column")
        else:
            reading.add(column, op, title)
            reading.claim(start, end)
    # The rules in their order, called in turn (no tuple of closures made per request).
    _keyed_columns(reading)
    _dates(reading, now)
    fields.read_names(reading)
    fields.read_subjects(reading)
    read_columns(reading, reading.lexicon)
    fields.read_industry(reading)
    report_other_tables(reading, reading.lexicon)  # before places: "from leads in Italy"
    _vague(reading)
    _exclusions_places_people(reading)
    _known_people(reading)
    _named_people(reading)
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
        through=tuple(reading.through),
    )
