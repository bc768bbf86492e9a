"""SQL ``LIKE`` in Python, once: the escaper, the pattern matcher and the text predicates that
the memory backend filters with and the Supabase backend re-checks rows with."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from persistence import Filter, Op
from persistence.backends import memory
from persistence.values.like import compile_like, escape_like, fold_case, text_predicate


def _reference(pattern: str) -> re.Pattern[str]:
    """LIKE as one backtracking regex: right, but exponential on hostile patterns."""
    parts, chars = [], iter(pattern)
    for char in chars:
        if char == "\\":
            parts.append(re.escape(next(chars, "\\")))
        else:
            parts.append({"%": ".*", "_": "."}.get(char, re.escape(char)))
    return re.compile("".join(parts), re.DOTALL)


class TestLikeRegex:
    @given(
        pattern=st.text(alphabet="ab%_\\", max_size=8),
        text=st.text(alphabet="ab%_\\", max_size=10),
    )
    def test_agrees_with_the_backtracking_reference(self, pattern: str, text: str) -> None:
        """On small inputs the linear matcher answers what a backtracking regex answers."""
        want = _reference(pattern).fullmatch(text) is not None
        assert compile_like(pattern).matches(text) is want

    def test_a_hostile_pattern_is_answered_at_once(self) -> None:
        """'%a' thirteen times against 39 a's and a b (over 30 s as one regex) is answered
        without backtracking: the loop below would not finish otherwise."""
        pattern = compile_like("%a" * 13)
        assert not pattern.matches("a" * 39 + "b")
        assert pattern.matches("a" * 40)
        assert not compile_like("%a" * 2000 + "%b").matches("a" * 5000)

    @pytest.mark.parametrize(
        ("pattern", "text", "matches"),
        [
            ("a%c", "abbbc", True),
            ("a_c", "abc", True),
            ("a_c", "abbc", False),
            ("a\\%c", "a%c", True),
            ("a\\%c", "abc", False),
            ("a\\_c", "abc", False),
            ("100\\\\", "100\\", True),
            ("x*y", "x*y", True),
            ("x*y", "xzy", False),
            ("a\nb", "a\nb", True),
            ("%", "line\nbreak", True),
        ],
    )
    def test_like_semantics(self, pattern: str, text: str, matches: bool) -> None:
        """``%`` any run, ``_`` one character, ``\\`` escapes, ``*`` literal, newlines match."""
        assert compile_like(pattern).matches(text) is matches


class TestTextPredicate:
    @pytest.mark.parametrize(
        ("flt", "row", "matches"),
        [
            (Filter("name", Op.ICONTAINS, "A*B"), {"name": "xa*bx"}, True),
            (Filter("name", Op.ICONTAINS, "A*B"), {"name": "xaxbx"}, False),
            (Filter("name", Op.ICONTAINS, "a"), {"name": None}, False),
            (Filter("name", Op.ICONTAINS, "1"), {"name": 1}, False),
            (Filter("name", Op.ILIKE, "A*%"), {"name": "a*zz"}, True),
            (Filter("name", Op.ILIKE, "A*%"), {"name": "abzz"}, False),
            (Filter("name", Op.IEQ, "ANN"), {"name": "ann"}, True),
            (Filter("name", Op.IEQ, "ann"), {"name": "anne"}, False),
            (Filter("name", Op.IEQ, "a%"), {"name": "ab"}, False),
            (Filter("name", Op.IEQ, "a_"), {"name": "A_"}, True),
            (Filter("name", Op.IEQ, "1"), {"name": 1}, False),
            (Filter("name", Op.IEQ, ""), {"name": None}, False),
            (Filter("name", Op.IEQ, "ΟΔΟΣ"), {"name": "οδοσ"}, True),
            (Filter("name", Op.IEQ, "ΟΔΟΣ"), {"name": "οδος"}, False),
            (Filter("name", Op.IEQ, "strasse"), {"name": "STRAßE"}, False),
        ],
    )
    def test_text_predicate_and_memory_predicate_agree(
        self, flt: Filter, row: dict[str, Any], matches: bool
    ) -> None:
        """The shared predicate (the Supabase client-side check) and the memory one agree."""
        assert text_predicate(flt)(row) is matches
        assert memory._predicate(flt)(row) is matches


class TestFoldCase:
    """``fold_case`` is PostgreSQL's ``lower()`` (proved against the server in the property
    tests); these are the cases where Python's own methods differ."""

    @pytest.mark.parametrize(
        ("text", "folded"),
        [
            ("ACME Inc.", "acme inc."),
            ("İSTANBUL", "istanbul"),  # str.lower adds a combining dot after the i
            ("ΟΔΟΣ", "οδοσ"),  # str.lower writes a final sigma at the end of a word
            ("Σ", "σ"),
            ("STRAẞE", "straße"),  # str.casefold would write "strasse"
            ("ς", "ς"),
            ("", ""),
        ],
    )
    def test_examples(self, text: str, folded: str) -> None:
        """Each character is lowered on its own, to one character, never case-folded."""
        assert fold_case(text) == folded


class TestEscapeLike:
    @pytest.mark.parametrize("text", ["", "plain", "50%_off\\", "\\%", "a*b_c%d\\\\"])
    def test_escaped_literal_matches_only_itself(self, text: str) -> None:
        """escape_like output, read back as a LIKE pattern, matches exactly the literal."""
        assert compile_like(escape_like(text)).matches(text)
        assert not compile_like(escape_like(text)).matches(text + "x")
