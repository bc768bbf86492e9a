"""The query value objects validate on construction."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest

from persistence import Filter, InvalidQueryError, Op, Order, Query
from persistence.query import MAX_IN_VALUES, is_identifier


class TestOp:
    def test_values_round_trip(self) -> None:
        """Every operator is constructible from its wire value."""
        assert Op("icontains") is Op.ICONTAINS
        assert [op.value for op in Op] == [
            "eq", "neq", "gt", "gte", "lt", "lte", "in", "is_null", "icontains", "ilike", "ieq",
        ]  # fmt: skip

    def test_unknown_value_is_a_value_error(self) -> None:
        """An unknown operator name raises ValueError."""
        with pytest.raises(ValueError):
            Op("like")


class TestIdentifiers:
    @pytest.mark.parametrize("name", ["leads", "_x", "a1", "company_name", "a" * 63])
    def test_accepts_plain_lower_case_names(self, name: str) -> None:
        """Lower-case ASCII identifiers of up to 63 characters pass."""
        assert is_identifier(name)

    @pytest.mark.parametrize(
        "name",
        ["", "LEADS", "Leads", " leads", "leads ", "public.leads", '"leads"', "leads;drop",
         "1abc", "a" * 64, "leads\x00", "lеads", "leads\n", "le-ads", 42, None, b"leads"],
    )  # fmt: skip
    def test_refuses_everything_else(self, name: object) -> None:
        """Case, whitespace, quoting, schema prefixes, look-alikes and non-strings fail."""
        assert not is_identifier(name)


class TestFilter:
    def test_op_given_as_string_is_normalised(self) -> None:
        """Filter accepts the operator's value and stores the enum member."""
        assert Filter("email", "eq", "a@x.io").op is Op.EQ  # type: ignore[arg-type]

    def test_in_list_becomes_a_tuple(self) -> None:
        """An IN value is frozen into a tuple so the filter is hashable."""
        flt = Filter("id", Op.IN, [1, 2])
        assert flt.value == (1, 2)
        assert hash(flt) == hash(Filter("id", Op.IN, (1, 2)))

    @pytest.mark.parametrize(
        ("column", "op", "value", "field"),
        [
            ("Email", Op.EQ, "x", "column"),
            ("email", "like", "x", "op"),
            ("email", Op.EQ, None, "value"),
            ("email", Op.EQ, ["a"], "value"),
            ("email", Op.EQ, "a\x00b", "value"),
            ("score", Op.GT, float("nan"), "value"),
            ("id", Op.IN, [], "value"),
            ("id", Op.IN, "abc", "value"),
            ("id", Op.IN, [1, None], "value"),
            ("id", Op.IN, list(range(MAX_IN_VALUES + 1)), "value"),
            ("email", Op.IS_NULL, 1, "value"),
            ("email", Op.ICONTAINS, 5, "value"),
            ("email", Op.ILIKE, "abc\\", "value"),
        ],
    )
    def test_bad_values_raise_invalid_query_error(
        self, column: str, op: Op, value: object, field: str
    ) -> None:
        """Malformed filters raise InvalidQueryError (a ValueError) naming the bad field."""
        with pytest.raises(InvalidQueryError) as info:
            Filter(column, op, value)
        assert isinstance(info.value, ValueError)
        assert info.value.field == field
        assert str(info.value)

    def test_escaped_trailing_backslash_is_a_valid_pattern(self) -> None:
        """An ILIKE pattern ending in an escaped backslash is fine."""
        assert Filter("email", Op.ILIKE, "abc\\\\").value == "abc\\\\"

    def test_accepts_dates(self) -> None:
        """Dates and datetimes are comparable scalars."""
        assert Filter("created_at", Op.GTE, dt.date(2024, 1, 1)).value == dt.date(2024, 1, 1)

    @pytest.mark.parametrize("text", ["NaN", "sNaN", "-NaN", "Infinity", "-Infinity"])
    def test_a_non_finite_decimal_is_refused_like_a_non_finite_float(self, text: str) -> None:
        """Decimal NaN/Infinity is an InvalidQueryError, not a decimal error from a backend."""
        with pytest.raises(InvalidQueryError, match="non-finite"):
            Filter("score", Op.GT, decimal.Decimal(text))
        with pytest.raises(InvalidQueryError, match="non-finite"):
            Filter("score", Op.IN, [1, decimal.Decimal(text)])


class TestQuery:
    def test_defaults(self) -> None:
        """A bare query reads everything from offset 0."""
        query = Query("leads")
        assert (query.filters, query.columns, query.order, query.limit, query.offset) == (
            (), None, (), None, 0,
        )  # fmt: skip

    def test_order_names_become_orders(self) -> None:
        """Column names in order= become ascending Order objects."""
        assert Query("leads", order=("email",)).order == (Order("email"),)  # type: ignore[arg-type]

    @pytest.mark.parametrize(
        "kwargs",
        [
            {"limit": -1},
            {"limit": 1.5},
            {"limit": True},
            {"offset": -3},
            {"offset": None},
            {"columns": ()},
            {"columns": "email"},
            {"columns": ("Email",)},
            {"filters": ("email",)},
            {"order": (1,)},
        ],
    )
    def test_bad_arguments_raise(self, kwargs: dict[str, object]) -> None:
        """Negative or non-integer windows, empty projections and stray types are refused."""
        with pytest.raises(InvalidQueryError):
            Query("leads", **kwargs)  # type: ignore[arg-type]

    def test_referenced_columns(self) -> None:
        """referenced_columns gathers filter, order and projection columns."""
        query = Query(
            "leads",
            filters=(Filter("email", Op.EQ, "x"),),
            columns=("id",),
            order=(Order("score"),),
        )
        assert query.referenced_columns() == {"email", "id", "score"}
