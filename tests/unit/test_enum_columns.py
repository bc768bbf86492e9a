"""Enum columns without a server: the type, the rewrite of every filter onto the labels, the
memory backend declaring one, PostgREST's description of one, and the aggregate SQL."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from persistence import (
    Filter,
    InvalidQueryError,
    MemoryStore,
    Op,
    create_persistence_agent,
    create_read_only_facade,
)
from persistence.aggregate import Metric
from persistence.backends.postgres import sql as _pg_sql
from persistence.backends.supabase.postgrest.schema import parse_description
from persistence.values.types import ColumnKind, ColumnType, coerce_filter, coerce_value, enum_type
from rag_agent.specs import ExtractionRequest
from rag_agent.tools.discovery import describe_table
from rag_agent.understanding.llm.schema import extraction_messages
from rag_agent.understanding.request import column_infos
from tests.conftest import corpus_lines

STAGE = enum_type("lead_stage", ["new", "Qualified", "lost", "won"])


def rewrite(op: Op, value: object) -> Filter:
    """``stage op value`` as the facade sends it on."""
    return coerce_filter(Filter("stage", op, value), STAGE, table="leads")


class TestEnumType:
    def test_labels_need_a_text_kind_and_distinct_strings(self) -> None:
        """An enum is text with at least one label, each once."""
        with pytest.raises(ValueError):
            ColumnType(ColumnKind.INTEGER, "x", 32, labels=("a",))
        with pytest.raises(ValueError):
            enum_type("x", [])
        with pytest.raises(ValueError):
            enum_type("x", ["a", "a"])
        assert STAGE.is_enum and not ColumnType(ColumnKind.TEXT, "text").is_enum


class TestEnumRewrite:
    @pytest.mark.parametrize(
        ("op", "value", "expected"),
        [
            (Op.EQ, "won", Filter("stage", Op.EQ, "won")),
            (Op.EQ, "QUALIFIED", Filter("stage", Op.EQ, "Qualified")),
            (Op.IEQ, "qualified", Filter("stage", Op.EQ, "Qualified")),
            (Op.ICONTAINS, "o", Filter("stage", Op.IN, ("lost", "won"))),
            (Op.ILIKE, "_E_", Filter("stage", Op.EQ, "new")),
            (Op.GT, "Qualified", Filter("stage", Op.IN, ("lost", "won"))),
            (Op.GTE, "lost", Filter("stage", Op.IN, ("lost", "won"))),
            (Op.LT, "lost", Filter("stage", Op.IN, ("new", "Qualified"))),
            (Op.LTE, "new", Filter("stage", Op.EQ, "new")),
            (Op.IN, ("NEW", "won"), Filter("stage", Op.IN, ("new", "won"))),
            (Op.IS_NULL, True, Filter("stage", Op.IS_NULL, True)),
        ],
    )
    def test_every_operator_becomes_an_equality_on_labels(
        self, op: Op, value: object, expected: Filter
    ) -> None:
        """ieq, icontains, ilike and order comparisons are label sets; nothing reaches SQL's
        lower() or ILIKE on the enum."""
        assert rewrite(op, value) == expected

    @pytest.mark.parametrize(
        ("op", "value"),
        [(Op.EQ, "archived"), (Op.IEQ, "x"), (Op.ICONTAINS, "zz"), (Op.GT, "won"), (Op.EQ, 3)],
    )
    def test_no_label_is_a_typed_error_listing_them(self, op: Op, value: object) -> None:
        """A value no label answers is refused, naming the enum and every label."""
        with pytest.raises(InvalidQueryError) as caught:
            rewrite(op, value)
        assert "lead_stage" in str(caught.value) and "'Qualified'" in str(caught.value)

    def test_two_labels_differing_in_case_are_both_kept_by_ieq(self) -> None:
        """ieq 'a' on labels 'a' and 'A' is either; eq 'a' is exactly 'a'."""
        both = enum_type("pair", ["a", "A"])
        flt = coerce_filter(Filter("c", Op.IEQ, "a"), both, table="t")
        assert flt == Filter("c", Op.IN, ("a", "A"))
        assert coerce_value("a", both, table="t", column="c") == "a"

    @given(st.sampled_from(list(Op)), st.text(max_size=8))
    def test_the_rewrite_is_idempotent(self, op: Op, value: str) -> None:
        """A rewritten filter checked again is unchanged (the facade may check twice)."""
        arg: object = (value,) if op is Op.IN else (bool(value) if op is Op.IS_NULL else value)
        try:
            once = rewrite(op, arg)
        except InvalidQueryError:
            return
        assert coerce_filter(once, STAGE, table="leads") == once


class TestMemoryEnum:
    def test_a_declared_enum_filters_and_refuses_writes_of_no_label(self) -> None:
        """The memory store takes a ColumnType: ieq works, and a write that is not exactly a
        label is refused, as PostgreSQL refuses it."""
        store = MemoryStore(schema={"deals": {"id": "bigint", "stage": STAGE}})
        writer = create_persistence_agent(kind="memory", store=store, tables=["deals"])
        writer.batch("deals", [{"stage": "new"}, {"stage": "Qualified"}])
        for refused in ("archived", "qualified"):  # exactly a label, as PostgreSQL takes it
            with pytest.raises(InvalidQueryError):
                writer.batch("deals", [{"stage": refused}])
        reader = create_read_only_facade(kind="memory", store=store, tables=["deals"])
        rows = reader.read("deals", [Filter("stage", Op.IEQ, "QUALIFIED")]).rows
        assert [row["stage"] for row in rows] == ["Qualified"]


class TestPostgrestEnum:
    def test_an_enum_list_gives_the_labels(self) -> None:
        """PostgREST's ``enum`` beside the type name is the labels, in its order."""
        document = {
            "definitions": {
                "leads": {
                    "properties": {
                        "stage": {"format": "lead_stage", "type": "string", "enum": ["b", "a"]},
                        "odd": {"format": "x", "type": "string", "enum": [1, 2]},
                    }
                }
            }
        }
        parsed = parse_description(document)
        assert parsed is not None
        assert parsed["leads"]["stage"] == enum_type("lead_stage", ["b", "a"])
        assert parsed["leads"]["odd"].labels is None  # not labels: typed by name alone


class TestEnumAggregateSql:
    def test_an_enum_key_is_cast_to_text_for_its_order(self) -> None:
        """ORDER BY and min/max use the label as text in code-point order: an enum takes no
        COLLATE, and PostgreSQL would otherwise order it by declaration."""
        statement = _pg_sql.build_aggregate(
            "leads",
            "public",
            (),
            ("stage",),
            (Metric("count"), Metric("max", "stage")),
            frozenset({"stage"}),
            frozenset({"stage"}),
        ).as_string(None)
        assert 'ORDER BY "stage"::pg_catalog.text COLLATE "C"' in statement
        assert 'max("stage"::pg_catalog.text COLLATE "C")' in statement
        assert 'GROUP BY "stage"' in statement


class TestHostileEnumValues:
    def test_no_corpus_line_reaches_a_backend_as_an_enum_value(self) -> None:
        """Every corpus line, under every operator, is refused or becomes labels only."""
        failures = []
        for payload in corpus_lines():
            for op in (Op.EQ, Op.NEQ, Op.IEQ, Op.ICONTAINS, Op.ILIKE, Op.GT, Op.LT):
                try:
                    flt = rewrite(op, payload)
                except InvalidQueryError:
                    continue
                values = flt.value if flt.op is Op.IN else (flt.value,)
                if flt.op not in (Op.EQ, Op.NEQ, Op.IN) or not set(values) <= set(
                    STAGE.labels or ()
                ):
                    failures.append((payload, op))
        assert failures == []


class TestEnumForModels:
    def test_describe_table_lists_the_labels(self) -> None:
        """A tool-calling model sees an enum column's labels, and only there."""
        store = MemoryStore(schema={"deals": {"id": "bigint", "stage": STAGE, "name": "text"}})
        reader = create_read_only_facade(kind="memory", store=store, tables=["deals"])
        columns = {c["name"]: c for c in describe_table(reader, "deals")["columns"]}
        assert columns["stage"]["labels"] == ["new", "Qualified", "lost", "won"]
        assert "labels" not in columns["name"]

    def test_the_extraction_prompt_names_the_labels(self) -> None:
        """The extraction prompt tells the model which values an enum column holds."""
        store = MemoryStore(schema={"deals": {"id": "bigint", "stage": STAGE}})
        reader = create_read_only_facade(kind="memory", store=store, tables=["deals"])
        request = ExtractionRequest(
            text="qualified deals",
            table="deals",
            columns=column_infos(reader, "deals"),
            tables=("deals",),
            now=dt.datetime(2025, 5, 7, tzinfo=dt.UTC),
        )
        system, _ = extraction_messages(request)
        assert '; one of "new", "Qualified", "lost", "won"' in system
