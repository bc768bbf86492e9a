"""The rule parser's gates never skip a regular expression that would match: for each rule, on
generated text that mixes the gates' own words, the labelled queries' words, digits, dates,
punctuation, glued words and non-ASCII letters, a gate that says no means the regex finds
nothing, and text generated to hold a match of the regex opens its gate
(:mod:`rag_agent.understanding.rules.gates`). The words a reading keeps for its gates
hold every word of its text as claims mask it, and the people-noun scan that starts late finds
exactly what the regex finds from the start."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_agent.understanding.rules import columns, dates, fields, grouping, names, parser, related
from rag_agent.understanding.rules.gates import Said, said
from rag_agent.understanding.rules.reading import Reading
from rag_agent.understanding.rules.sample_vocabulary import sample_vocabulary
from rag_agent.understanding.rules.tokens import WORD_RE, phrase_at
from rag_agent.understanding.rules.vocabulary import REFERENCE_WORDS, TABLE_WORDS

_LABELLED = Path(__file__).resolve().parents[1] / "data" / "labelled_queries.jsonl"
_QUERY_WORDS = sorted(
    {
        word
        for line in _LABELLED.read_text(encoding="utf-8").splitlines()
        if line.strip()
        for word in json.loads(line)["text"].split()
    }
)

Gate = Callable[[Said], bool]


def _words(found: frozenset[str]) -> Gate:
    return lambda words: words.any_of(found)


def _own_id_gate(found: frozenset[str]) -> Gate:
    return lambda words: not found or words.any_of(found)


# The case-insensitive ``\b(?:…)`` patterns that ``patterns.word_start`` rewrote: a text holding
# a match of the rewritten regex is drawn from the pattern it replaced (the strategy cannot
# draw the look-behinds that pick the letter's words: it would discard nearly every text), and
# each rewritten regex must find what its pattern finds (see ``_REWRITTEN`` below).
_TABLE_ALTERNATION = "|".join(sorted(TABLE_WORDS, key=len, reverse=True)).replace(" ", r"\s+")
_TABLE_BEFORE = (
    r"(?i)\b(?:" + _TABLE_ALTERNATION + r")\b"
    r"(?!\s+(?:time|times|singer|generation|gen|magnet|of\s+events?|of\s+steps)\b)"
)
_REFERENCE_BEFORE = (
    r"(?i)\b(?P<entity>" + "|".join(sorted(REFERENCE_WORDS, key=len, reverse=True)) + ")"
    r"(?:[\s_-]*(?P<key>id|uuid|number|num|no|nr)\b\.?)?" + parser._SEP + parser._VALUE
)
# The people-noun scan before its words were tried at their first letter only.
_BEFORE_NOUN_BEFORE = (
    r"(?i)(?P<name>(?:[^\W_][\w&.'\u2019%+-]*,?\s+){1,4}?)(?:leads?|contacts?|prospects?|people)\b"
)
_DRAWN_FROM = {"table": re.compile(_TABLE_BEFORE), "reference": re.compile(_REFERENCE_BEFORE)}
# Patterns that ``patterns.first_letter`` put behind a look-ahead (which the strategy cannot
# draw): text is drawn from the pattern wrapped, which finds the same matches
# (``test_rule_first_letters``).
_DRAWN_FROM.update(
    {
        name: re.compile(pattern, regex.flags)
        for name, regex, pattern in (
            ("count", parser._COUNT_RE, parser._COUNT),
            ("vague", parser._VAGUE_RE, parser._VAGUE),
            ("exclude", parser._EXCLUDE_RE, parser._EXCLUDE),
            ("writer", columns._WRITER_RE, columns._WRITER),
            ("group", grouping._GROUP_RE, grouping._GROUP),
            ("company after", names._PREP_RE, names._PREP),
            ("date related", dates._RELATED_RE, dates._RELATED),
            ("date range", dates._RANGE_RE, dates._RANGE),
            ("date older", dates._OLDER_RE, dates._OLDER),
            ("date free", dates._FREE_RE, dates._FREE_MATCH),
            ("company before", names._BEFORE_NOUN_RE, _BEFORE_NOUN_BEFORE),
            (f"own id {parser._ID_KEY_RE.pattern[:12]}", parser._ID_KEY_RE, parser._ID_KEY),
            (
                f"own id {parser._HASH_ID_RE.pattern[:12]}",
                parser._HASH_ID_RE,
                r"(?<![\w&#])#\s?(?P<value>[0-9]{1,19})(?![\w-])",
            ),
        )
    }
)

# Every gate, with the regex it stands for and how that regex is run.
_GATES: dict[str, tuple[re.Pattern[str], Gate]] = {
    "count": (parser._COUNT_RE, _words(parser._COUNT_WORDS)),
    "vague": (parser._VAGUE_RE, _words(parser._VAGUE_WORDS)),
    "exclude": (parser._EXCLUDE_RE, _words(parser._EXCLUDE_WORDS)),
    "place": (parser._PLACE_RE, _words(parser._PLACE_WORDS)),
    "person": (parser._PERSON_RE, _words(parser._PERSON_WORDS)),
    "table": (parser._TABLE_RE, _words(parser._TABLE_GATE)),
    "person noun": (parser._AFTER_PERSON_NOUN, _words(parser._PERSON_NOUNS)),
    "reference": (parser._REFERENCE_RE, lambda w: w.starts_any(parser._ENTITY_STARTS)),
    **{
        f"own id {regex.pattern[:12]}": (regex, _own_id_gate(words))
        for regex, _, words in parser._OWN_IDS
    },
    "writer": (columns._WRITER_RE, _words(columns._WRITER_WORDS)),
    "number after": (columns._AFTER_RE, lambda w: w.digits),
    "number before": (columns._BEFORE_RE, lambda w: w.digits),
    "group": (grouping._GROUP_RE, _words(grouping._GROUP_WORDS)),
    "title": (fields._TITLE_RE, _words(fields._TITLE_WORDS)),
    "company after": (names._PREP_RE, _words(names._PREP_WORDS)),  # or "@": see below
    "company before": (names._BEFORE_NOUN_RE, _words(names._NOUN_WORDS)),
    "date range": (
        dates._RANGE_RE,
        lambda w: dates._may_hold_period(w) and w.any_of(dates._RANGE_WORDS),
    ),
    "date older": (dates._OLDER_RE, _words(dates._OLDER_WORDS)),
    "date related": (
        dates._RELATED_RE,
        lambda w: dates._may_hold_period(w) and w.any_of(dates._RELATION_WORDS),
    ),
    "date free": (dates._FREE_RE, dates._may_hold_free),
    "date event": (dates._EVENT_RE, _words(dates._EVENT_WORDS)),
    "date to-do": (dates._TODO_RE, _words(dates._TODO_WORDS)),
}

# Words of every gate and of the phrases they stand for, glued or not ("withleads", "client7").
_GATE_WORDS = sorted(
    set(parser._TABLE_GATE | parser._PERSON_NOUNS | fields._TITLE_WORDS | dates._PERIOD_WORDS)
    | dates._RELATION_WORDS
    | dates._RANGE_WORDS
    | dates._OLDER_WORDS
    | columns._WRITER_WORDS
    | columns._MISSING_WORDS
    | names._PREP_WORDS
    | set(REFERENCE_WORDS)
    | set(TABLE_WORDS)
    | {"how many", "number of", "count", "hot", "named", "called", "not at", "other than"}
    | {"id", "uuid", "today", "todays", "yesterday's", "tomorrow", "ago", "sent by", "we sent"}
    | {"vice president", "head of", "co-founder", "q3", "above", "between", "older than"}
    | {"two weeks ago", "3 days ago", "a month ago", "last 7 days", "the past week"}
)
_OTHER = st.one_of(
    st.sampled_from(_QUERY_WORDS),
    st.from_regex(r"[0-9]{1,5}", fullmatch=True),
    st.sampled_from(["2024", "1999", "2024-03-05", "2025-6", "Q3 2024", "3rd", "$5k", "#42"]),
    st.sampled_from(["550e8400-e29b-41d4-a716-446655440000", "a@b.io", "x_y", "k=v", "id:7"]),
    st.sampled_from([",", ".", ":", "=", "!=", "#", "@", "'", "\u2019", "-", "(", '"', "\x00"]),
    st.sampled_from(["\u00e9t\u00e9", "\u212a", "\u0130", "stra\u00dfe", "\u00a0", "\u2003"]),
    st.text(max_size=4),
)
_GLUE = st.sampled_from(["", " ", " ", " ", " ", "  ", "\t", "\n", "-", "_", "'", ",", ", ", "."])
_CASES: st.SearchStrategy[Callable[[str], str]] = st.sampled_from(
    [str.strip, str.lower, str.upper, str.title, str.capitalize]
)


def _vocabulary(regex: re.Pattern[str]) -> list[str]:
    """The words written in ``regex`` itself (its alternatives), with a few other gates' words:
    few words, so that a text often holds one of them and nothing else the gate knows."""
    return sorted({*re.findall(r"[A-Za-z]{2,}", regex.pattern), *_GATE_WORDS[::10]})


@st.composite
def _texts(draw: st.DrawFn, words: list[str] = _GATE_WORDS) -> str:
    """Text of ``words`` (mostly) and of anything else, glued in any case."""
    own = st.sampled_from(words)
    pieces = draw(st.lists(st.one_of(own, own, own, _OTHER), max_size=12))
    return draw(_CASES)("".join(draw(_GLUE) + piece for piece in pieces))


def _finds(regex: re.Pattern[str], text: str) -> bool:
    return regex.search(text) is not None


@pytest.mark.parametrize("name", sorted(_GATES))
@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_a_closed_gate_means_no_match(name: str, data: st.DataObject) -> None:
    regex, gate = _GATES[name]
    text = data.draw(_texts(_vocabulary(regex)))
    words = said(text)
    if words is not None and not gate(words):
        if name == "company after" and "@" in text:
            return  # the gate lets "@" through on its own
        assert not _finds(regex, text), (name, text)


_ASCII = st.characters(codec="ascii")
# Built once: a strategy for a regex this large takes long to build.
_MATCHING = {
    name: st.from_regex(_DRAWN_FROM.get(name, regex), alphabet=_ASCII)
    for name, (regex, _) in _GATES.items()
}


@pytest.mark.parametrize("name", sorted(_GATES))
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_a_text_the_regex_matches_opens_its_gate(name: str, data: st.DataObject) -> None:
    """The same from the other side: ASCII text built to hold a match of the regex, with any
    text around it (every alternative of the regex, in any case)."""
    regex, gate = _GATES[name]
    text = data.draw(_MATCHING[name])
    words = said(text)
    assert words is not None
    if name == "company after" and "@" in text:
        return  # the gate lets "@" through on its own
    if _finds(regex, text):  # the text around the match may hide it ("xat Acme")
        assert gate(words), (name, text)


@settings(max_examples=400, deadline=None)
@given(text=_texts())
def test_no_missing_word_means_no_missing_rule(text: str) -> None:
    words = said(text)
    if words is not None and not words.any_of(columns._MISSING_WORDS):
        spoken = {m.group().lower() for m in WORD_RE.finditer(text)}
        assert spoken.isdisjoint(columns._MISSING_WORDS)


@settings(max_examples=600, deadline=None)
@given(text=_texts())
def test_non_ascii_text_is_never_gated(text: str) -> None:
    assert (said(text) is None) == (not text.isascii())


@settings(max_examples=500, deadline=None)
@given(
    text=_texts(),
    spans=st.lists(st.tuples(st.integers(-2, 60), st.integers(0, 20)), max_size=5),
)
def test_the_words_kept_hold_every_word_of_the_claimed_text(
    text: str, spans: list[tuple[int, int]]
) -> None:
    """A claim masks characters; while a reading keeps its words for the gates, each word of
    what is left of its text is one of them (else a gate could skip a rule that would match)."""
    reading = Reading(text, "leads", sample_vocabulary())
    for start, length in spans:
        reading.claim(start, min(start + length, len(text)) if start >= 0 else start + length)
        kept = reading.said
        if kept is not None:
            assert said(reading.text.replace("\x00", " ")) is not None
            now = set(re.findall(r"[a-z0-9]+", reading.text.lower()))
            assert now <= kept.words, (reading.text, now - kept.words)


# Short names and people nouns, mostly between spaces: names of one to four words and more.
_NAMES = ["a", "Acme", "x.y", "b,", "&", "O'Neil", "lead", "leads", "people", "Contacts",
          "prospectus", "contacted", "Leadership"]  # fmt: skip


@settings(max_examples=1500, deadline=None)
@given(text=st.one_of(_texts(), _texts(_NAMES)))
def test_the_people_noun_scan_finds_what_the_regex_finds(text: str) -> None:
    def spans(matches: object) -> list[tuple[tuple[int, int], dict[str, str | None]]]:
        return [(m.span(), m.groupdict()) for m in matches]  # type: ignore[attr-defined]

    assert spans(names._before_noun(text)) == spans(names._BEFORE_NOUN_RE.finditer(text))


# Events and to-dos before a date, cut anywhere: "we met", "should I call", "xmet".
_BEFORE_DATES = ["we", "I", "met", "have", "called", "reached out", "should", "to", "call", "x"]


@settings(max_examples=800, deadline=None)
@given(prefix=st.one_of(_texts(), _texts(_BEFORE_DATES)), date=st.sampled_from([" today", ""]))
def test_an_event_before_a_date_is_read_the_same_with_the_gates(prefix: str, date: str) -> None:
    """The words of the whole text gate the event read in the 40 characters before a date,
    even when those 40 start inside a word."""
    assert dates._event(prefix, said(prefix + date)) == dates._event(prefix)


@settings(max_examples=300, deadline=None)
@given(text=_texts(), table=st.sampled_from(sorted(sample_vocabulary().tables)))
def test_the_columns_named_from_a_word_are_every_column_named_there(text: str, table: str) -> None:
    """Looking a column's name up by the stem it starts with meets the columns, in order, that
    a walk over every column meets at each word."""
    reading = Reading(text, table, sample_vocabulary())
    lexicon, tokens = reading.lexicon, reading.words.tokens
    for j, token in enumerate(tokens):
        every = [
            c
            for c in lexicon.columns.values()
            if phrase_at(tokens, j, lexicon.phrase_index(c.name))
        ]
        named = [
            c
            for c in lexicon.named_from(token.stem)
            if phrase_at(tokens, j, lexicon.phrase_index(c.name))
        ]
        assert named == every


_PREFIXES = st.lists(
    st.one_of(
        st.sampled_from([*parser._ENTITY_STARTS, *dates._DAY_WORDS]),
        st.from_regex(r"[a-z0-9]{1,4}", fullmatch=True),
        st.sampled_from(["", "-", "e-", "x y", "A"]),
    ),
    max_size=4,
).map(tuple)


@settings(max_examples=1000, deadline=None)
@given(text=_texts(), prefixes=_PREFIXES)
def test_a_word_starting_with_a_prefix_is_found_as_walking_the_words_finds_it(
    text: str, prefixes: tuple[str, ...]
) -> None:
    """:meth:`Said.starts_any` searches the text for a prefix where a word starts; walking the
    words finds the same."""
    words = said(text)
    if words is not None:
        walked = any(word.startswith(prefixes) for word in words.words)
        assert words.starts_any(prefixes) == walked, (text, prefixes)


# Regexes rewritten so that the search skips ahead to the character every match starts with:
# each with the pattern it replaced, which must find the same matches.
_REWRITTEN = {
    "bare person": (
        parser._BARE_PERSON_RE,
        r"\b(?P<first>[A-Z][a-z-]+)\s+(?P<last>[A-Z][a-z-]+)(?:['\u2019]s)?\b",
    ),
    "name before": (
        fields._NAME_BEFORE_RE,
        r"""(?:"(?P<dq>[^"\n\x00]{1,120})"|\bthe\s+(?P<bare>[A-Z][\w&'-]*(?:\s+[\w&'-]+){0,3}?))"""
        r"\s+(?P<kind>campaign|sequence|cadence)\b",
    ),
}
# Word alternations written by ``patterns.word_start`` (one test of the first letters at each
# position), each with the case-insensitive ``\b(?:…)`` pattern it replaced.
_REWRITTEN["table words"] = (parser._TABLE_RE, _TABLE_BEFORE)
_REWRITTEN["reference"] = (parser._REFERENCE_RE, _REFERENCE_BEFORE)
_REWRITTEN["related"] = (
    related._RELATED_RE,
    r"(?i)\b(?:with|including|plus|along\s+with|together\s+with|and\s+(?=(?:its|their|his|her)\s))"
    rf"\s*{related._OWNER}(?P<first>{related._WORD})"
    rf"(?:\s*(?:,|and|&|plus|with)\s+{related._OWNER}(?P<second>{related._WORD}))?\b",
)
_REWRITTEN["lone name"] = (
    names._LONE_RE,
    r"(?<![\w'\u2019&.-])(?P<name>[A-Z][\w&'\u2019.-]*(?:\s+[A-Z][\w&'.-]*){0,3})",
)
_REWRITTEN["name before a people noun"] = (names._BEFORE_NOUN_RE, _BEFORE_NOUN_BEFORE)
_REWRITTEN_WORDS = ["the", "The", "a", "Ana", "Hugo Costa", "Spring push", '"x"', "campaign",
                    "sequence", "cadence", "é", "Éva", "x_y", "-", "'s",
                    *TABLE_WORDS, *REFERENCE_WORDS, "with", "including", "plus", "along with",
                    "and its", "and", "their", "id", "no.", "number", " 7", "=12", "#3", "time",
                    "of events", "\u212a", "\u017f", "\u0130", "\u0131", "7",
                    "client_id", "Acme", "O'Brien", "&Co", ".Net", "Initech?", "leads",
                    "people", "Acme,", "a-b", "x_y", "100%", "a.b"]  # fmt: skip
_REWRITTEN_TEXT = {
    name: st.one_of(
        st.from_regex(re.compile(before), alphabet=st.characters(codec="utf-8")),
        _texts(_REWRITTEN_WORDS),
    )
    for name, (_, before) in _REWRITTEN.items()
}


@pytest.mark.parametrize("name", sorted(_REWRITTEN))
@settings(max_examples=600, deadline=None)
@given(data=st.data())
def test_a_rewritten_regex_finds_what_it_replaced(name: str, data: st.DataObject) -> None:
    regex, before = _REWRITTEN[name]
    text = data.draw(_REWRITTEN_TEXT[name])
    for prefix in ("", "x", "é", " ", "_"):  # a word, a letter or nothing right before
        found = [(m.span(), m.groupdict()) for m in regex.finditer(prefix + text)]
        assert found == [(m.span(), m.groupdict()) for m in re.finditer(before, prefix + text)]


@settings(max_examples=1000, deadline=None)
@given(text=_texts())
def test_dates_found_with_the_words_known_are_those_found_without(text: str) -> None:
    """``find_dates`` given the text's words (its gates, and its early return when every gate
    is closed) finds what it finds when it must look for every kind of date phrase."""
    now = dt.datetime(2025, 6, 18, 12, tzinfo=dt.UTC)
    assert dates.find_dates(text, now, said(text)) == dates.find_dates(text, now), text
