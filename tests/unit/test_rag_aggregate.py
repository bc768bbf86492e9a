"""Aggregate runs: the grouping rules, run() and RAGAgent.aggregate, the two tools."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import jsonschema
import pytest

from persistence import Filter, MemoryStore, Op, create_persistence_agent, create_read_only_facade
from rag_agent import FallbackRequest, FallbackResult, RAGAgent, build_tools
from rag_agent.envelope import envelope_json_schema
from rag_agent.understanding.filters import understand
from rag_agent.untrusted import unwrap_boundary

NOW = dt.datetime(2025, 6, 18, 12, tzinfo=dt.UTC)
LEADS = [
    {"client_id": 7, "campaign_id": 3, "status": "qualified", "score": 8},
    {"client_id": 7, "campaign_id": 4, "status": "qualified", "score": 5},
    {"client_id": 7, "campaign_id": 3, "status": "qualified", "score": 9},
    {"client_id": 7, "campaign_id": 3, "status": "new", "score": None},
    {"client_id": 8, "campaign_id": 3, "status": "qualified", "score": 1},
]


def _no_fallback(request: FallbackRequest) -> FallbackResult:
    raise AssertionError(f"the fallback was called for {request.text!r}")


@pytest.fixture
def store() -> MemoryStore:
    store = MemoryStore()
    create_persistence_agent(kind="memory", store=store).batch("leads", LEADS)
    return store


@pytest.fixture
def agent(store: MemoryStore) -> RAGAgent:
    facade = create_read_only_facade(kind="memory", store=store)
    return RAGAgent(facade, fallback=_no_fallback, now=lambda: NOW)


class TestGroupingRules:
    @pytest.mark.parametrize(
        ("text", "table", "group_by"),
        [
            ("how many leads by status", "leads", ("status",)),
            ("qualified leads per campaign", "leads", ("campaign_id",)),
            ("campaigns broken down by channel", "campaigns", ("channel",)),
            ("conversations grouped by channel", "conversations", ("channel",)),
            ("leads for each client", "leads", ("client_id",)),
            ("leads of client 7 by campaign and status", "leads", ("campaign_id", "status")),
            ("staging leads split by source", "staging_leads", ("source",)),
        ],
    )
    def test_groupings(self, text: str, table: str, group_by: tuple[str, ...]) -> None:
        """A grouping phrase gives the columns to count by, on the table the text names."""
        found = understand(text, now=NOW)
        assert (found.table or "leads", found.group_by) == (table, group_by)

    @pytest.mark.parametrize(
        "text", ["leads sorted by score", "leads per campaign 5", "leads created by Bob"]
    )
    def test_not_groupings(self, text: str) -> None:
        """An order, a reference to one record or a name after 'by' is no grouping."""
        assert understand(text, now=NOW).group_by == ()

    def test_reference_after_per_is_a_condition(self) -> None:
        """'per campaign 5' stays a reference to campaign 5."""
        found = understand("leads per campaign 5", now=NOW)
        assert [(c.column, c.value) for c in found.conditions] == [("campaign_id", 5)]

    def test_column_the_table_has_not_is_ignored(self) -> None:
        """'messages by status' groups nothing and says why."""
        found = understand("messages by status", now=NOW)
        assert found.group_by == ()
        assert [i.reason for i in found.ignored] == ["messages cannot be grouped by status"]


class TestAggregateRun:
    def test_count_per_group_with_conditions(self, agent: RAGAgent) -> None:
        """'how many qualified leads does client 7 have, by campaign?' counts per campaign."""
        envelope = agent.run(
            "how many qualified leads does client 7 have, by campaign?", return_json=True
        )
        metadata = envelope["metadata"]
        assert envelope["records"] == [] and metadata["total_count"] == 3
        assert metadata["aggregates"] == {
            "group_by": ["campaign_id"],
            "metrics": ["count"],
            "groups": [
                {"keys": {"campaign_id": 3}, "values": {"count": 2}},
                {"keys": {"campaign_id": 4}, "values": {"count": 1}},
            ],
            "capped": False,
            "total_groups": 2,
        }
        assert "has_more" not in metadata
        jsonschema.validate(envelope, envelope_json_schema())

    def test_grouping_needs_no_condition_and_no_fallback(self, agent: RAGAgent) -> None:
        """'leads by status' counts the whole table (numbers, never rows); no fallback."""
        envelope = agent.run("leads by status", return_json=True)
        groups = envelope["metadata"]["aggregates"]["groups"]
        assert [(g["keys"]["status"], g["values"]["count"]) for g in groups] == [
            ("new", 1),
            ("qualified", 4),
        ]
        assert envelope["records"] == [] and "fallback" not in envelope["metadata"]


class TestRAGAgentAggregate:
    def test_exact_numbers_are_decimal_strings(self, agent: RAGAgent) -> None:
        """avg of an integer column is an exact decimal, given as its canonical string."""
        envelope = agent.aggregate(
            "leads",
            [Filter("client_id", Op.EQ, "7")],
            group_by=["campaign_id"],
            metrics=["count", "avg:score", "max:score"],
            return_json=True,
        )
        groups = envelope["metadata"]["aggregates"]["groups"]
        assert groups[0]["values"] == {
            "count": 3,
            "avg:score": "8.5000000000000000",
            "max:score": 9,
        }
        assert envelope["metadata"]["filters"] == [
            {"column": "client_id", "op": "eq", "value": 7, "source": "tool"}
        ]
        jsonschema.validate(envelope, envelope_json_schema())

    def test_cached_until_a_write(self, agent: RAGAgent, store: MemoryStore) -> None:
        """The same aggregate is a cache hit until the table is written to."""
        first = agent.aggregate("leads", group_by=["status"])
        second = agent.aggregate("leads", group_by=["status"])
        assert (first.metadata.cache, second.metadata.cache) == ("miss", "hit")
        create_persistence_agent(kind="memory", store=store).write("leads", {"status": "won"})
        third = agent.aggregate("leads", group_by=["status"])
        assert third.metadata.cache == "miss" and third.metadata.total_count == 6

    @pytest.mark.parametrize(
        "options",
        [
            {"group_by": ["password"]},
            {"group_by": "status"},
            {"metrics": ["sum:status"]},
            {"metrics": [["count"]]},
            {"limit": "10"},
        ],
    )
    def test_bad_input_is_an_error_envelope(self, agent: RAGAgent, options: dict[str, Any]) -> None:
        """Unknown columns, bad shapes and impossible metrics never raise."""
        envelope = agent.aggregate("leads", **options)
        assert envelope.metadata.error is not None and envelope.records == []

    def test_table_outside_the_allow_list(self, agent: RAGAgent) -> None:
        """A table outside the allow-list is refused in the envelope."""
        envelope = agent.aggregate("secrets")
        assert envelope.metadata.error is not None
        assert envelope.metadata.error.type == "TableNotAllowedError"


class TestAggregateTools:
    def test_count_rows(self, agent: RAGAgent) -> None:
        """count_rows answers the number of matches and no record."""
        count_rows = build_tools(agent, content="full")[4]
        envelope = json.loads(
            unwrap_boundary(count_rows.invoke({"table": "leads", "filters": {"client_id": 7}}))
        )
        assert envelope["records"] == [] and envelope["metadata"]["total_count"] == 4

    def test_aggregate_table(self, agent: RAGAgent) -> None:
        """aggregate_table groups with ranges and metrics, as a tool call."""
        aggregate_table = build_tools(agent, content="full")[5]
        message = aggregate_table.invoke(
            {
                "name": "aggregate_table",
                "args": {
                    "table": "leads",
                    "ranges": [{"column": "score", "gte": 5}],
                    "group_by": ["status"],
                    "metrics": ["count", "sum:score"],
                },
                "id": "call_1",
                "type": "tool_call",
            }
        )
        envelope = json.loads(unwrap_boundary(message.content))
        assert envelope["metadata"]["aggregates"]["groups"] == [
            {"keys": {"status": "qualified"}, "values": {"count": 3, "sum:score": 22}}
        ]
        assert message.artifact.metadata.total_count == 3

    @pytest.mark.parametrize(
        "args",
        [
            {"table": "leads", "group_by": ["a", "b", "c", "d"]},
            {"table": "leads", "metrics": []},
            {"table": "leads", "metrics": ["drop:score"]},
            {"table": "secrets"},
            "not json",
        ],
    )
    def test_malformed_input_is_an_envelope(self, agent: RAGAgent, args: Any) -> None:
        """Malformed or refused input answers an error envelope; the tool never raises."""
        envelope = json.loads(unwrap_boundary(build_tools(agent, content="full")[5].invoke(args)))
        assert envelope["records"] == [] and envelope["metadata"]["error"]["type"]
