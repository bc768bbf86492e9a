"""SQL ``LIKE`` in Python, once: the escaper, the pattern matcher and the text predicates that
the memory backend filters with and the Supabase backend re-checks rows with."""

from __future__ import annotations

from typing import Any

import pytest

from persistence import Filter, Op
from persistence.backends import memory
from persistence.backends._like import escape_like, fold_case, like_regex, text_predicate


class TestLikeRegex:
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
        assert (like_regex(pattern).fullmatch(text) is not None) is matches


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
        assert like_regex(escape_like(text)).fullmatch(text) is not None
        assert like_regex(escape_like(text)).fullmatch(text + "x") is None
