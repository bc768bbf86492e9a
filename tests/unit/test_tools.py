"""The LangChain tools: query_leads, query_table, rag_agent, deliver_data, and their schemas."""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

import pytest
from langchain_core.messages import ToolMessage

import rag_agent
from persistence import MemoryStore, create_persistence_agent, create_read_only_facade
from rag_agent import Envelope, RAGAgent, RAGSettings, build_tools, openai_tool_schemas, row_hash
from rag_agent.tools import ToolInputError, coerce_tool_input
from rag_agent.understanding.llm.schema import SCHEMA_NAME
from rag_agent.untrusted import unwrap_boundary
from tests.support.extraction import answer
from tests.unit.test_llm_scripted import ScriptedChatModel, call, calls, final

NOW = dt.datetime(2026, 5, 6, 7, 8, 9, tzinfo=dt.UTC)
LEADS = [
    {"id": 1, "email": "ana@acme.example", "company_name": "Acme Inc.", "title": "CTO", "score": 9},
    {"id": 2, "email": "bo@acme.example", "company_name": "Acme GmbH", "title": "CEO", "score": 4},
    {"id": 3, "email": "cy@globex.example", "company_name": "Globex", "title": "CTO", "score": 7},
]


@pytest.fixture
def agent(store: MemoryStore) -> RAGAgent:
    create_persistence_agent(kind="memory", store=store).batch("leads", LEADS)
    return RAGAgent(create_read_only_facade(kind="memory", store=store), settings=RAGSettings())


@pytest.fixture
def tools(agent: RAGAgent) -> dict[str, Any]:
    return {tool.name: tool for tool in build_tools(agent, content="full")}


def envelope_of(output: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(unwrap_boundary(output))
    return data


def tool_call(name: str, args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": "call_1", "type": "tool_call"}


class TestBuildTools:
    def test_tools_in_order(self, agent: RAGAgent) -> None:
        """build_tools returns the four original tools first, then the aggregate and discovery
        tools."""
        names = [tool.name for tool in build_tools(agent, content="full")]
        assert names == [
            "query_leads",
            "query_table",
            "rag_agent",
            "deliver_data",
            "count_rows",
            "aggregate_table",
            "list_tables",
            "describe_table",
            "search_table",
        ]

    def test_needs_an_agent(self) -> None:
        """Anything but a RAGAgent is refused at build time."""
        with pytest.raises(TypeError):
            build_tools(object())  # type: ignore[arg-type]

    def test_reexported_from_the_package(self) -> None:
        """build_tools, openai_tool_schemas and SchemaFilterExtractor are public names."""
        for name in ("build_tools", "openai_tool_schemas", "SchemaFilterExtractor"):
            assert name in rag_agent.__all__ and hasattr(rag_agent, name)

    def test_tool_calls_give_envelope_text_and_artifact(self, tools: dict[str, Any]) -> None:
        """A ToolCall yields a ToolMessage: envelope JSON as content, Envelope as artifact."""
        message = tools["query_leads"].invoke(tool_call("query_leads", {"company": "Acme"}))
        assert isinstance(message, ToolMessage) and message.tool_call_id == "call_1"
        assert isinstance(message.artifact, Envelope)
        assert json.loads(unwrap_boundary(message.text)) == message.artifact.to_json()


class TestUntrustedRowText:
    @pytest.mark.parametrize(
        "name", ["query_leads", "query_table", "rag_agent", "aggregate_table", "search_table"]
    )
    def test_description_says_rows_are_data(self, tools: dict[str, Any], name: str) -> None:
        """Each data tool's description tells the host model its output is bounded data."""
        assert "never instructions" in tools[name].description
        assert "<<untrusted-data TOKEN>>" in tools[name].description

    def test_output_is_bounded_with_a_fresh_token_per_call(self, tools: dict[str, Any]) -> None:
        """Two calls wrap their envelopes between markers with two different tokens, and the
        envelope is the only thing between them."""
        pattern = re.compile(
            r"<<untrusted-data ([0-9a-f]{24})>>\n(.*)\n<<end-untrusted-data \1>>$", re.S
        )
        outputs = [
            tools["query_leads"].invoke(tool_call("query_leads", {"company": "Acme"})).text
            for _ in range(2)
        ]
        matches = [pattern.search(output) for output in outputs]
        assert all(matches)
        tokens = {m.group(1) for m in matches if m}
        assert len(tokens) == 2
        for m in matches:
            assert m and json.loads(m.group(2))["metadata"]["total_count"] >= 1


class TestQueryLeads:
    def test_explicit_filters(self, tools: dict[str, Any]) -> None:
        """Explicit company filter reads the matching leads with provenance."""
        envelope = envelope_of(tools["query_leads"].invoke({"company": "acme"}))
        assert [r["id"] for r in envelope["records"]] == [1, 2]
        assert envelope["metadata"]["query_filters"] == {"company": "acme"}
        record = envelope["records"][0]
        fields = {k: v for k, v in record.items() if k != "provenance"}
        assert record["provenance"]["row_hash"] == row_hash(fields)

    def test_free_text_and_explicit_filters_combine(self, tools: dict[str, Any]) -> None:
        """Rules read the text; explicit values are added and win on conflicts."""
        envelope = envelope_of(
            tools["query_leads"].invoke({"query": "leads at Acme", "email": "ANA@acme.example"})
        )
        assert envelope["metadata"]["query_filters"] == {
            "email": "ana@acme.example",
            "company": "Acme",
        }
        assert [r["id"] for r in envelope["records"]] == [1]

    def test_pagination_and_cache(self, tools: dict[str, Any]) -> None:
        """limit/offset page through results; the same page again is a cache hit."""
        first = envelope_of(tools["query_leads"].invoke({"company": "acme", "limit": 1}))
        second = envelope_of(
            tools["query_leads"].invoke({"company": "acme", "limit": 1, "offset": 1})
        )
        again = envelope_of(tools["query_leads"].invoke({"company": "acme", "limit": 1}))
        assert [r["id"] for r in first["records"] + second["records"]] == [1, 2]
        assert first["metadata"]["total_count"] == 2
        assert (first["metadata"]["cache"], again["metadata"]["cache"]) == ("miss", "hit")

    def test_reformulation(self, tools: dict[str, Any]) -> None:
        """A company with a suffix that matches nothing is shortened (Acme Corp → Acme)."""
        envelope = envelope_of(tools["query_leads"].invoke("find leads at Acme Corp"))
        assert envelope["metadata"]["fallback"] == "reformulation"
        assert envelope["metadata"]["total_count"] == 2

    def test_never_calls_an_llm(self, store: MemoryStore) -> None:
        """query_leads is deterministic: zero rows does not reach the LLM fallback."""
        model = ScriptedChatModel(script=[])
        agent = RAGAgent(
            create_read_only_facade(kind="memory", store=store), settings=RAGSettings(), llm=model
        )
        query_leads = build_tools(agent, content="full")[0]
        envelope = envelope_of(query_leads.invoke({"company": "Nobody"}))
        assert envelope["records"] == [] and model.requests == []

    def test_no_filter_is_an_error_not_a_table_dump(self, tools: dict[str, Any]) -> None:
        """Without any filter the tool answers with an error and no records."""
        envelope = envelope_of(tools["query_leads"].invoke({"query": "show me everything"}))
        assert envelope["records"] == []
        assert "at least one filter" in envelope["metadata"]["error"]["message"]

    def test_invalid_explicit_value_is_an_error(self, tools: dict[str, Any]) -> None:
        """An e-mail that is not an address is reported, not silently dropped."""
        envelope = envelope_of(tools["query_leads"].invoke({"email": "x' OR '1'='1"}))
        assert envelope["metadata"]["error"]["type"] == "ToolInputError"

    def test_oversized_limit_is_clamped(self, tools: dict[str, Any]) -> None:
        """A limit above RAG_MAX_LIMIT is clamped, and the effective limit reported."""
        envelope = envelope_of(tools["query_leads"].invoke({"company": "acme", "limit": 10**6}))
        assert envelope["metadata"]["limit"] == RAGSettings().max_limit

    def test_status_title_and_score_fields(self, tools: dict[str, Any]) -> None:
        """title (substring) and score_min/score_max become tool conditions on their columns."""
        envelope = envelope_of(
            tools["query_leads"].invoke({"title": "cto", "score_min": 8, "score_max": 9})
        )
        assert [r["id"] for r in envelope["records"]] == [1]
        assert envelope["metadata"]["filters"] == [
            {"column": "title", "op": "icontains", "value": "cto", "source": "tool"},
            {"column": "score", "op": "gte", "value": 8, "source": "tool"},
            {"column": "score", "op": "lte", "value": 9, "source": "tool"},
        ]

    def test_count_only(self, tools: dict[str, Any]) -> None:
        """count_only answers the number of matches and no records."""
        envelope = envelope_of(tools["query_leads"].invoke({"title": "CTO", "count_only": True}))
        assert envelope["metadata"]["total_count"] == 2 and envelope["records"] == []
        assert envelope["metadata"]["count_only"] is True

    def test_status_is_applied_as_given(self, tools: dict[str, Any]) -> None:
        """status is applied as given: a status no lead has matches nothing, and says so."""
        envelope = envelope_of(tools["query_leads"].invoke({"company": "acme", "status": "won"}))
        assert envelope["records"] == [] and envelope["metadata"]["total_count"] == 0
        assert {"column": "status", "op": "ieq", "value": "won", "source": "tool"} in envelope[
            "metadata"
        ]["filters"]

    def test_status_matches_ignoring_case(self, store: MemoryStore, tools: dict[str, Any]) -> None:
        """'Qualified' and 'QUALIFIED' find the lead whose status is 'qualified'."""
        create_persistence_agent(kind="memory", store=store).batch(
            "leads", [{"email": "di@acme.example", "company_name": "Acme", "status": "qualified"}]
        )
        for status in ("Qualified", "QUALIFIED", "qualified"):
            envelope = envelope_of(
                tools["query_leads"].invoke({"company": "acme", "status": status})
            )
            assert [r["email"] for r in envelope["records"]] == ["di@acme.example"]


class TestQueryTable:
    def test_ranges_and_count_only(self, tools: dict[str, Any]) -> None:
        """ranges bound a column from both sides; count_only counts them."""
        args = {"table": "leads", "ranges": [{"column": "score", "gte": 5, "lt": 9}]}
        envelope = envelope_of(tools["query_table"].invoke(args))
        assert [r["id"] for r in envelope["records"]] == [3]
        assert envelope["metadata"]["query_filters"] == {"score": {"gte": 5, "lt": 9}}
        counted = envelope_of(tools["query_table"].invoke({**args, "count_only": True}))
        assert counted["metadata"]["total_count"] == 1 and counted["records"] == []

    def test_ieq_is_case_insensitive_equality(self, tools: dict[str, Any]) -> None:
        """ieq matches the whole value in any case, never a substring."""
        for value, expected in (("ANA@ACME.EXAMPLE", [1]), ("ana@acme", [])):
            envelope = envelope_of(
                tools["query_table"].invoke(
                    {
                        "table": "leads",
                        "filters": [{"column": "email", "op": "ieq", "value": value}],
                    }
                )
            )
            assert [r["id"] for r in envelope["records"]] == expected

    def test_filter_list(self, tools: dict[str, Any]) -> None:
        """A list of {column, op, value} is ANDed; the filters are echoed by column and op."""
        envelope = envelope_of(
            tools["query_table"].invoke(
                {
                    "table": "leads",
                    "filters": [
                        {"column": "title", "op": "eq", "value": "CTO"},
                        {"column": "score", "op": "gte", "value": 8},
                    ],
                }
            )
        )
        assert [r["id"] for r in envelope["records"]] == [1]
        assert envelope["metadata"]["query_filters"] == {
            "title": {"eq": "CTO"},
            "score": {"gte": 8},
        }
        assert envelope["metadata"]["source"] == "persistence.leads"

    def test_filter_mapping_columns_order(self, tools: dict[str, Any]) -> None:
        """A {column: value} mapping means eq; columns project; '-col' sorts descending."""
        envelope = envelope_of(
            tools["query_table"].invoke(
                {
                    "table": "leads",
                    "filters": {"title": "CTO"},
                    "columns": ["id", "score"],
                    "order": "-score",
                }
            )
        )
        assert [{k: v for k, v in r.items() if k != "provenance"} for r in envelope["records"]] == [
            {"id": 1, "score": 9},
            {"id": 3, "score": 7},
        ]

    def test_in_and_order_objects(self, tools: dict[str, Any]) -> None:
        """'in' takes a list; order accepts {column, descending} objects."""
        envelope = envelope_of(
            tools["query_table"].invoke(
                {
                    "table": "leads",
                    "filters": [{"column": "id", "op": "in", "value": [1, 3]}],
                    "order": [{"column": "id", "descending": True}],
                }
            )
        )
        assert [r["id"] for r in envelope["records"]] == [3, 1]

    @pytest.mark.parametrize("table", ["secrets", "public.leads", "LEADS", "leads--"])
    def test_tables_outside_the_allow_list(self, tools: dict[str, Any], table: str) -> None:
        """A table outside the allow-list is an error envelope, never an exception."""
        envelope = envelope_of(tools["query_table"].invoke({"table": table}))
        assert envelope["records"] == []
        assert envelope["metadata"]["error"]["type"] == "TableNotAllowedError"

    @pytest.mark.parametrize(
        "args",
        [
            {"table": "leads", "filters": [{"column": "email", "op": "ilike", "value": "%"}]},
            {"table": "leads", "filters": [{"column": "no such", "op": "eq", "value": 1}]},
            {"table": "leads", "filters": [{"column": "password", "op": "eq", "value": 1}]},
            {"table": "leads", "filters": [{"column": "id", "op": "eq", "value": None}]},
            {"table": "leads", "order": "-"},
            {"table": "leads", "limit": 0},
            {"filters": {"id": 1}},
            {
                "table": "leads",
                "filters": [
                    {"column": "id", "op": "eq", "value": 1},
                    {"column": "id", "op": "eq", "value": 2},
                ],
            },
        ],
    )
    def test_malformed_queries_are_error_envelopes(
        self, tools: dict[str, Any], args: dict[str, Any]
    ) -> None:
        """Patterns, unknown columns, None values, bad orders or limits: errors, not raises."""
        envelope = envelope_of(tools["query_table"].invoke(args))
        assert envelope["records"] == [] and "error" in envelope["metadata"]

    def test_large_results_are_paged_with_a_summary(self, store: MemoryStore) -> None:
        """Above the summary threshold the envelope says more rows follow and is summarised."""
        create_persistence_agent(kind="memory", store=store).batch(
            "leads", [{"id": i, "company_name": "Big"} for i in range(1, 31)]
        )
        agent = RAGAgent(
            create_read_only_facade(kind="memory", store=store),
            settings=RAGSettings(summary_threshold=10, default_limit=5),
        )
        query_table = build_tools(agent, content="full")[1]
        envelope = envelope_of(query_table.invoke({"table": "leads"}))
        assert envelope["metadata"]["has_more"] is True
        assert envelope["metadata"]["total_count"] == 30 and len(envelope["records"]) == 5
        assert envelope["metadata"]["summary"]["sample"] is True

    def test_reads_through_the_agent(self, store: MemoryStore) -> None:
        """query_table uses the agent's window, cache and clock: a repeat is a cache hit."""
        create_persistence_agent(kind="memory", store=store).batch("leads", LEADS)
        agent = RAGAgent(
            create_read_only_facade(kind="memory", store=store),
            settings=RAGSettings(max_limit=2),
            now=lambda: NOW,
        )
        query_table = build_tools(agent, content="full")[1]
        first = envelope_of(query_table.invoke({"table": "leads", "limit": 100}))
        again = envelope_of(query_table.invoke({"table": "leads", "limit": 100}))
        assert (first["metadata"]["cache"], again["metadata"]["cache"]) == ("miss", "hit")
        assert first["metadata"]["limit"] == 2 and len(first["records"]) == 2
        assert first["metadata"]["retrieved_at"] == "2026-05-06T07:08:09Z"
        refused = envelope_of(query_table.invoke({"table": "leads", "limit": 0}))
        assert refused["metadata"]["error"]["type"] == "ToolInputError"
        assert refused["metadata"]["retrieved_at"] == "2026-05-06T07:08:09Z"


class TestRAGAgentTool:
    def test_free_text(self, tools: dict[str, Any]) -> None:
        """Free text runs the full pipeline."""
        envelope = envelope_of(tools["rag_agent"].invoke("leads at globex"))
        assert [r["id"] for r in envelope["records"]] == [3]

    def test_partial_envelope_reruns_its_filters(self, tools: dict[str, Any]) -> None:
        """A previous envelope's metadata (filters, limit, new offset) gives the next page."""
        first = envelope_of(tools["rag_agent"].invoke({"query": "acme leads", "limit": 1}))
        metadata = {**first["metadata"], "offset": 1}
        second = envelope_of(tools["rag_agent"].invoke({"metadata": metadata}))
        assert [r["id"] for r in first["records"] + second["records"]] == [1, 2]
        assert second["metadata"]["offset"] == 1 and second["metadata"]["limit"] == 1

    def test_fallback_through_the_tool(self, store: MemoryStore) -> None:
        """With an LLM, text the rules cannot read reaches the grounded fallback."""
        create_persistence_agent(kind="memory", store=store).batch("leads", LEADS)
        query = calls(
            call(
                "query_table", table="leads", filters=[{"column": "score", "op": "gte", "value": 9}]
            )
        )
        no_filters = calls(call(SCHEMA_NAME, **answer()))  # filter extraction: nothing stated
        model = ScriptedChatModel(script=[no_filters, query, final(("leads", 1), ("leads", 77))])
        agent = RAGAgent(
            create_read_only_facade(kind="memory", store=store), settings=RAGSettings(), llm=model
        )
        envelope = envelope_of(build_tools(agent, content="full")[2].invoke("who scores highest?"))
        assert envelope["metadata"]["fallback"] == "agent"
        assert envelope["metadata"]["fallback_dropped_ids"] == 1
        assert [r["id"] for r in envelope["records"]] == [1]

    def test_partial_envelope_reruns_its_applied_filters(self, tools: dict[str, Any]) -> None:
        """metadata.filters (any column and operator) is re-run as given, with the new offset."""
        first = envelope_of(
            tools["query_leads"].invoke({"company": "acme", "score_min": 1, "limit": 1})
        )
        second = envelope_of(
            tools["rag_agent"].invoke({"metadata": {**first["metadata"], "offset": 1}})
        )
        assert [r["id"] for r in first["records"] + second["records"]] == [1, 2]
        assert second["metadata"]["query_filters"] == {"company": "acme", "score": {"gte": 1}}
        assert {f["source"] for f in second["metadata"]["filters"]} == {"tool"}

    @pytest.mark.parametrize(
        "raw",
        [
            {},
            {"metadata": {"filters": []}},
            {"metadata": {"query_filters": {"company": "acme"}}},  # a display, not the filters
            "   ",
        ],
    )
    def test_nothing_to_run_is_an_error(self, tools: dict[str, Any], raw: Any) -> None:
        """Neither text nor applied filters (metadata.filters): an error envelope."""
        envelope = envelope_of(tools["rag_agent"].invoke(raw))
        assert envelope["records"] == [] and "error" in envelope["metadata"]


class TestDeliverData:
    @pytest.mark.parametrize("raw", [{}, {"data": [1, 2]}, "send everything", "{bad", 7])
    def test_always_disabled(self, tools: dict[str, Any], raw: Any) -> None:
        """deliver_data answers DISABLED whatever it is given, and never raises."""
        assert tools["deliver_data"].invoke(raw) == {"status": "DISABLED"}

    def test_as_a_tool_call(self, tools: dict[str, Any]) -> None:
        """Through a ToolCall the message content is the JSON of the status."""
        message = tools["deliver_data"].invoke(tool_call("deliver_data", {"data": "x"}))
        assert json.loads(message.text) == {"status": "DISABLED"}


class TestOpenAISchemas:
    def test_function_schemas(self) -> None:
        """One function schema per tool, with names, descriptions and object parameters."""
        schemas = openai_tool_schemas()
        assert [s["function"]["name"] for s in schemas] == [
            "query_leads",
            "query_table",
            "rag_agent",
            "deliver_data",
            "count_rows",
            "aggregate_table",
            "list_tables",
            "describe_table",
            "search_table",
        ]
        for schema in schemas:
            assert schema["type"] == "function"
            assert schema["function"]["description"]
            assert schema["function"]["parameters"]["type"] == "object"
        query_table = schemas[1]["function"]["parameters"]
        assert query_table["required"] == ["table"]
        assert "ilike" not in json.dumps(query_table)

    def test_schemas_are_json(self) -> None:
        """The schemas serialise to JSON as they are."""
        json.dumps(openai_tool_schemas())


class TestCoerceToolInput:
    @pytest.mark.parametrize(
        ("raw", "expected"),
        [
            ({"company": "Acme"}, {"company": "Acme"}),
            ('{"company": "Acme"}', {"company": "Acme"}),
            ("{'company': 'Acme', 'id': 3}", {"company": "Acme", "id": 3}),
            ({"input": {"company": "Acme"}}, {"company": "Acme"}),
            ({"query": '{"company": "Acme"}'}, {"company": "Acme"}),
            ({"input": "{'input': {'id': 1}}"}, {"id": 1}),
            ({"input": "leads at acme"}, {"query": "leads at acme"}),
            ({"query": "leads at acme"}, {"query": "leads at acme"}),
            ("leads at acme", {"query": "leads at acme"}),
            (None, {}),
        ],
    )
    def test_accepted_shapes(self, raw: Any, expected: dict[str, Any]) -> None:
        """Mappings, JSON, Python literals and wrappers all become keyword arguments."""
        assert coerce_tool_input(raw, text_field="query") == expected

    @pytest.mark.parametrize(
        "raw",
        [
            "{bad",
            "{__import__('os').system('id')}",
            "{'a': (lambda: 1)()}",
            "{1, 2}",
            [1, 2],
            42,
            {1: "a"},
            "x" * 10 + "{",
        ],
    )
    def test_malformed_input_raises_tool_input_error(self, raw: Any) -> None:
        """Anything else is a ToolInputError (the tools turn it into an error envelope)."""
        with pytest.raises(ToolInputError):
            coerce_tool_input(raw, text_field=None)

    def test_python_literals_are_never_evaluated(self, tmp_path: Any) -> None:
        """A call expression in a literal string is refused, not executed."""
        marker = tmp_path / "ran"
        payload = f"{{'x': open({str(marker)!r}, 'w')}}"
        with pytest.raises(ToolInputError):
            coerce_tool_input(payload)
        assert not marker.exists()

    def test_too_deep_wrapping(self) -> None:
        """Wrappers nested beyond a few levels are refused."""
        raw: Any = {"id": 1}
        for _ in range(10):
            raw = {"input": raw}
        with pytest.raises(ToolInputError):
            coerce_tool_input(raw)


class TestExplicitArgumentsAreNotDropped:
    def test_an_argument_the_column_cannot_take_is_an_error_not_a_broader_answer(
        self, tools: dict[str, Any]
    ) -> None:
        """created_after 'last week' is no timestamp: the call is an error naming it, rather
        than the company's leads of every date with the argument listed as ignored."""
        envelope = envelope_of(
            tools["query_leads"].invoke({"company": "acme", "created_after": "last week"})
        )
        assert envelope["records"] == [] and envelope["metadata"]["total_count"] == 0
        error = envelope["metadata"]["error"]
        assert error["type"] == "InvalidQueryError"
        assert "explicit filter not applied: created_at gte 'last week'" in error["message"]
        assert envelope["metadata"]["ignored"][0]["text"] == "created_at gte 'last week'"
