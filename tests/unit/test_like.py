"""SQL ``LIKE`` in Python, once: the escaper, the pattern matcher and the text predicates that
the memory backend filters with and the Supabase backend re-checks rows with."""

from __future__ import annotations

from typing import Any

import pytest

from persistence import Filter, Op
from persistence.backends import memory
from persistence.backends._like import escape_like, like_regex, text_predicate


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
        ],
    )
    def test_text_predicate_and_memory_predicate_agree(
        self, flt: Filter, row: dict[str, Any], matches: bool
    ) -> None:
        """The shared predicate (the Supabase client-side check) and the memory one agree."""
        assert text_predicate(flt)(row) is matches
        assert memory._predicate(flt)(row) is matches


class TestEscapeLike:
    @pytest.mark.parametrize("text", ["", "plain", "50%_off\\", "\\%", "a*b_c%d\\\\"])
    def test_escaped_literal_matches_only_itself(self, text: str) -> None:
        """escape_like output, read back as a LIKE pattern, matches exactly the literal."""
        assert like_regex(escape_like(text)).fullmatch(text) is not None
        assert like_regex(escape_like(text)).fullmatch(text + "x") is None
