"""Rules for the columns beyond ids and companies: titles, scores, steps, statuses, channels,
directions, sources, missing values, industries, subjects and names.

Each ``read_*`` function reads a :class:`~rag_agent.understanding.rules.reading.Reading` in place: a
recognised phrase becomes a condition on the table being read when it has the column, and an
:class:`~rag_agent.specs.Ignored` entry with the reason when it has not.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from persistence import Op
from persistence.schema import TABLE_COLUMNS
from rag_agent.understanding.rules import names
from rag_agent.understanding.rules.reading import Reading, plural
from rag_agent.understanding.rules.vocabulary import (
    CHANNEL_COLUMNS,
    CHANNEL_WORDS,
    DIRECTION_WORDS,
    MISSING_WORDS,
    NAME_COLUMNS,
    SOURCE_WORDS,
    STATUS_WORDS,
    TABLE_WORDS,
    TEXT_COLUMNS,
)

__all__ = [
    "find_titles",
    "read_channels",
    "read_industry",
    "read_missing",
    "read_names",
    "read_scores",
    "read_statuses",
    "read_subjects",
]

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
_CMP = (
    r"(?P<cmp>>=|=>|<=|=<|!=|==|>|<|=|:|above|over|greater\s+than|more\s+than|higher\s+than|"
    r"at\s+least|no\s+less\s+than|min(?:imum)?(?:\s+of)?|below|under|less\s+than|fewer\s+than|"
    r"lower\s+than|at\s+most|no\s+more\s+than|max(?:imum)?(?:\s+of)?|of|exactly|equal\s+to|"
    r"equals|is)?"
)
_OPS = {
    ">": Op.GT, "above": Op.GT, "over": Op.GT, "greater than": Op.GT, "more than": Op.GT,
    "higher than": Op.GT, ">=": Op.GTE, "=>": Op.GTE, "at least": Op.GTE,
    "no less than": Op.GTE, "min": Op.GTE, "minimum": Op.GTE, "min of": Op.GTE,
    "minimum of": Op.GTE, "<": Op.LT, "below": Op.LT, "under": Op.LT, "less than": Op.LT,
    "fewer than": Op.LT, "lower than": Op.LT, "<=": Op.LTE, "=<": Op.LTE, "at most": Op.LTE,
    "no more than": Op.LTE, "max": Op.LTE, "maximum": Op.LTE, "max of": Op.LTE,
    "maximum of": Op.LTE, "!=": Op.NEQ,
}  # fmt: skip
_TAIL = r"(?:\s*(?P<tail>\+|or\s+(?:more|higher|above|better|over|less|lower|below|fewer|under)))?"
_SCORE_RE = re.compile(
    r"(?:\b(?P<pre>min(?:imum)?|max(?:imum)?)\s+)?"
    r"\b(?:lead\s+)?scor(?:e|ed|es|ing)\b(?:\s+(?:leads?|contacts?|prospects?))?"
    r"\s*(?:(?:is|was|of)\s+)?"
    rf"(?:between\s+(?P<lo>[0-9]{{1,6}})\s+(?:and|to|-)\s+(?P<hi>[0-9]{{1,6}})\b"
    rf"|{_CMP}\s*(?P<n>[0-9]{{1,6}})(?![\w.-]){_TAIL})",
    re.IGNORECASE,
)
_STEPS_RE = re.compile(
    rf"(?:\b{_CMP}\s*(?P<n>[0-9]{{1,4}})(?:\s+|-)steps?\b{_TAIL})"
    r"|\bsteps?\s*(?:count)?\s*(?P<cmp2>>=|<=|>|<|=|:)\s*(?P<n2>[0-9]{1,4})\b",
    re.IGNORECASE,
)
_AMBIGUOUS_STATUS = frozenset({"new", "open", "live", "active", "running", "ended", "pending"})
_NEGATION = r"(?P<neg>\bnot\s+|\bnon-?\s*|\bisn't\s+|\baren't\s+)?"
_STATUS_CUE = re.compile(
    r"(?:\bstatus\s*(?:is|:|=|of)?|\bis|\bare|\bwas|\bwere|\bstill|\bcurrently|\bas|\bthat|"
    r"\bwhich|\bwho)\s*$",
    re.I,
)
_CHANNEL = r"(?P<channel>e-?mail|linkedin|phone)"
_CHANNEL_RE = re.compile(
    rf"\b(?:via|over|by|on|through|using|from)\s+(?:the\s+)?{_CHANNEL}\b(?!\s*\x00)"
    rf"|\b{_CHANNEL.replace('channel>', 'channel2>')}(?=\s+(?:campaigns?|conversations?|threads?|"
    r"outreach)\b)|\bchannel\s*(?:is|:|=)?\s*(?P<channel3>e-?mail|linkedin|phone)\b",
    re.IGNORECASE,
)
_SOURCE = "|".join(sorted((re.escape(w) for w in SOURCE_WORDS), key=len, reverse=True))
_SOURCE_RE = re.compile(
    rf"\b(?:(?:from|via|through|by)\s+(?:an?\s+|the\s+)?|source\s*(?:is|:|=)?\s*)(?P<src>{_SOURCE})"
    rf"(?:\s+imports?)?\b|\b(?P<src2>{_SOURCE})(?=\s+(?:imports?|staging|imported)\b)",
    re.IGNORECASE,
)
_DIRECTION_RE = re.compile(r"\b(?P<dir>inbound|incoming|outbound|outgoing)\b", re.IGNORECASE)
# Who wrote a message, said in words: "messages from customers" (inbound), "messages we sent"
# (outbound). Read only on a table with a direction column.
_WRITER_RE = re.compile(
    r"\b(?:(?P<in>(?:sent\s+|written\s+|received\s+)?(?:by|from)\s+(?:the\s+|our\s+)?"
    r"(?:customers?|clients?|leads?|prospects?|contacts?|users?))"
    r"|(?P<out>(?:(?:that|which)\s+)?we\s+(?:sent|wrote|send)|(?:sent|written)\s+by\s+us"
    r"|from\s+us|our\s+(?:replies|messages|answers)))\b",
    re.IGNORECASE,
)
_MISSING = "|".join(sorted((re.escape(w) for w in MISSING_WORDS), key=len, reverse=True))
_MISSING_RE = re.compile(
    rf"\b(?P<how>without|with\s+no|no|missing|lacking|with|having)\s+(?:an?\s+|the\s+)?"
    rf"(?P<what>{_MISSING})\b(?=\s*(?:$|[,.;!?)]|(?:and|or|but|who|that|which|where|from|at|in|"
    r"on|for|since|before|after|created|sorted|please|yet|set|listed|on\s+file)\b))",
    re.IGNORECASE,
)
_DESCRIPTOR_RE = re.compile(
    r"(?:\b(?:the|a|an|any|our)\s+)?(?<![\w-])(?P<ind>[a-z][a-z&-]+(?:\s+[a-z][a-z&-]+)?)\s+"
    r"(?:company|companies|firm|firms|startup|startups|business|businesses|industry|sector)\b"
)
_INDUSTRIES = (
    r"(?:wholesale|software|real\s+estate|energy|healthcare|health\s+care|logistics|finance|"
    r"fintech|retail|food\s+&\s+beverage|security|manufacturing|insurance|banking|saas)"
)
# Lower case only: "Acme Logistics LLC" names a company, not an industry.
_INDUSTRY_RE = re.compile(
    rf"\b(?:in\s+(?:the\s+)?)?(?P<ind>{_INDUSTRIES})(?:\s+(?:industry|sector|space))?\b"
)
_SUBJECT_RE = re.compile(
    r"\b(?:about|regarding|re:|concerning|mentioning|that\s+mentions?|containing|saying|"
    r"with\s+(?:the\s+)?subject(?:\s+line)?\s*(?::|is)?|with\s+the\s+words?)\s+",
    re.IGNORECASE,
)
_NAMED_RE = re.compile(
    r"\b(?P<kind>campaign|sequence|cadence|client|account)s?\s+(?:named|called|titled)\s+"
    r"""(?:"(?P<dq>[^"\n\x00]{1,120})"|'(?P<sq>[^'\n\x00]{1,120})'|(?P<bare>(?=\S)))""",
    re.IGNORECASE,
)
_NAME_BEFORE_RE = re.compile(
    r"""(?:"(?P<dq>[^"\n\x00]{1,120})"|\bthe\s+(?P<bare>[A-Z][\w&'-]*(?:\s+[\w&'-]+){0,3}?))"""
    r"\s+(?P<kind>campaign|sequence|cadence)\b"
)

# Pre-checks (``Reading.finditer``'s ``needs``): every match of the rule holds one of these.
_TITLE_WORDS = (*_ACRONYMS.split(), "vp", "vice", "head", "director", "manager", "executive",
                "founder", "owner", "engineer")  # fmt: skip
_MISSING_NEEDS = ("phone", "title", "score", "email", "company", "industry")
_DESCRIPTOR_NEEDS = ("compan", "firm", "startup", "business", "industry", "sector")
_INDUSTRY_NEEDS = (
    "wholesale",
    "software",
    "real",
    "energy",
    "health",
    "logistics",
    "financ",
    "fintech",
    "retail",
    "food",
    "security",
    "manufacturing",
    "insurance",
    "banking",
    "saas",
)
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
    for match in reading.finditer(_TITLE_RE, _TITLE_WORDS):
        found.append((match.start(), match.end(), _title_value(match)))
        reading.claim(*match.span())
    return found


def _compare(match: re.Match[str], cmp: str | None) -> Op:
    word = " ".join((cmp or "").lower().split())
    tail = (match["tail"] or "").lower()
    if tail:
        return (
            Op.LTE if tail.split()[-1] in ("less", "lower", "below", "fewer", "under") else Op.GTE
        )
    return _OPS.get(word, Op.EQ)


def read_scores(reading: Reading) -> None:
    """``score above 80``, ``at least 70``, ``between 50 and 80`` (inclusive), ``3+ steps``."""
    for match in reading.finditer(_SCORE_RE, ("scor",)):
        if match["lo"] is not None:
            low, high = sorted((int(match["lo"]), int(match["hi"])))
            if reading.has("score"):
                reading.add("score", Op.GTE, low)
            reading.apply(*match.span(), "score", Op.LTE, high, "score column")
        else:
            op = _compare(match, match["cmp"] or match["pre"])
            reading.apply(*match.span(), "score", op, int(match["n"]), "score column")
    for match in reading.finditer(_STEPS_RE, ("step",)):
        if match["n2"] is not None:
            op, value = _OPS.get(match["cmp2"], Op.EQ), int(match["n2"])
        else:
            op, value = _compare(match, match["cmp"]), int(match["n"])
        reading.apply(*match.span(), "step_count", op, value, "step count")


def _status_re(words: Iterable[str]) -> re.Pattern[str]:
    alternatives = "|".join(sorted((re.escape(w) for w in words), key=len, reverse=True))
    return re.compile(rf"{_NEGATION}\b(?P<word>{alternatives})\b", re.IGNORECASE)


_STATUS_RES = {table: _status_re(words) for table, words in STATUS_WORDS.items()}
_STATUS_NEEDS = {table: tuple(words) for table, words in STATUS_WORDS.items()}
# The nouns a cue-needing status word ("new", "open") must stand before.
_NOUNS = {
    table: {word for word, named in TABLE_WORDS.items() if named == table} | {"ones"}
    for table in STATUS_WORDS
}


def _noun_follows(rest: str, nouns: set[str]) -> bool:
    """Whether a table noun follows, past channel and other status words ("open linkedin
    threads", "new or contacted leads")."""
    for word in rest.lower().split()[:4]:
        word = word.strip(",.?!")
        if word in nouns:
            return True
        if (
            word not in CHANNEL_WORDS
            and word not in ("or", "and", "/")
            and not any(word in words for words in STATUS_WORDS.values())
        ):
            return False
    return False


def read_statuses(reading: Reading) -> None:
    """Status words of the table being read; ``not X`` → ``neq``; several → ``in``."""
    words = STATUS_WORDS.get(reading.table)
    if not words:
        return
    regex, nouns = _STATUS_RES[reading.table], _NOUNS[reading.table]
    positive: list[str] = []
    for match in reading.finditer(regex, _STATUS_NEEDS[reading.table]):
        word = " ".join(match["word"].lower().split())
        if word in _AMBIGUOUS_STATUS and not (
            _noun_follows(reading.text[match.end() :], nouns)
            or _STATUS_CUE.search(reading.text[: match.start()])
        ):
            continue  # "new"/"open" are statuses only next to a cue
        if match["neg"]:
            reading.add("status", Op.NEQ, words[word])
        elif words[word] not in positive:
            positive.append(words[word])
        reading.claim(*match.span())
    if len(positive) == 1:
        reading.add("status", Op.EQ, positive[0])
    elif positive:
        reading.add("status", Op.IN, tuple(positive))


def read_channels(reading: Reading) -> None:
    """Channels (``via linkedin``, ``email campaigns``), message directions, import sources."""
    if reading.table == "staging_leads":
        for match in reading.finditer(_SOURCE_RE):
            word = " ".join((match["src"] or match["src2"]).lower().split())
            reading.apply(*match.span(), "source", Op.EQ, SOURCE_WORDS[word], "source column")
    for match in reading.finditer(_CHANNEL_RE, ("mail", "linkedin", "phone")):
        word = (match["channel"] or match["channel2"] or match["channel3"]).lower()
        column = CHANNEL_COLUMNS.get(reading.table, "channel")
        reading.apply(*match.span(), column, Op.EQ, CHANNEL_WORDS[word], "channel column")
    for match in reading.finditer(_DIRECTION_RE, tuple(DIRECTION_WORDS)):
        value = DIRECTION_WORDS[match["dir"].lower()]
        reading.apply(*match.span(), "direction", Op.EQ, value, "direction column")
    if "direction" in TABLE_COLUMNS.get(reading.table, ()):
        for match in reading.finditer(_WRITER_RE):
            value = "inbound" if match["in"] else "outbound"
            reading.apply(*match.span(), "direction", Op.EQ, value, "direction column")


def read_missing(reading: Reading) -> None:
    """``without a phone`` → ``phone is_null True``; ``with a title`` → ``is_null False``."""
    for match in reading.finditer(_MISSING_RE, _MISSING_NEEDS):
        what = " ".join(match["what"].lower().split())
        columns = dict(MISSING_WORDS[what])
        column = columns.get(reading.table)
        missing = match["how"].lower() not in ("with", "having")
        if column is None:
            reading.ignore(*match.span(), f"{plural(reading.table)} have no {what} column")
        else:
            reading.apply(*match.span(), column, Op.IS_NULL, missing, f"{what} column")


def read_industry(reading: Reading) -> None:
    """``the logistics company`` / ``in fintech``: ``industry`` on clients, ignored elsewhere."""
    found: list[tuple[int, int, str]] = []
    for match in reading.finditer(_DESCRIPTOR_RE, _DESCRIPTOR_NEEDS):
        words, start = match["ind"].split(), match.start()
        if len(words) == 2 and names.is_stop_word(words[0]):  # "from big companies"
            words, start = words[1:], match.start("ind") + match["ind"].index(words[1], 1)
        if not any(names.is_stop_word(word) for word in words):
            found.append((start, match.end(), " ".join(words)))
    found += [
        (m.start(), m.end(), m["ind"]) for m in reading.finditer(_INDUSTRY_RE, _INDUSTRY_NEEDS)
    ]
    for start, end, described in found:
        if reading.text[start:end] != reading.original[start:end]:
            continue  # partly claimed by an earlier match
        if reading.table == "clients":
            reading.add("industry", Op.ICONTAINS, " ".join(described.split()))
            reading.claim(start, end)
        else:
            reason = f"no column of {plural(reading.table)} describes a company (industry, size)"
            reading.ignore(start, end, reason)


def read_subjects(reading: Reading) -> None:
    """``inquiries about pricing`` → ``subject icontains``; messages mentioning X → ``body``."""
    column = TEXT_COLUMNS.get(reading.table)
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
    """``the campaign called Spring outreach``, ``client named Helios Solar`` → ``name``."""
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
            if table != reading.table:
                reading.ignore(match.start(), end, f"the request is for {plural(reading.table)}")
            else:
                reading.apply(match.start(), end, NAME_COLUMNS[table], Op.ICONTAINS, value, "name")
