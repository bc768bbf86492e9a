"""The schema-constrained extraction's shape parts: group_by, metrics and include.

The schema offers only the request's own columns and relations; the answer is checked again
(names, kinds, grounding in the words of the request); and the agent runs what was kept: a
count per group, an aggregate, related rows. Models are LangChain fakes.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import jsonschema
import pytest
from langchain_core.messages import AIMessage

from persistence import MemoryStore, create_persistence_agent, create_read_only_facade
from rag_agent import FallbackRequest, FallbackResult, RAGAgent
from rag_agent.envelope import envelope_json_schema
from rag_agent.specs import ExtractionRequest, Understanding
from rag_agent.understanding.llm.extract import SchemaFilterExtractor
from rag_agent.understanding.llm.grounding import understand_answer
from rag_agent.understanding.llm.schema import SCHEMA_NAME, extraction_messages, extraction_schema
from rag_agent.understanding.llm.shape import group_columns, metric_columns, shape_properties
from rag_agent.understanding.request import understand_request
from tests.support.extraction import NOW, answer, cond, extraction_request, strict_schema_problems
from tests.unit.test_llm_scripted import ScriptedChatModel, call, calls

RELATIONS = ("conversations", "messages")


def request(text: str, *, relations: tuple[str, ...] = RELATIONS) -> ExtractionRequest:
    """An extraction request over the sample leads columns, with two relations."""
    base = extraction_request(text)
    return ExtractionRequest(
        text=base.text,
        table=base.table,
        columns=base.columns,
        tables=base.tables,
        now=base.now,
        relations=relations,
    )


def shaped(*conditions: dict[str, Any], **parts: Any) -> dict[str, Any]:
    """An answer with conditions and shape parts."""
    return {**answer(*conditions), **parts}


class TestShapeSchema:
    def test_every_part_is_offered_from_the_request_names(self) -> None:
        """group_by lists the groupable columns, metrics one variant per function, include the
        relations; JSON and unknown kinds are never groupable."""
        properties = shape_properties(request("x"))
        groupable = properties["group_by"]["items"]["enum"]
        assert "status" in groupable and "score" in groupable
        assert "profile" not in groupable  # json
        variants = properties["metrics"]["items"]["anyOf"]
        by_function = {
            v["properties"]["function"]["enum"][0]: v["properties"]["column"]["enum"]
            for v in variants
        }
        assert "status" not in by_function["sum"] and "score" in by_function["sum"]
        assert "created_at" in by_function["max"]
        assert properties["include"]["items"]["enum"] == ["conversations", "messages"]

    def test_a_request_without_relations_has_no_include(self) -> None:
        """Strict mode refuses an empty enum: a part with nothing to offer is left out."""
        assert "include" not in shape_properties(request("x", relations=()))

    def test_the_whole_schema_stays_strict(self) -> None:
        """The schema with its shape parts is still one OpenAI strict mode takes."""
        schema = extraction_schema(request("leads by status"))
        assert schema is not None
        assert strict_schema_problems(schema) == []
        assert {"group_by", "metrics", "include"} <= set(schema["required"])

    def test_the_prompt_names_the_relations(self) -> None:
        """The model is told which related rows it may ask for."""
        system, _ = extraction_messages(request("x"))
        assert "include" in system and "conversations, messages" in system

    def test_metric_columns_follow_the_aggregate_kinds(self) -> None:
        """sum and avg take numbers; min and max also text and dates; none takes JSON."""
        req = request("x")
        assert "created_at" not in metric_columns(req, "avg")
        assert "company_name" in metric_columns(req, "min")
        assert "profile" not in group_columns(req)


class TestShapeGrounding:
    def test_a_grouping_with_a_grouping_word_is_kept(self) -> None:
        """'leads broken out by stage' may be grouped by status: the text asks per group."""
        found = understand_answer(
            shaped(group_by=["status"]), request("how many leads broken out by stage")
        )
        assert found.group_by == ("status",)

    def test_a_grouping_without_a_grouping_word_is_ignored(self) -> None:
        """'how many qualified leads' asks for one count, whatever the model says."""
        found = understand_answer(shaped(group_by=["status"]), request("how many leads"))
        assert found.group_by == ()
        assert [i.reason for i in found.ignored] == ["the request asks for no count per group"]

    def test_an_unknown_or_json_grouping_is_ignored(self) -> None:
        """A column the request does not offer as groupable is never grouped by."""
        found = understand_answer(
            shaped(group_by=["profile", "password", 3]), request("leads by profile")
        )
        assert found.group_by == ()
        assert len(found.ignored) == 3

    def test_a_metric_needs_its_word_and_its_column(self) -> None:
        """'average score' keeps avg:score; a sum nobody asked for is dropped."""
        found = understand_answer(
            shaped(
                metrics=[
                    {"function": "avg", "column": "score"},
                    {"function": "sum", "column": "revenue"},
                ]
            ),
            request("average score of leads per status"),
        )
        assert found.metrics == ("avg:score",)
        assert [i.text for i in found.ignored] == ["sum of revenue"]

    def test_a_metric_of_the_wrong_kind_is_refused(self) -> None:
        """sum of a text column is not an aggregate the facade could take."""
        found = understand_answer(
            shaped(metrics=[{"function": "sum", "column": "status"}]), request("total status")
        )
        assert found.metrics == ()
        assert "cannot be taken" in found.ignored[0].reason

    def test_a_relation_must_be_named_in_the_text(self) -> None:
        """'with its conversations' keeps conversations; messages nobody named are dropped."""
        found = understand_answer(
            shaped(cond("email", "ieq", "ann@acme.io"), include=["conversations", "messages", "x"]),
            request("ann@acme.io and what we talked about in our conversations"),
        )
        assert found.include == ("conversations",)
        assert len(found.ignored) == 2

    def test_another_table_drops_the_shape(self) -> None:
        """A shape read against the leads columns is not applied to another table."""
        found = understand_answer(
            shaped(table="campaigns", group_by=["status"]), request("campaigns by status")
        )
        assert found.table == "campaigns"
        assert found.group_by == ()
        assert any("the request is about campaigns" in i.reason for i in found.ignored)

    def test_hostile_names_never_pass(self) -> None:
        """SQL, PostgREST grammar and odd types as names are ignored, never kept."""
        hostile = ["status; drop table leads", "status,count()", "*", "", None, {"a": 1}]
        found = understand_answer(
            shaped(
                group_by=hostile,
                metrics=[{"function": "sum", "column": h} for h in hostile] + hostile,
                include=hostile,
            ),
            request("total score by status with conversations"),
        )
        assert (found.group_by, found.metrics, found.include) == ((), (), ())


class TestDateCue:
    def test_a_date_without_a_date_word_is_ignored(self) -> None:
        """'leads at Acme' never asks for a creation date the model made up."""
        found = understand_answer(
            answer(
                cond("company_name", "icontains", "Acme"),
                cond("created_at", "gte", "2025-01-01T00:00:00Z"),
            ),
            request("leads at Acme"),
        )
        assert [c.column for c in found.conditions] == ["company_name"]
        assert found.ignored[0].reason == "the request states no date or period"

    @pytest.mark.parametrize(
        "text",
        [
            "leads created last week",
            "leads since March",
            "leads from 2025",
            "leads created 3 days ago",
            "leads that came in this quarter",
            "leads created in may",
        ],
    )
    def test_a_date_word_lets_a_computed_date_through(self, text: str) -> None:
        """A period the text states may be computed by the model."""
        found = understand_answer(
            answer(cond("created_at", "gte", "2025-03-01T00:00:00Z")), request(text)
        )
        assert [c.column for c in found.conditions] == ["created_at"]


def _no_fallback(request: FallbackRequest) -> FallbackResult:
    raise AssertionError(f"the fallback was called for {request.text!r}")


@pytest.fixture
def store() -> MemoryStore:
    store = MemoryStore()
    writer = create_persistence_agent(kind="memory", store=store)
    writer.batch(
        "leads",
        [
            {"email": "ann@acme.io", "status": "qualified", "score": 8},
            {"email": "bob@acme.io", "status": "qualified", "score": 4},
            {"email": "cy@acme.io", "status": "new", "score": 3},
        ],
    )
    writer.batch("conversations", [{"lead_id": 1, "channel": "email"}] * 2)
    return store


def _agent(store: MemoryStore, payload: dict[str, Any]) -> tuple[RAGAgent, ScriptedChatModel]:
    model = ScriptedChatModel(script=[calls(call(SCHEMA_NAME, **payload))] * 3)
    extractor = SchemaFilterExtractor(model, budget=lambda: True)
    facade = create_read_only_facade(kind="memory", store=store)
    return RAGAgent(facade, extractor=extractor, fallback=_no_fallback, now=lambda: NOW), model


class TestShapeThroughTheAgent:
    def test_a_grouping_the_rules_miss_is_counted_per_group(self, store: MemoryStore) -> None:
        """'leads in each pipeline phase': the rules read no column; the model's status is used."""
        agent, _ = _agent(store, shaped(group_by=["status"]))
        data = agent.run("how many leads in each pipeline phase", return_json=True)
        aggregates = data["metadata"]["aggregates"]
        assert data["records"] == [] and aggregates["group_by"] == ["status"]
        counts = {g["keys"]["status"]: g["values"]["count"] for g in aggregates["groups"]}
        assert counts == {"new": 1, "qualified": 2}

    def test_an_average_per_group_is_computed(self, store: MemoryStore) -> None:
        """'average score by status': rules read the grouping, the model the metric."""
        agent, model = _agent(store, shaped(metrics=[{"function": "avg", "column": "score"}]))
        data = agent.run("average score of leads by status", return_json=True)
        assert len(model.requests) == 1
        groups = {
            g["keys"]["status"]: g["values"] for g in data["metadata"]["aggregates"]["groups"]
        }
        assert float(groups["qualified"]["avg:score"]) == 6
        jsonschema.validate(data, envelope_json_schema())
        assert groups["new"]["count"] == 1

    def test_the_model_asks_for_related_rows(self, store: MemoryStore) -> None:
        """'the lead named ann alongside conversations' includes conversations."""
        agent, _ = _agent(
            store, shaped(cond("email", "icontains", "ann"), include=["conversations"])
        )
        data = agent.run("the lead named ann alongside conversations", return_json=True)
        [record] = data["records"]
        assert len(record["related"]["conversations"]) == 2
        jsonschema.validate(data, envelope_json_schema())

    def test_rules_win_on_grouping(self) -> None:
        """The rules' 'by status' stays when the model groups by something else."""

        def extract(text: str, table: str) -> Understanding:
            return Understanding(group_by=("score",), metrics=("avg:score",))

        found = understand_request(
            "average score of leads by status",
            table=None,
            explicit=None,
            count_only=None,
            now=dt.datetime(2025, 5, 7, tzinfo=dt.UTC),
            extract=extract,
        )
        assert found.group_by == ("status",)
        assert found.metrics == ("avg:score",)

    def test_a_model_reply_in_prose_shapes_nothing(self, store: MemoryStore) -> None:
        """A model that does not answer the schema is no grouping, and no crash."""
        model = ScriptedChatModel(script=[AIMessage(content="I think by status?")] * 2)
        extractor = SchemaFilterExtractor(model, budget=lambda: True)
        facade = create_read_only_facade(kind="memory", store=store)
        agent = RAGAgent(facade, extractor=extractor, fallback=None, now=lambda: NOW)
        data = agent.run("leads split along their lifecycle phase", return_json=True)
        assert data["metadata"].get("aggregates") is None
