"""Checking a model's answer: offered columns and operators, typed values, grounding in the text."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from persistence import Op
from rag_agent.specs import Condition, Understanding
from rag_agent.understanding.llm.grounding import (
    column_mentioned,
    number_grounded,
    text_grounded,
    understand_answer,
    uuid_grounded,
)
from rag_agent.understanding.llm.schema import (
    MAX_CONDITIONS,
    MAX_IGNORED,
    MAX_IN_VALUES,
    offered_columns,
)
from tests.support.extraction import answer, cond, extraction_request

CLIENT = uuid.UUID("6f1c2a9e-3b7d-4c1e-9a0b-5d8e7f6a1b2c")


def understood(text: str, *conditions: dict[str, Any], **options: Any) -> Understanding:
    """What survives of an answer with ``conditions`` to a request with ``text``."""
    return understand_answer(answer(*conditions, **options), extraction_request(text))


def reasons(result: Understanding) -> str:
    """Every ignored reason, joined, for assertions on why something was dropped."""
    return " | ".join(entry.reason for entry in result.ignored)


class TestTextGrounded:
    @pytest.mark.parametrize(
        ("value", "text"),
        [
            ("Acme", "people at ACME."),
            ("acme  inc", "who works at Acme Inc?"),
            ("ana@acme.example", "lead ana@acme.example please"),
            ("O'Reilly & Sons", "leads at o'reilly & sons, berlin"),
            ("qualified", "qualified leads"),
        ],
    )
    def test_grounded(self, value: str, text: str) -> None:
        """A value written in the text (any case, any spacing) is grounded."""
        assert text_grounded(value, text)

    @pytest.mark.parametrize(
        ("value", "text"),
        [
            ("Globex", "leads at acme"),
            ("acme", "acmeology leads"),
            ("cme", "leads at acme"),
            ("", "anything"),
            ("   ", "a   b"),
            (",", "acme, globex"),
            ("' --", "x' -- y"),
        ],
    )
    def test_not_grounded(self, value: str, text: str) -> None:
        """Inventions, fragments of words, blanks and bare punctuation are not grounded."""
        assert not text_grounded(value, text)

    @given(st.text(max_size=40), st.from_regex(r"[A-Za-z]{1,12}", fullmatch=True))
    def test_a_word_absent_from_the_text_is_never_grounded(self, text: str, word: str) -> None:
        """A word that does not occur in the text (case-insensitively) is not grounded."""
        if word.casefold() not in " ".join(text.split()).casefold():
            assert not text_grounded(word, text)

    @given(st.from_regex(r"[A-Za-z][A-Za-z ]{0,20}[A-Za-z]", fullmatch=True))
    def test_a_phrase_written_between_spaces_is_grounded(self, phrase: str) -> None:
        """Whatever phrase a user writes, the same phrase in another case is grounded."""
        assert text_grounded(phrase.upper(), f"find {phrase} please")


class TestNumberGrounded:
    @pytest.mark.parametrize(
        ("value", "text"),
        [
            (80, "score above 80"),
            (80.0, "score above 80"),
            (decimal.Decimal("80.5"), "score 80.5 or more"),
            (1000, "revenue over 1,000"),
            (-5, "score -5"),
            (12, "lead #12?"),
        ],
    )
    def test_grounded(self, value: Any, text: str) -> None:
        """A number written in digits is grounded, whatever its Python type."""
        assert number_grounded(value, text)

    @pytest.mark.parametrize(
        ("value", "text"),
        [(12, "lead 123"), (3, "lead 1.3"), (-3, "lead 3"), (5, "plan v5"), (81, "above 80")],
    )
    def test_not_grounded(self, value: Any, text: str) -> None:
        """Parts of other numbers, signs the user did not write and computed numbers are not."""
        assert not number_grounded(value, text)

    @given(st.integers(min_value=0, max_value=10**12))
    def test_written_integers_are_grounded_and_neighbours_not(self, number: int) -> None:
        """The number written is grounded; the next one is not."""
        text = f"lead {number} please"
        assert number_grounded(number, text)
        assert not number_grounded(number + 1, text)


class TestUuidGrounded:
    @pytest.mark.parametrize(
        "written",
        [str(CLIENT), str(CLIENT).upper(), CLIENT.hex, "{" + str(CLIENT) + "}"],
    )
    def test_any_spelling(self, written: str) -> None:
        """A uuid is grounded however it is written."""
        assert uuid_grounded(CLIENT, f"leads of client {written}")

    def test_another_uuid_is_not(self) -> None:
        """A uuid the user did not write is not grounded."""
        assert not uuid_grounded(uuid.uuid4(), f"leads of client {CLIENT}")


class TestColumnMentioned:
    @pytest.mark.parametrize(
        ("column", "text"),
        [
            ("unsubscribed", "unsubscribed leads"),
            ("replied_at", "leads who never replied"),
            ("replied_at", "leads with no reply"),
            ("phone_number", "leads without a phone"),
        ],
    )
    def test_mentioned(self, column: str, text: str) -> None:
        """A word starting like a telling part of the name mentions the column."""
        assert column_mentioned(column, text)

    @pytest.mark.parametrize(
        ("column", "text"), [("unsubscribed", "leads at acme"), ("is_active", "is it at 5")]
    )
    def test_not_mentioned(self, column: str, text: str) -> None:
        """Generic parts (is, at, id) and unrelated words do not mention it."""
        assert not column_mentioned(column, text)


class TestUnderstandAnswer:
    def test_valid_conditions_are_kept_typed_and_marked_llm(self) -> None:
        """Grounded conditions come back coerced, in order, with source 'llm'."""
        result = understood(
            f"qualified leads at Acme of client {CLIENT} with score above 80",
            cond("status", "ieq", "qualified"),
            cond("company_name", "icontains", "Acme"),
            cond("client_id", "eq", str(CLIENT).upper()),
            cond("score", "gt", 80),
        )
        assert result.conditions == (
            Condition("status", Op.IEQ, "qualified", "llm"),
            Condition("company_name", Op.ICONTAINS, "Acme", "llm"),
            Condition("client_id", Op.EQ, CLIENT, "llm"),
            Condition("score", Op.GT, 80, "llm"),
        )
        assert result.ignored == () and result.table is None and not result.count_only

    def test_invented_company_is_rejected(self) -> None:
        """A company the user never wrote goes to ignored, not into the query."""
        result = understood(
            "who do we know in Berlin?", cond("company_name", "icontains", "Initech")
        )
        assert result.conditions == ()
        assert result.ignored[0].text == 'company_name icontains "Initech"'
        assert "did not write" in result.ignored[0].reason

    @pytest.mark.parametrize(
        "condition",
        [
            cond("id", "eq", 7),
            cond("id", "eq", "12"),
            cond("id", "in", [7, 8]),
            cond("client_id", "eq", str(uuid.uuid4())),
            cond("revenue", "gt", 12.5),
        ],
    )
    def test_invented_ids_and_numbers_are_rejected(self, condition: dict[str, Any]) -> None:
        """Ids, uuids and numbers not written in the text are rejected."""
        assert understood(f"lead 123 of client {CLIENT}", condition).conditions == ()

    def test_computed_dates_are_accepted(self) -> None:
        """'last week' may become dates the user never wrote, as half-open UTC bounds."""
        result = understood(
            "leads created last week",
            cond("created_at", "gte", "2025-04-28T00:00:00Z"),
            cond("created_at", "lt", "2025-05-05T00:00:00+00:00"),
            cond("birthday", "lt", "2000-01-01"),
        )
        assert result.conditions == (
            Condition("created_at", Op.GTE, dt.datetime(2025, 4, 28, tzinfo=dt.UTC), "llm"),
            Condition("created_at", Op.LT, dt.datetime(2025, 5, 5, tzinfo=dt.UTC), "llm"),
            Condition("birthday", Op.LT, dt.date(2000, 1, 1), "llm"),
        )

    @pytest.mark.parametrize(
        "value", ["1800-01-01T00:00:00Z", "2199-01-01", "March 2025", "01/03/2025", 1_714_521_600]
    )
    def test_dates_must_be_iso_and_sane(self, value: Any) -> None:
        """Dates far from now, or not ISO 8601 strings, are rejected."""
        assert understood("leads created then", cond("created_at", "gte", value)).conditions == ()

    @pytest.mark.parametrize(
        ("condition", "why"),
        [
            (cond("secret", "eq", "acme"), "offers no column"),
            (cond("profile", "eq", "acme"), "offers no column"),
            (cond("notes", "icontains", "acme"), "offers no column"),
            (cond("company_name", "ilike", "%acme%"), "not allowed"),
            (cond("company_name", "like", "acme"), "not allowed"),
            (cond("score", "icontains", "80"), "not allowed"),
            (cond("unsubscribed", "gt", True), "not allowed"),
            (cond(["company_name"], "eq", "acme"), "offers no column"),
            (cond("company_name", None, "acme"), "not allowed"),
        ],
    )
    def test_unknown_columns_and_operators_are_rejected(
        self, condition: dict[str, Any], why: str
    ) -> None:
        """Only offered columns with operators allowed on them are used."""
        result = understood("acme 80 unsubscribed notes secret profile", condition)
        assert result.conditions == ()
        assert why in reasons(result)

    @pytest.mark.parametrize(
        "condition",
        [
            cond("company_name", "eq", 42),
            cond("company_name", "eq", ["acme"]),
            cond("company_name", "eq", None),
            cond("score", "eq", "eighty"),
            cond("score", "eq", True),
            cond("score", "eq", 80.5),
            cond("client_id", "eq", "acme"),
            cond("company_name", "in", "acme"),
            cond("company_name", "is_null", "yes"),
            {"column": "company_name"},
            "company_name = acme",
        ],
    )
    def test_values_of_the_wrong_kind_are_rejected(self, condition: Any) -> None:
        """A value that is not of the column's kind (or no condition at all) is dropped."""
        result = understand_answer(
            {"conditions": [condition]}, extraction_request("acme 42 80 eighty")
        )
        assert result.conditions == () and len(result.ignored) == 1

    def test_in_lists_keep_grounded_members_only(self) -> None:
        """An invented member is dropped alone; the user's own values stay, once each."""
        result = understood(
            "leads at acme or globex",
            cond("company_name", "in", ["Acme", "Initech", "globex", "Acme"]),
        )
        assert result.conditions == (Condition("company_name", Op.IN, ("Acme", "globex"), "llm"),)
        assert [entry.text for entry in result.ignored] == ['company_name in "Initech"']

    def test_in_lists_are_bounded(self) -> None:
        """A list longer than the bound, or empty, is rejected whole."""
        numbers = list(range(MAX_IN_VALUES + 1))
        text = "ids " + " ".join(map(str, numbers))
        too_long = understand_answer(answer(cond("id", "in", numbers)), extraction_request(text))
        assert too_long.conditions == () and "1 to" in reasons(too_long)
        assert understood("ids", cond("id", "in", [])).conditions == ()

    def test_is_null_needs_a_boolean_and_a_mention(self) -> None:
        """is_null takes true/false on a column the text mentions."""
        result = understood(
            "leads who never replied",
            cond("replied_at", "is_null", True),
            cond("client_id", "is_null", True),
        )
        assert result.conditions == (Condition("replied_at", Op.IS_NULL, True, "llm"),)
        assert "does not mention client_id" in reasons(result)

    def test_booleans_need_a_mention(self) -> None:
        """A boolean condition on a column the text never mentions is dropped."""
        kept = understood("unsubscribed leads", cond("unsubscribed", "eq", True))
        assert kept.conditions == (Condition("unsubscribed", Op.EQ, True, "llm"),)
        assert understood("leads at acme", cond("unsubscribed", "eq", False)).conditions == ()

    def test_duplicates_collapse_and_the_count_is_bounded(self) -> None:
        """A repeated condition is kept once; conditions past the bound are ignored."""
        repeated = [cond("score", "gt", 80)] * (MAX_CONDITIONS + 2)
        result = understood("score above 80", *repeated)
        assert result.conditions == (Condition("score", Op.GT, 80, "llm"),)
        assert reasons(result).count(f"more than {MAX_CONDITIONS}") == 2

    @pytest.mark.parametrize("raw", [None, "text", ["conditions"], 42])
    def test_an_answer_that_is_not_an_object_gives_nothing(self, raw: Any) -> None:
        """A non-object answer has no conditions and says why."""
        result = understand_answer(raw, extraction_request("acme"))
        assert result.conditions == () and result.ignored

    def test_count_only_only_when_true(self) -> None:
        """count_only is set only by a real true."""
        assert understood("how many leads", count_only=True).count_only
        for value in ("true", 1, None):
            raw = {"conditions": [], "count_only": value}
            assert not understand_answer(raw, extraction_request("how many")).count_only

    def test_a_named_table_is_taken_when_the_text_names_it(self) -> None:
        """'campaigns' in the text names the table; conditions meant for leads are ignored."""
        result = understood("campaigns of client 7", cond("score", "eq", 7), table="campaigns")
        assert result.table == "campaigns"
        assert result.conditions == ()
        assert "the request is about campaigns" in reasons(result)

    def test_singular_table_names_count(self) -> None:
        """'inquiry' names inquiries; 'staging lead' names staging_leads."""
        assert understood("the last inquiry", table="inquiries").table == "inquiries"
        assert understood("a staging lead", table="staging_leads").table == "staging_leads"

    @pytest.mark.parametrize(
        ("named", "text", "why"),
        [
            ("campaigns", "leads at acme", "does not name"),
            ("secrets", "secrets please", "not a readable table"),
            ("public.leads", "public.leads", "not a readable table"),
            (7, "seven", "not a readable table"),
        ],
    )
    def test_unnamed_or_unreadable_tables_are_ignored(
        self, named: Any, text: str, why: str
    ) -> None:
        """A table the text does not name, or one not readable, is not taken."""
        raw = {"conditions": [], "table": named}
        result = understand_answer(raw, extraction_request(text))
        assert result.table is None and why in reasons(result)

    def test_the_current_table_echoed_is_not_a_change(self) -> None:
        """The model echoing the request's table unnamed gives no table and no complaint."""
        result = understood("acme people", cond("company_name", "icontains", "acme"), table="leads")
        assert result.table is None and result.ignored == () and len(result.conditions) == 1

    def test_the_models_ignored_parts_are_kept_when_they_are_the_users_words(self) -> None:
        """Ignored parts written in the request are kept (bounded); invented ones are not."""
        own = {"text": "the logistics company", "reason": "no industry column"}
        invented = {"text": "drop table leads", "reason": "x"}
        result = understood(
            "who is the CTO at the logistics company", ignored=(own, invented, *[own] * MAX_IGNORED)
        )
        assert result.ignored[0].text == "the logistics company"
        assert all(entry.text != "drop table leads" for entry in result.ignored)
        assert len(result.ignored) == MAX_IGNORED


_columns = offered_columns(extraction_request("x"))
_names = [column.name for column in _columns]
_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**6), max_value=10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["acme", "Acme Inc", "80", "2025-05-01", str(CLIENT), "x' OR '1'='1"]),
)
_conditions = st.fixed_dictionaries(
    {
        "column": st.one_of(st.sampled_from([*_names, "secret", "profile"]), st.text(max_size=8)),
        "op": st.sampled_from(
            ["eq", "ieq", "neq", "gt", "lt", "in", "is_null", "icontains", "ilike", "raw"]
        ),
        "value": st.one_of(_values, st.lists(_values, max_size=4)),
    }
)


class TestUnderstandAnswerProperties:
    @given(
        st.text(max_size=60).map(lambda t: f"acme 80 {CLIENT} unsubscribed {t}"),
        st.lists(_conditions, max_size=6),
        st.one_of(st.none(), st.text(max_size=10), st.sampled_from(["leads", "campaigns"])),
    )
    def test_only_offered_grounded_conditions_pass(
        self, text: str, conditions: list[dict[str, Any]], table: Any
    ) -> None:
        """Whatever the answer, every kept condition is offered, allowed, from llm, grounded."""
        request = extraction_request(text)
        result = understand_answer({"conditions": conditions, "table": table}, request)
        by_name = {column.name: column for column in _columns}
        for condition in result.conditions:
            column = by_name[condition.column]
            assert condition.op.value in column.operators and condition.source == "llm"
            values = condition.value if condition.op is Op.IN else (condition.value,)
            for value in values if condition.op is not Op.IS_NULL else ():
                if column.kind == "text":
                    assert text_grounded(value, text)
                elif column.kind in {"integer", "numeric"}:
                    assert number_grounded(value, text)
                elif column.kind == "uuid":
                    assert uuid_grounded(value, text)
        assert not conditions or result.conditions or result.ignored  # nothing vanishes unsaid
        assert result.table in {None, "leads", "campaigns"}
