"""Findings of the persistence review: typed errors at the facade, one LIKE matcher."""

from __future__ import annotations

import decimal
from typing import Any

import pytest

from persistence import (
    Filter,
    InvalidQueryError,
    MemoryStore,
    Op,
    create_persistence_agent,
    create_read_only_facade,
)
from persistence.backends import _postgrest_encoding, memory
from persistence.backends._like import escape_like, like_regex, text_predicate


@pytest.fixture
def facade() -> Any:
    return create_read_only_facade(kind="memory", store=MemoryStore())


class TestFacadeArgumentErrors:
    @pytest.mark.parametrize(
        "kwargs",
        [
            {"filters": None},
            {"filters": 5},
            {"order": 5},
            {"order": None},
            {"columns": 5},
        ],
    )
    def test_read_with_non_iterable_arguments_raises_a_typed_error(
        self, facade: Any, kwargs: dict[str, Any]
    ) -> None:
        """A non-iterable filters/order/columns is an InvalidQueryError, never a bare TypeError."""
        with pytest.raises(InvalidQueryError):
            facade.read("leads", **kwargs)

    @pytest.mark.parametrize("filters", [None, 5, object()])
    def test_count_with_non_iterable_filters_raises_a_typed_error(
        self, facade: Any, filters: object
    ) -> None:
        """count() refuses non-iterable filters with an InvalidQueryError too."""
        with pytest.raises(InvalidQueryError):
            facade.count("leads", filters)


class TestOneLikeMatcher:
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


class TestFacadeNameArguments:
    @pytest.mark.parametrize("kwargs", [{"columns": "email"}, {"order": "email"}])
    def test_a_bare_string_is_refused_not_split_into_letters(
        self, facade: Any, kwargs: dict[str, Any]
    ) -> None:
        """columns="email" is refused with a hint, rather than read as the columns e, m, a..."""
        with pytest.raises(InvalidQueryError, match=r"\['email'\]"):
            facade.read("leads", **kwargs)


class TestMemoryBoolIsNotANumber:
    @pytest.fixture
    def seeded(self) -> Any:
        store = MemoryStore()
        writer = create_persistence_agent(kind="memory", store=store)
        writer.batch("leads", [{"score": 1}, {"score": 0}, {"score": 2}])
        return create_read_only_facade(kind="memory", store=store)

    @pytest.mark.parametrize(
        "flt",
        [
            Filter("score", Op.EQ, True),
            Filter("score", Op.NEQ, False),
            Filter("score", Op.GT, False),
            Filter("score", Op.LTE, True),
            Filter("score", Op.IN, [True, False]),
        ],
    )
    def test_a_bool_never_matches_an_integer(self, seeded: Any, flt: Filter) -> None:
        """As on PostgreSQL (where it is a type error), True is not 1 and False is not 0."""
        assert seeded.read("leads", [flt]).total_count == 0

    def test_numbers_still_compare_across_int_and_float(self, seeded: Any) -> None:
        """Integers and floats stay comparable, as numeric types are in SQL."""
        assert seeded.count("leads", [Filter("score", Op.GTE, 1.0)]) == 2


class TestNonFiniteDecimals:
    @pytest.mark.parametrize("text", ["NaN", "sNaN", "-NaN", "Infinity", "-Infinity"])
    def test_a_non_finite_decimal_is_refused_like_a_non_finite_float(self, text: str) -> None:
        """Decimal NaN/Infinity is an InvalidQueryError, not a decimal error from a backend."""
        with pytest.raises(InvalidQueryError, match="non-finite"):
            Filter("score", Op.GT, decimal.Decimal(text))
        with pytest.raises(InvalidQueryError, match="non-finite"):
            Filter("score", Op.IN, [1, decimal.Decimal(text)])

    def test_a_read_with_a_nan_decimal_raises_no_decimal_error(self, facade: Any) -> None:
        """Through the facade, the refusal is the library's typed error."""
        with pytest.raises(InvalidQueryError):
            facade.read("leads", [Filter("score", Op.LT, decimal.Decimal("NaN"))])


class TestOneLikeEscaper:
    @pytest.mark.parametrize("text", ["", "plain", "50%_off\\", "\\%", "a*b_c%d\\\\"])
    def test_escaped_literal_matches_only_itself(self, text: str) -> None:
        """escape_like output, read back as a LIKE pattern, matches exactly the literal."""
        assert like_regex(escape_like(text)).fullmatch(text) is not None
        assert like_regex(escape_like(text)).fullmatch(text + "x") is None

    def test_postgrest_pattern_builds_on_the_same_escaper(self) -> None:
        """The PostgREST icontains pattern is the shared escape with ``*`` narrowed to ``_``."""
        assert _postgrest_encoding.icontains_pattern("a%_\\*") == "*" + "a\\%\\_\\\\_" + "*"


class TestSelectParam:
    def test_all_columns(self) -> None:
        """No projection selects ``*``, whatever extra columns a client check needs."""
        assert _postgrest_encoding.select_param(None) == "*"
        assert _postgrest_encoding.select_param(None, ["name"]) == "*"

    def test_projection_plus_extra_columns_each_once(self) -> None:
        """The projected columns come first, then the extra ones, each named once."""
        assert _postgrest_encoding.select_param(("id", "email")) == "id,email"
        assert (
            _postgrest_encoding.select_param(("id", "name"), ["name", "phone"]) == "id,name,phone"
        )
