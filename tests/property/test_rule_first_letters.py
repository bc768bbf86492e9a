"""The rule parser's patterns written by ``patterns.first_letter`` (a look-ahead on the letters a
match may start with, so that the search rejects most positions with one test) find exactly what
the pattern they wrap finds: the same spans and the same groups, on text drawn from the pattern
itself and on text glued from its own words, in any case, with the characters that case-folding
matches to ASCII letters (the Kelvin sign, the long s, the dotted and dotless i)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_agent.understanding.rules import columns, dates, fields, grouping, names, parser

# Each rewritten regex with the pattern it wraps, compiled with the same flags.
_WRAPPED: dict[str, tuple[re.Pattern[str], re.Pattern[str]]] = {
    name: (regex, re.compile(pattern, regex.flags))
    for name, regex, pattern in (
        ("writer", columns._WRITER_RE, columns._WRITER),
        ("count", parser._COUNT_RE, parser._COUNT),
        ("vague", parser._VAGUE_RE, parser._VAGUE),
        ("exclude", parser._EXCLUDE_RE, parser._EXCLUDE),
        ("subject", fields._SUBJECT_RE, fields._SUBJECT),
        ("named", fields._NAMED_RE, fields._NAMED),
        ("group", grouping._GROUP_RE, grouping._GROUP),
        ("company keyed", names._KEYED_RE, names._KEYED),
        ("company after", names._PREP_RE, names._PREP),
        ("own id", parser._ID_KEY_RE, parser._ID_KEY),
        ("date related", dates._RELATED_RE, dates._RELATED),
        ("date range", dates._RANGE_RE, dates._RANGE),
        ("date older", dates._OLDER_RE, dates._OLDER),
        ("date free", dates._FREE_RE, dates._FREE_MATCH),
        ("hash id", parser._HASH_ID_RE, r"(?<![\w&#])#\s?(?P<value>[0-9]{1,19})(?![\w-])"),
    )
}

_ODD = ["\u212a", "\u017f", "\u0130", "\u0131", "\x00", "@", " ", "\t", "\u00a0", "\u2003", '"',
        "'", "\u201c", ":", "=", "#", "-", "_", "7", "\u00e9", "x", "Acme", "&", "&#7", "#7",
        "a#7"]  # fmt: skip
_GLUE = st.sampled_from(["", " ", " ", " ", "  ", "\t", "\n", "\x00", "\x00 ", "-", ",", "'"])
_CASES = st.sampled_from([str.strip, str.lower, str.upper, str.title, str.swapcase])


def _words(pattern: re.Pattern[str]) -> st.SearchStrategy[str]:
    """Text glued from the words written in ``pattern`` (its alternatives) and odd characters."""
    own = st.sampled_from(sorted(set(re.findall(r"[A-Za-z]{2,}", pattern.pattern))))
    pieces = st.lists(st.one_of(own, own, own, st.sampled_from(_ODD)), max_size=10)
    return st.builds(
        lambda case, glued: case("".join(glued)),
        _CASES,
        pieces.flatmap(lambda found: st.tuples(*(_GLUE.map(g.__add__) for g in found))),
    )


_TEXT = {
    name: st.one_of(
        st.from_regex(pattern, alphabet=st.characters(codec="utf-8")),
        _words(pattern),
    )
    for name, (_, pattern) in _WRAPPED.items()
}


@pytest.mark.parametrize("name", sorted(_WRAPPED))
@settings(max_examples=500, deadline=None)
@given(data=st.data())
def test_a_pattern_behind_its_first_letters_finds_what_it_wraps(
    name: str, data: st.DataObject
) -> None:
    regex, pattern = _WRAPPED[name]
    text = data.draw(_TEXT[name])
    for prefix in ("", "x", "\u00e9", " ", "_", "\x00"):  # a word, a letter or nothing before
        found = [(m.span(), m.groupdict()) for m in regex.finditer(prefix + text)]
        assert found == [(m.span(), m.groupdict()) for m in pattern.finditer(prefix + text)]
