"""Schema discovery tools: ``list_tables`` and ``describe_table``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from persistence import AccessPolicy, MemoryBackend, MemoryStore, ReadOnlyPersistenceFacade
from rag_agent import RAGAgent, build_tools
from rag_agent.ops.sample import load_sample
from rag_agent.tools.discovery import DescribeTableTool, describe_table
from rag_agent.untrusted import unwrap_boundary


@pytest.fixture
def store() -> MemoryStore:
    """The bundled sample data."""
    store = MemoryStore()
    load_sample(store)
    return store


def _tools(store: MemoryStore, policy: AccessPolicy | None = None) -> dict[str, Any]:
    facade = ReadOnlyPersistenceFacade(MemoryBackend(store), policy or AccessPolicy.read_only())
    return {tool.name: tool for tool in build_tools(RAGAgent(facade), content="full")}


class TestListTables:
    def test_lists_the_allow_list(self, store: MemoryStore) -> None:
        """Only the tables the policy allows are listed, sorted."""
        tools = _tools(store, AccessPolicy.read_only(tables=["leads", "messages"]))
        assert json.loads(tools["list_tables"].invoke({})) == {"tables": ["leads", "messages"]}


class TestDescribeTable:
    def test_columns_types_operators_and_relations(self, store: MemoryStore) -> None:
        """Every readable column with its type and operators; the relations to include."""
        described = json.loads(_tools(store)["describe_table"].invoke({"table": "leads"}))
        columns = {c["name"]: c for c in described["columns"]}
        assert columns["score"] == {
            "name": "score",
            "type": "integer",
            "kind": "integer",
            "operators": ["eq", "neq", "gt", "gte", "lt", "lte", "in", "is_null"],
        }
        assert "icontains" in columns["company_name"]["operators"]
        assert "icontains" not in columns["score"]["operators"]
        assert described["relations"] == [
            {
                "name": "conversations",
                "table": "conversations",
                "on": "conversations.lead_id = leads.id",
            },
            {"name": "inquiries", "table": "inquiries", "on": "inquiries.lead_id = leads.id"},
        ]
        assert "sample" not in described

    def test_the_column_policy_applies(self, store: MemoryStore) -> None:
        """Hidden columns are not described, nor shown in samples; relations to a table outside
        the allow-list are not offered."""
        policy = AccessPolicy.read_only(
            tables=["leads", "inquiries"], columns={"leads": ["id", "email"]}
        )
        tool = _tools(store, policy)["describe_table"]
        text = tool.invoke({"table": "leads", "sample_rows": 2})
        assert "<<untrusted-data " in text  # sample rows are row text: data, never orders
        described = json.loads(unwrap_boundary(text))
        assert [c["name"] for c in described["columns"]] == ["id", "email"]
        assert [r["name"] for r in described["relations"]] == ["inquiries"]
        assert len(described["sample"]) == 2
        assert all(set(r) == {"id", "email", "provenance"} for r in described["sample"])

    @pytest.mark.parametrize(
        "raw",
        [
            {"table": "secrets"},
            {"table": "leads; drop table leads"},
            {"table": "leads", "sample_rows": 6},
            {"table": "leads", "sample_rows": -1},
            {},
            "{bad",
            7,
        ],
    )
    def test_bad_input_is_an_error_answer(self, store: MemoryStore, raw: Any) -> None:
        """A refused table or malformed input answers an error, never raises."""
        answer = json.loads(_tools(store)["describe_table"].invoke(raw))
        assert set(answer) == {"error"}
        assert answer["error"]["type"] in {"TableNotAllowedError", "ToolInputError"}

    def test_without_an_agent_it_says_so(self) -> None:
        """A schema-only tool answers an error instead of reading."""
        answer = json.loads(DescribeTableTool().invoke({"table": "leads"}))
        assert answer["error"]["type"] == "ToolInputError"

    def test_describe_table_function(self, store: MemoryStore) -> None:
        """The function behind the tool reads no row: an empty store is described alike, but
        for the values the database's vocabulary learned of its few-valued columns."""
        full = ReadOnlyPersistenceFacade(MemoryBackend(store), AccessPolicy.read_only())
        empty = ReadOnlyPersistenceFacade(MemoryBackend(MemoryStore()), AccessPolicy.read_only())

        def without_values(described: dict[str, Any]) -> dict[str, Any]:
            columns = [{k: v for k, v in c.items() if k != "values"} for c in described["columns"]]
            return {**described, "columns": columns}

        described = describe_table(full, "messages")
        assert without_values(described) == describe_table(empty, "messages")
        direction = next(c for c in described["columns"] if c["name"] == "direction")
        stored = {row["direction"] for row in store.rows("messages") if row.get("direction")}
        assert set(direction["values"]) == stored
