"""The JSON Schema and prompt of schema-constrained LLM extraction, generated per request."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from rag_agent.specs import LLM_OPERATORS, ColumnInfo
from rag_agent.understanding.llm.schema import (
    MAX_CONDITIONS,
    MAX_IN_VALUES,
    SCHEMA_NAME,
    extraction_messages,
    extraction_schema,
    offered_columns,
    schema_fingerprint,
)
from tests.support.extraction import (
    LEADS_COLUMNS,
    extraction_request,
    strict_schema_problems,
)

KINDS = (
    "text",
    "uuid",
    "integer",
    "numeric",
    "float",
    "boolean",
    "date",
    "timestamp",
    "timestamptz",
    "time",
    "json",
    "other",
)
ALL_OPERATORS = (*LLM_OPERATORS, "ilike")


def variants(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The condition variants of a generated schema."""
    items: list[dict[str, Any]] = schema["properties"]["conditions"]["items"]["anyOf"]
    return items


def allowed_pairs(schema: dict[str, Any]) -> set[tuple[str, str]]:
    """Every (column, operator) pair some variant admits."""
    return {
        (column, op)
        for variant in variants(schema)
        for column in variant["properties"]["column"]["enum"]
        for op in variant["properties"]["op"]["enum"]
    }


def value_for(schema: dict[str, Any], column: str, op: str) -> dict[str, Any]:
    """The value schema of the variant admitting ``column op``."""
    for variant in variants(schema):
        props = variant["properties"]
        if column in props["column"]["enum"] and op in props["op"]["enum"]:
            value: dict[str, Any] = props["value"]
            return value
    raise AssertionError(f"no variant for {column} {op}")


columns_strategy = st.lists(
    st.builds(
        ColumnInfo,
        name=st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True),
        kind=st.sampled_from(KINDS),
        operators=st.lists(st.sampled_from(ALL_OPERATORS), max_size=6).map(tuple),
    ),
    max_size=8,
    unique_by=lambda column: column.name,
).map(tuple)


class TestExtractionSchema:
    def test_columns_and_operators_are_exactly_those_offered(self) -> None:
        """Each column has its own operators but ilike; json and operator-less ones are left out."""
        schema = extraction_schema(extraction_request("anything"))
        assert schema is not None
        expected = {
            (column.name, op)
            for column in LEADS_COLUMNS
            if column.kind != "json"
            for op in column.operators
            if op != "ilike"
        }
        assert allowed_pairs(schema) == expected
        offered = {column for column, _ in allowed_pairs(schema)}
        assert "profile" not in offered and "notes" not in offered

    def test_values_are_typed_per_kind(self) -> None:
        """Each kind gets its JSON type; 'in' takes a bounded list and 'is_null' a boolean."""
        schema = extraction_schema(extraction_request("anything"))
        assert schema is not None
        assert value_for(schema, "score", "gt")["type"] == "integer"
        assert value_for(schema, "revenue", "gte")["type"] == "number"
        assert value_for(schema, "unsubscribed", "eq")["type"] == "boolean"
        assert value_for(schema, "company_name", "icontains")["type"] == "string"
        assert value_for(schema, "client_id", "eq")["format"] == "uuid"
        assert value_for(schema, "created_at", "gte")["format"] == "date-time"
        assert value_for(schema, "birthday", "lt")["format"] == "date"
        in_list = value_for(schema, "score", "in")
        assert in_list["type"] == "array" and in_list["items"]["type"] == "integer"
        assert in_list["maxItems"] == MAX_IN_VALUES
        assert value_for(schema, "client_id", "is_null")["type"] == "boolean"

    def test_tables_counts_and_ignored(self) -> None:
        """The table is one of the readable tables or null; count_only and ignored are there."""
        schema = extraction_schema(extraction_request("anything", tables=("leads", "campaigns")))
        assert schema is not None
        props = schema["properties"]
        assert props["table"]["anyOf"] == [
            {"type": "string", "enum": ["campaigns", "leads"]},
            {"type": "null"},
        ]
        assert props["count_only"]["type"] == "boolean"
        assert set(props["ignored"]["items"]["properties"]) == {"text", "reason"}
        assert props["conditions"]["maxItems"] == MAX_CONDITIONS
        assert schema["title"] == SCHEMA_NAME

    def test_no_readable_table_means_null(self) -> None:
        """Without readable tables the table can only be null."""
        schema = extraction_schema(extraction_request("anything", tables=()))
        assert schema is not None
        assert schema["properties"]["table"]["type"] == "null"

    def test_the_schema_differs_per_table(self) -> None:
        """Another table's columns give another column enum."""
        campaigns = (ColumnInfo("name", "text", ("ieq", "icontains")),)
        schema = extraction_schema(extraction_request("x", table="campaigns", columns=campaigns))
        assert schema is not None
        assert allowed_pairs(schema) == {("name", "ieq"), ("name", "icontains")}
        assert "campaigns" in schema["description"]

    def test_strict_mode_valid(self) -> None:
        """Every object forbids extra properties and requires all of its own."""
        schema = extraction_schema(extraction_request("anything"))
        assert schema is not None
        assert strict_schema_problems(schema) == []

    @given(columns_strategy)
    def test_any_columns_give_a_strict_schema_of_exactly_their_pairs(
        self, columns: tuple[ColumnInfo, ...]
    ) -> None:
        """For any columns the schema is strict-valid and admits exactly the offered pairs."""
        request = extraction_request("anything", columns=columns)
        schema = extraction_schema(request)
        offered = offered_columns(request)
        if not offered:
            assert schema is None
            return
        assert schema is not None
        assert strict_schema_problems(schema) == []
        assert allowed_pairs(schema) == {(c.name, op) for c in offered for op in c.operators}
        for column in columns:
            for op in column.operators:
                if op == "ilike" or column.kind == "json":
                    assert not any(c == column.name and o == op for c, o in allowed_pairs(schema))

    def test_a_name_given_twice_is_offered_once(self) -> None:
        """The first of two columns with one name wins."""
        columns = (ColumnInfo("a", "text", ("eq",)), ColumnInfo("a", "integer", ("gt",)))
        assert offered_columns(extraction_request("x", columns=columns)) == (columns[0],)

    def test_none_when_nothing_can_be_offered(self) -> None:
        """Only json or operator-less columns: no schema at all."""
        columns = (ColumnInfo("profile", "json", ("eq",)), ColumnInfo("x", "text", ("ilike",)))
        assert extraction_schema(extraction_request("x", columns=columns)) is None

    def test_a_fresh_dict_with_a_stable_fingerprint(self) -> None:
        """Two calls give equal, distinct dicts with one fingerprint; other operators, another."""
        first = extraction_schema(extraction_request("a"))
        second = extraction_schema(extraction_request("b"))
        assert first is not None and second is not None
        assert first == second and first is not second
        assert schema_fingerprint(first) == schema_fingerprint(second)
        fewer = tuple(c for c in LEADS_COLUMNS if c.name != "score")
        other = extraction_schema(extraction_request("a", columns=fewer))
        assert other is not None
        assert schema_fingerprint(other) != schema_fingerprint(first)


class TestExtractionMessages:
    def test_the_model_sees_now_columns_and_range_rules(self) -> None:
        """The prompt gives the UTC time, each column's kind and operators, half-open ranges."""
        system, human = extraction_messages(extraction_request("leads from last week"))
        assert human == "leads from last week"
        assert "2025-05-07T10:30:00Z" in system and "Wednesday" in system
        assert "- score: integer; eq neq gt gte lt lte in is_null" in system
        assert "ilike" not in system and "profile" not in system
        rules = " ".join(system.split())
        assert "half-open" in rules and "gte 2025-03-01T00:00:00Z and lt 2025-04-01" in rules

    def test_with_a_schema_the_prompt_asks_for_json(self) -> None:
        """For a model without structured output, the schema is in the prompt."""
        request = extraction_request("x")
        schema = extraction_schema(request)
        system, _ = extraction_messages(request, schema)
        assert json.dumps(schema, ensure_ascii=False) in system
