"""The compact view: what the tools hand a model, while the artifact keeps the full envelope."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import ToolMessage

from persistence import MemoryStore
from rag_agent import Envelope, RAGAgent, build_tools, create_rag_agent
from rag_agent.envelope import OUTSIDE_ROW, build_records
from rag_agent.envelope.assemble import error_envelope
from rag_agent.envelope.compact import (
    COMPACT_HEADER,
    carries_rows,
    compact_records,
    compact_text,
    compact_view,
)
from rag_agent.mcp_server import create_mcp_server
from rag_agent.ops.sample import load_sample
from rag_agent.untrusted import unwrap_boundary
from tests.support.mcp import in_process, text_of

NOW = dt.datetime(2026, 5, 6, 7, 8, 9, tzinfo=dt.UTC)


@pytest.fixture
def agent(store: MemoryStore) -> RAGAgent:
    load_sample(store)
    return create_rag_agent(kind="memory", store=store, llm=None)


@pytest.fixture
def tools(agent: RAGAgent) -> dict[str, Any]:
    return {tool.name: tool for tool in build_tools(agent)}


def call(tool: Any, args: dict[str, Any]) -> ToolMessage:
    message = tool.invoke({"name": tool.name, "args": args, "id": "c1", "type": "tool_call"})
    assert isinstance(message, ToolMessage)
    return message


def content_json(text: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(unwrap_boundary(text))
    return data


def own_columns(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in OUTSIDE_ROW}


class TestCompactView:
    def test_a_bounded_total_says_so(self) -> None:
        """A model must know a total is a lower bound; an exact one carries no flag."""
        meta = {"source": "persistence.leads", "total_count": 51, "has_more": True}
        exact = compact_view({"metadata": meta, "records": []})
        bounded = compact_view({"metadata": {**meta, "total_exact": False}, "records": []})
        assert "total_exact" not in exact
        assert bounded["total_exact"] is False and bounded["total_count"] == 51

    def test_rows_are_the_records_without_provenance(self, tools: dict[str, Any]) -> None:
        """Each row is its record's own columns; paging hints and applied filters are kept."""
        message = call(tools["query_leads"], {"company": "Acme", "limit": 2})
        envelope = message.artifact
        assert isinstance(envelope, Envelope)
        full = envelope.to_json()
        view = content_json(message.text)
        assert view == compact_view(envelope)
        assert view["rows"] == [own_columns(r) for r in full["records"]]
        assert view["total_count"] == full["metadata"]["total_count"] > 2
        assert view["has_more"] is True and view["next_offset"] == 2
        assert view["applied"] == full["metadata"]["filters"]
        assert view["table"] == "leads"
        assert "row_hash" not in message.text and "provenance" not in message.text

    def test_row_text_is_bounded_and_smaller(self, tools: dict[str, Any]) -> None:
        """Content with rows sits between untrusted-data markers and is smaller than the full
        envelope the artifact holds."""
        message = call(tools["query_table"], {"table": "leads", "limit": 10})
        assert message.text.startswith(COMPACT_HEADER + "\n<<untrusted-data ")
        full = json.dumps(message.artifact.to_json(), ensure_ascii=False)
        assert len(message.text) < len(full) / 2

    def test_errors_and_counts_are_bare_json(self, tools: dict[str, Any]) -> None:
        """Without row text there is nothing to bound: an error or a count is bare JSON."""
        refused = call(tools["query_table"], {"table": "secrets"})
        view = json.loads(refused.text)
        assert view["error"]["type"] == "TableNotAllowedError" and "rows" not in view
        counted = call(tools["count_rows"], {"table": "leads"})
        assert "<<untrusted-data" not in counted.text
        assert json.loads(counted.text)["total_count"] == counted.artifact.metadata.total_count

    def test_ignored_parts_are_shown(self, tools: dict[str, Any]) -> None:
        """What the request asked for but was not applied reaches the model."""
        message = call(tools["query_leads"], {"query": "leads at Acme with status nonsense"})
        ignored = message.artifact.metadata.ignored
        if ignored:
            assert content_json(message.text)["ignored"] == [i.model_dump() for i in ignored]
        else:
            assert "ignored" not in content_json(message.text)

    def test_aggregates_keep_the_groups(self, tools: dict[str, Any]) -> None:
        """An aggregate's groups are the answer: they are kept, and bounded (keys are data)."""
        message = call(tools["aggregate_table"], {"table": "leads", "group_by": ["status"]})
        view = content_json(message.text)
        groups = message.artifact.to_json()["metadata"]["aggregates"]["groups"]
        assert view["aggregates"]["groups"] == groups and groups
        assert "<<untrusted-data " in message.text

    def test_related_rows_are_compact_too(self, tools: dict[str, Any]) -> None:
        """Related rows nest under their parent row, without provenance either."""
        relations = content_json(call(tools["describe_table"], {"table": "leads"}).text)
        if not relations["relations"]:
            pytest.skip("the sample declares no relation for leads")
        name = relations["relations"][0]["name"]
        message = call(tools["query_table"], {"table": "leads", "include": [name], "limit": 3})
        full = message.artifact.to_json()
        view = content_json(message.text)
        for row, record in zip(view["rows"], full["records"], strict=True):
            kids = record.get("related", {}).get(name, [])
            assert row.get("related", {}).get(name, []) == [own_columns(k) for k in kids]

    def test_full_content_on_request(self, agent: RAGAgent) -> None:
        """build_tools(content="full") gives the whole envelope as content, as before."""
        tool = build_tools(agent, content="full")[0]
        message = call(tool, {"company": "Acme"})
        assert content_json(message.text) == message.artifact.to_json()

    def test_unknown_content_format_is_refused(self, agent: RAGAgent) -> None:
        """A typo in content is a developer's mistake, refused at build time."""
        with pytest.raises(ValueError, match="compact"):
            build_tools(agent, content="fulll")  # type: ignore[arg-type]

    def test_error_envelope_view(self) -> None:
        """An error envelope's view names the table, a zero count and the error."""
        view = compact_view(error_envelope("leads", ValueError("bad")))
        assert view == {
            "table": "leads",
            "total_count": 0,
            "error": {"type": "ValueError", "message": "bad"},
        }
        assert not carries_rows(view)
        assert json.loads(compact_text(error_envelope("leads", ValueError("bad")))) == view


class TestViewOfJson:
    def test_flags_and_a_fallback_answer(self) -> None:
        """A parsed envelope works too; flags appear only when set, a plain count's single
        group is left out (it repeats total_count)."""
        envelope = {
            "metadata": {
                "source": "agent",
                "total_count": 1,
                "fallback": "agent",
                "related_capped": True,
                "count_only": False,
                "aggregates": {
                    "group_by": [],
                    "metrics": ["count"],
                    "groups": [{"keys": {}, "values": {"count": 1}}],
                    "capped": False,
                },
            },
            "records": [],
        }
        assert compact_view(envelope) == {
            "table": "agent",
            "total_count": 1,
            "fallback": "agent",
            "related_capped": True,
        }


_VALUES = st.one_of(st.none(), st.integers(), st.text(max_size=20), st.booleans())


@given(st.lists(st.dictionaries(st.text(min_size=1, max_size=8), _VALUES, max_size=5)))
def test_compact_records_are_the_row_fields(rows: list[dict[str, Any]]) -> None:
    """For any rows, compact records are exactly the rows' fields, never their provenance."""
    rows = [{k: v for k, v in row.items() if k not in OUTSIDE_ROW} for row in rows]
    records = build_records(rows, source="persistence.leads", retrieved_at=NOW)
    assert compact_records(records) == rows
    as_json = [r.model_dump(mode="json") for r in records]
    assert compact_records(as_json) == rows


class TestDiscovery:
    def test_sample_rows_are_compact(self, tools: dict[str, Any]) -> None:
        """describe_table's sample rows reach the model without provenance; the artifact keeps
        the records with it."""
        message = call(tools["describe_table"], {"table": "leads", "sample_rows": 2})
        shown = content_json(message.text)["sample"]
        kept = message.artifact["sample"]
        assert shown == [own_columns(r) for r in kept] and len(shown) == 2
        assert all("provenance" in r for r in kept)
        assert "<<untrusted-data " in message.text


class TestMCP:
    def test_text_is_compact_and_structured_content_full(self, agent: RAGAgent) -> None:
        """An MCP answer: compact text for the model, the whole envelope as structured content."""

        async def work(client: Any) -> Any:
            return await client.call_tool("query_leads", {"company": "Acme", "limit": 2})

        result = in_process(create_mcp_server(agent), work)
        assert result.isError is False
        envelope = result.structuredContent
        assert envelope is not None and "provenance" in envelope["records"][0]
        text = text_of(result)
        assert content_json(text) == compact_view(envelope)
        assert "row_hash" not in text and "<<untrusted-data " in text

    def test_error_is_flagged(self, agent: RAGAgent) -> None:
        """An error envelope still answers isError: true, its text the compact error."""

        async def work(client: Any) -> Any:
            return await client.call_tool("query_table", {"table": "secrets"})

        result = in_process(create_mcp_server(agent), work)
        assert result.isError is True
        assert json.loads(text_of(result))["error"]["type"] == "TableNotAllowedError"
