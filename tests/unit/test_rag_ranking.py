"""Ranked records: a request's topic ranks rows inside its conditions; search_table; a misspelled
company matched by trigram similarity (memory backend, with and without embeddings)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.embeddings import DeterministicFakeEmbedding

from persistence import (
    BUSINESS_TABLES,
    Filter,
    MemoryBackend,
    MemoryStore,
    Op,
    ReadOnlyPersistenceFacade,
    create_persistence_agent,
    create_read_only_facade,
)
from persistence.policy import AccessPolicy
from persistence.search import SearchResult
from persistence.steps import drive
from rag_agent import RAGAgent, build_tools
from rag_agent.envelope import row_hash
from rag_agent.pipeline.similar import name_like, similar_company
from rag_agent.settings import RAGSettings
from rag_agent.specs import Condition
from rag_agent.understanding.filters import understand
from rag_agent.understanding.rules.topic import FRAMING_WORDS, topic_of
from rag_agent.untrusted import unwrap_boundary

SCHEMA = json.loads(
    (Path(__file__).parents[2] / "docs" / "envelope.schema.json").read_text(encoding="utf-8")
)
NOW = dt.datetime(2025, 6, 18, 12, tzinfo=dt.UTC)

INQUIRIES = [
    (7, "Cancel my plan", "I want to stop paying for the service, please cancel"),
    (7, "Login broken", "I could not sign in this morning, the password reset fails"),
    (7, "Pricing", "How much is the enterprise tier per seat?"),
    (8, "Cancel subscription", "Please stop charging my card, I want to stop paying"),
    (8, "Invoice copy", "Send me a copy of the March invoice"),
    (7, "Refund", "We stopped using it; can we stop paying and get a refund?"),
    (7, "Sign in again", "Users cannot sign in since the update"),
]
LEADS = [
    ("ana@globex.com", "Globex Corporation", "new"),
    ("bo@globex.com", "Globex Corporation", "qualified"),
    ("cy@acme.io", "Acme", "new"),
    ("di@initech.com", "Initech", "new"),
]


def _store() -> MemoryStore:
    store = MemoryStore()
    writer = create_persistence_agent(kind="memory", store=store)
    for client, subject, body in INQUIRIES:
        writer.write("inquiries", {"client_id": client, "subject": subject, "body": body})
    for email, company, status in LEADS:
        writer.write("leads", {"email": email, "company_name": company, "status": status})
    return store


def _agent(store: MemoryStore, *, embeddings: Any = None, **settings: Any) -> RAGAgent:
    facade = create_read_only_facade("memory", store=store, embeddings=embeddings)
    return RAGAgent(facade, settings=RAGSettings(**settings), now=lambda: NOW)


@pytest.fixture(scope="module")
def store() -> MemoryStore:
    return _store()


@pytest.fixture(scope="module")
def agent(store: MemoryStore) -> RAGAgent:
    return _agent(store)


def valid(data: dict[str, Any]) -> dict[str, Any]:
    """Schema-valid, and every record verifies by the documented check (provenance out)."""
    jsonschema.validate(json.loads(json.dumps(data)), SCHEMA)
    for record in data["records"]:
        fields = {k: v for k, v in record.items() if k != "provenance"}
        assert row_hash(fields) == record["provenance"]["row_hash"]
    return data


def ids(data: dict[str, Any]) -> list[Any]:
    return [record["id"] for record in data["records"]]


class TestTopic:
    @pytest.mark.parametrize(
        ("text", "topic"),
        [
            ("inquiries from customers who want to stop paying", "stop paying"),
            ("messages where someone could not sign in", "not sign in"),
            ("qualified leads about the demo", "demo"),
            ("people asking to log in on mobile", "log in mobile"),
        ],
    )
    def test_the_words_no_rule_read(self, text: str, topic: str) -> None:
        """Framing, table words and what the conditions consumed are not the topic."""
        assert understand(text, now=NOW).topic == topic

    @pytest.mark.parametrize(
        "text",
        [
            "show me leads at Acme please",
            "find leads at acme",
            "lead 42",
            "how many leads are qualified",
            "leads with score above 80 created last month",
            "give me the contacts at Globex, limit 5",
            "leads from Acme Inc. with email wrong@acme.io",
            "hot leads",
            "show me everything",
            "x:0A",
        ],
    )
    def test_requests_without_a_topic(self, text: str) -> None:
        """Conditions and framing alone leave no topic: those runs are answered as before."""
        assert understand(text, now=NOW).topic == ""

    @pytest.mark.parametrize(
        ("text", "direction"),
        [
            ("messages from customers about cancellations", "inbound"),
            ("messages from the customer about invoices", "inbound"),
            ("messages we sent about CRM sync", "outbound"),
            ("messages sent by us about quotes", "outbound"),
        ],
    )
    def test_who_wrote_a_message(self, text: str, direction: str) -> None:
        """'from customers' / 'we sent' are the direction of messages, not their topic."""
        found = understand(text, now=NOW)
        assert ("direction", direction) in [(c.column, c.value) for c in found.conditions]
        assert not {"customers", "sent", "client"} & set(found.topic.split())

    def test_writers_on_a_table_without_direction(self) -> None:
        """Inquiries have no direction: 'from customers' is framing there."""
        found = understand("inquiries from customers who want to stop paying", now=NOW)
        assert found.conditions == () and found.topic == "stop paying"

    @given(st.text(max_size=200))
    def test_topic_is_words_of_the_text(self, text: str) -> None:
        """A topic only holds words of the request, none of them framing, in their order."""
        topic = topic_of(text)
        words = topic.split()
        assert all(word in text for word in words)
        assert not any(word.lower() in FRAMING_WORDS - {"in", "on", "up", "out"} for word in words)


class TestRankedRun:
    def test_topic_ranks_the_rows(self, agent: RAGAgent) -> None:
        """'stop paying' ranks the three rows saying so first, with the ranking said."""
        data = valid(
            agent.run("inquiries from customers who want to stop paying", return_json=True)
        )
        ranking = data["metadata"]["ranking"]
        assert ranking["mode"] == "keyword" and ranking["query"] == "stop paying"
        assert "keyword" in ranking["legs"] and "semantic" not in ranking["legs"]
        assert "embeddings" in ranking["degraded"]
        assert set(ids(data)[:3]) == {1, 4, 6}
        places = [r["provenance"]["relevance"]["rank"] for r in data["records"]]
        assert places == list(range(1, len(places) + 1))
        scores = [r["provenance"]["relevance"]["score"] for r in data["records"]]
        assert scores == sorted(scores, reverse=True)
        assert data["records"][0]["provenance"]["relevance"]["ranks"]["keyword"] == 1
        assert "fallback" not in data["metadata"]

    def test_conditions_are_hard_constraints(self, agent: RAGAgent) -> None:
        """client 7's rows only, all of them: those a leg ranked (keyword-only here: rows
        sharing a word with the topic) first, the rows that only match the filters after; the
        topic orders the filters' answer and never narrows it."""
        data = valid(
            agent.run(
                "inquiries of client 7 from customers who want to stop paying", return_json=True
            )
        )
        assert data["metadata"]["filters"] == [
            {"column": "client_id", "op": "eq", "value": 7, "source": "rules"}
        ]
        assert all(record["client_id"] == 7 for record in data["records"])
        client_7 = agent.facade.count("inquiries", [Filter("client_id", Op.EQ, 7)])
        assert data["metadata"]["total_count"] == client_7 == len(data["records"])
        ranked = [
            record["id"]
            for record in data["records"]
            if any(r is not None for r in record["provenance"]["relevance"]["ranks"].values())
        ]
        assert sorted(ranked) == [1, 6] and ids(data)[:2] == ranked

    def test_with_embeddings_every_filtered_row_is_ranked(self, store: MemoryStore) -> None:
        """The semantic leg ranks every row matching the filters: all five come back, the
        topic's first (the k-rows rule of the search)."""
        agent = _agent(store, embeddings=DeterministicFakeEmbedding(size=32))
        data = valid(
            agent.run(
                "inquiries of client 7 from customers who want to stop paying", return_json=True
            )
        )
        assert data["metadata"]["total_count"] == 5 and len(data["records"]) == 5
        assert all(record["client_id"] == 7 for record in data["records"])

    def test_pages_continue_the_ranking(self, agent: RAGAgent) -> None:
        """Pages of 2 are the whole ranking cut in order; has_more/next_offset lead through it."""
        text = "inquiries of client 7 from customers who want to stop paying"
        whole = ids(agent.run(text, limit=6, return_json=True))
        seen: list[Any] = []
        offset: int | None = 0
        while offset is not None:
            page = valid(agent.run(text, limit=2, offset=offset, return_json=True))
            seen += ids(page)
            assert page["metadata"]["ranking"]["query"] == "stop paying"
            offset = page["metadata"].get("next_offset")
            assert page["metadata"]["has_more"] is (offset is not None)
        assert seen == whole

    def test_second_run_is_a_cache_hit(self, store: MemoryStore) -> None:
        """A ranked page is cached like a read, and the cached page is the same page."""
        agent = _agent(store)
        text = "inquiries where someone could not sign in"
        first = agent.run(text, return_json=True)
        second = agent.run(text, return_json=True)
        assert (first["metadata"]["cache"], second["metadata"]["cache"]) == ("miss", "hit")
        assert ids(first) == ids(second) and ids(first)[:2] in ([2, 7], [7, 2])

    def test_without_a_topic_nothing_changes(self, agent: RAGAgent) -> None:
        """A run whose words are all conditions reads as before: no ranking, no relevance."""
        data = valid(agent.run("leads at Acme", return_json=True))
        assert "ranking" not in data["metadata"]
        assert ids(data) == [3]
        assert "relevance" not in data["records"][0]["provenance"]

    def test_with_embeddings_both_legs_run(self, store: MemoryStore) -> None:
        """With embeddings the run is hybrid: keyword and semantic legs, nothing degraded."""
        agent = _agent(store, embeddings=DeterministicFakeEmbedding(size=32))
        data = valid(
            agent.run("inquiries from customers who want to stop paying", return_json=True)
        )
        ranking = data["metadata"]["ranking"]
        assert ranking["mode"] == "hybrid"
        assert {"keyword", "semantic"} <= set(ranking["legs"])
        assert "degraded" not in ranking
        assert len(data["records"]) == len(INQUIRIES)  # every row is ranked by the semantic leg

    def test_a_corrected_word_is_said_in_the_ranking(self, store: MemoryStore) -> None:
        """A misspelled topic word is read as the table's own word, and the ranking says so."""
        agent = _agent(store)
        data = valid(agent.run("inquiries from customers who want to stop payng", return_json=True))
        ranking = data["metadata"]["ranking"]
        assert ranking["corrections"] == {"payng": "paying"}
        assert "paying" in ranking["query"]
        assert {record["id"] for record in data["records"]} >= {1, 4, 6}

    def test_no_ranked_row_without_a_condition_falls_back(self, agent: RAGAgent) -> None:
        """A topic no row shares a word with, and no condition: no rows (never the table)."""
        data = valid(agent.run("inquiries about zeppelins", return_json=True, table="messages"))
        assert data["records"] == []
        assert data["metadata"]["fallback"] == "disabled"

    def test_backend_that_cannot_search_answers_as_before(self, store: MemoryStore) -> None:
        """No search on the backend: the conditions are read as before; without any, no rows."""

        class NoSearch(MemoryBackend):
            search = None

        facade = ReadOnlyPersistenceFacade(NoSearch(store), AccessPolicy.read_only(BUSINESS_TABLES))
        agent = RAGAgent(facade, settings=RAGSettings(), now=lambda: NOW)
        ranked = valid(
            agent.run(
                "inquiries of client 8 from customers who want to stop paying", return_json=True
            )
        )
        assert "ranking" not in ranked["metadata"] and sorted(ids(ranked)) == [4, 5]
        bare = valid(
            agent.run("inquiries from customers who want to stop paying", return_json=True)
        )
        assert bare["records"] == [] and bare["metadata"]["fallback"] == "disabled"


class TestSearchTotals:
    """RAG_EXACT_TOTALS drives the search's count as it drives reads', and the envelope says
    when a search's total is a lower bound."""

    @staticmethod
    def _agent(store: MemoryStore, asked: list[bool], **settings: Any) -> RAGAgent:
        class Bounded(MemoryBackend):
            """Counts as a large table's search would: up to the page's end plus one row,
            unless asked for every match."""

            def search(self, *args: Any) -> SearchResult:
                request = args[1]
                asked.append(request.exact_total)
                result = super().search(*args)
                if request.exact_total or result.total_count <= request.depth + 1:
                    return result
                return dataclasses.replace(result, total_count=request.depth + 1, total_exact=False)

        facade = ReadOnlyPersistenceFacade(Bounded(store), AccessPolicy.read_only(BUSINESS_TABLES))
        return RAGAgent(facade, settings=RAGSettings(**settings), now=lambda: NOW)

    @pytest.mark.parametrize("exact", [True, False])
    def test_the_setting_drives_the_search(self, store: MemoryStore, exact: bool) -> None:
        asked: list[bool] = []
        agent = self._agent(store, asked, exact_totals=exact)
        data = valid(
            agent.search(
                "inquiries", "stop paying", [Filter("client_id", Op.EQ, 7)], k=2, return_json=True
            )
        )
        assert asked == [exact]
        meta = data["metadata"]
        assert len(data["records"]) == 2 and meta["has_more"] is True
        if exact:
            assert meta["total_count"] == 5 and "total_exact" not in meta
        else:
            assert meta["total_count"] == 3 and meta["total_exact"] is False

    def test_a_run_asks_as_the_setting_says(self, store: MemoryStore) -> None:
        asked: list[bool] = []
        agent = self._agent(store, asked, exact_totals=False)
        valid(agent.run("inquiries from customers who want to stop paying", return_json=True))
        assert asked and set(asked) == {False}


class TestAboutRanks:
    def test_about_words_rank_instead_of_a_substring(self, agent: RAGAgent) -> None:
        """'about the password reset' is no subject substring but the ranking's words."""
        data = valid(agent.run("inquiries about the password reset", return_json=True))
        assert ids(data)[0] == 2
        assert data["metadata"]["ranking"]["query"] == "password reset"
        assert "filters" not in data["metadata"]
        assert "reformulation_attempts" not in data["metadata"]

    def test_other_conditions_stay_hard(self, agent: RAGAgent) -> None:
        """client 7's rows only, the refund one first."""
        data = valid(agent.run("inquiries of client 7 about refunds", return_json=True))
        assert ids(data)[0] == 6
        assert all(record["client_id"] == 7 for record in data["records"])
        assert data["metadata"]["filters"] == [
            {"column": "client_id", "op": "eq", "value": 7, "source": "rules"}
        ]

    def test_words_no_row_holds_leave_the_filtered_answer(self, agent: RAGAgent) -> None:
        """Words no row of the filters holds never zero the answer: client 8's rows stand, and
        the words are reported."""
        data = valid(agent.run("inquiries of client 8 about zeppelins", return_json=True))
        client_8 = agent.facade.count("inquiries", [Filter("client_id", Op.EQ, 8)])
        assert client_8 and data["metadata"]["total_count"] == client_8
        assert all(record["client_id"] == 8 for record in data["records"])
        assert {"text": "zeppelins", "reason": "no row mentions 'zeppelins'"} in data["metadata"][
            "ignored"
        ]

    def test_a_count_counts_the_rows_mentioning_the_words(
        self, agent: RAGAgent, store: MemoryStore
    ) -> None:
        """A count with a topic counts the rows whose text mentions its words, and says so."""
        data = valid(agent.run("how many inquiries about pricing", return_json=True))
        mentioning = [
            row
            for row in store.rows("inquiries")
            if "pricing" in f"{row.get('subject', '')} {row.get('body', '')}".casefold()
        ]
        assert mentioning and data["metadata"]["total_count"] == len(mentioning)
        assert data["metadata"]["count_basis"] == "rows mentioning 'pricing'"

    def test_without_search_the_substring_filters_again(self, store: MemoryStore) -> None:
        """A backend that cannot search reads 'about pricing' as the subject substring."""

        class NoSearch(MemoryBackend):
            search = None

        facade = ReadOnlyPersistenceFacade(NoSearch(store), AccessPolicy.read_only(BUSINESS_TABLES))
        agent = RAGAgent(facade, settings=RAGSettings(), now=lambda: NOW)
        data = valid(agent.run("inquiries about pricing", return_json=True))
        assert ids(data) == [3]
        assert data["metadata"]["filters"][0]["column"] == "subject"
        assert "ranking" not in data["metadata"]


def _similar(facade: ReadOnlyPersistenceFacade, conditions: tuple[Condition, ...]) -> Any:
    """similar_company's steps on ``leads``, their calls answered by ``facade``."""
    return drive(
        similar_company("leads", conditions, "company_name"),
        lambda call: getattr(facade, call.port)(*call.args, **call.kwargs),
    )


class TestSimilarCompany:
    def test_misspelled_company_is_read_as_the_similar_one(self, agent: RAGAgent) -> None:
        """'Globx' matches no company; Globex Corporation is read instead, and said so."""
        data = valid(agent.run("leads at Globx", return_json=True))
        assert sorted(ids(data)) == [1, 2]
        assert data["metadata"]["fallback"] == "reformulation"
        [attempt] = data["metadata"]["reformulation_attempts"]
        assert attempt["reason"] == "similar_company"
        assert attempt["filters"] == {"company": "Globex Corporation"}
        assert attempt["result_count"] == 2
        [note] = data["metadata"]["ignored"]
        assert note["text"] == "Globx" and "Globex Corporation" in note["reason"]

    def test_other_conditions_stay(self, agent: RAGAgent) -> None:
        """'qualified leads at Globx': the status still applies to the similar company."""
        data = valid(agent.run("qualified leads at Globx", return_json=True))
        assert ids(data) == [2]

    def test_nothing_similar_changes_nothing(self, agent: RAGAgent) -> None:
        """A name like no company: no similar_company attempt, no rows."""
        data = valid(agent.run("leads at Zyxwvut", return_json=True))
        assert data["records"] == []
        reasons = [a["reason"] for a in data["metadata"].get("reformulation_attempts", [])]
        assert "similar_company" not in reasons

    def test_a_callers_company_is_never_replaced(self, store: MemoryStore) -> None:
        """The caller's own company filter is what was asked: no similar name replaces it."""
        facade = create_read_only_facade("memory", store=store)
        condition = Condition("company_name", Op.ICONTAINS, "Globx", "tool")
        assert _similar(facade, (condition,)) is None

    def test_without_search_distinct_names_are_the_candidates(self, store: MemoryStore) -> None:
        """A backend that cannot search: the table's distinct companies, same choice."""

        class NoSearch(MemoryBackend):
            search = None

        facade = ReadOnlyPersistenceFacade(NoSearch(store), AccessPolicy.read_only(BUSINESS_TABLES))
        condition = Condition("company_name", Op.ICONTAINS, "Globx", "rules")
        [found] = _similar(facade, (condition,)) or ()
        # The replaced value says where it came from: the reformulation, not the rules.
        assert found.value == "Globex Corporation" and found.source == "reformulation"

    @pytest.mark.parametrize("typed", ["Gl", "'--", "x=1", "Gl0b3x!!", "(GX)", "%G%"])
    def test_no_fragment_or_code_is_corrected(self, agent: RAGAgent, typed: str) -> None:
        """Only a name-like value (letters, four or more) is replaced by a similar name: a
        fragment or text that reads as code or punctuation never becomes a company."""
        condition = Condition("company_name", Op.ICONTAINS, typed, "rules")
        assert _similar(agent.facade, (condition,)) is None
        assert not name_like(typed)


def _tool(agent: RAGAgent) -> Any:
    return {tool.name: tool for tool in build_tools(agent, content="full")}["search_table"]


def _envelope(answer: str) -> dict[str, Any]:
    return valid(json.loads(unwrap_boundary(answer)))


class TestSearchTableTool:
    def test_ranked_rows_inside_filters(self, agent: RAGAgent) -> None:
        """The tool ranks by its text inside its filters, with the ranking and relevance."""
        answer = _tool(agent).invoke(
            {
                "table": "inquiries",
                "text": "customers who want to stop paying",
                "filters": [{"column": "client_id", "op": "eq", "value": 8}],
                "k": 1,
            }
        )
        data = _envelope(answer)
        assert ids(data) == [4]
        assert data["metadata"]["total_count"] == 2
        assert data["metadata"]["has_more"] is True and data["metadata"]["next_offset"] == 1
        assert data["metadata"]["filters"][0]["source"] == "tool"
        assert data["metadata"]["ranking"]["query"] == "stop paying"

    def test_agent_search_method(self, agent: RAGAgent) -> None:
        """RAGAgent.search is the same step: Filter objects in, a ranked envelope out."""
        data = valid(
            agent.search(
                "inquiries", "sign in", [Filter("client_id", Op.EQ, 7)], k=2, return_json=True
            )
        )
        assert set(ids(data)) == {2, 7}

    @pytest.mark.parametrize(
        "bad",
        [
            {"table": "inquiries"},
            {"table": "inquiries", "text": ""},
            {"table": "inquiries", "text": "x" * 1001},
            {"table": "inquiries", "text": "refund", "k": 0},
            {"table": "inquiries", "text": "refund", "k": 101},
            {"table": "inquiries", "text": "refund", "offset": -1},
            {"table": "inquiries", "text": "refund", "offset": 5000},
            {"table": "inquiries", "text": "refund", "mode": "sql"},
            {"table": "inquiries", "text": "refund", "mode": "semantic"},
            {"table": "secrets", "text": "refund"},
            {"table": "public.inquiries", "text": "refund"},
            {"table": "inquiries", "text": "refund", "filters": [{"column": "nope", "value": 1}]},
            {"table": "inquiries", "text": "refund", "filters": [{"column": "client_id"}] * 2},
            {"table": "inquiries", "text": "refund", "filters": "client_id = 7"},
            {"table": "inquiries", "text": ["refund"]},
            "refund",
            '{"table": "inquiries", "text": "\'; DROP TABLE inquiries; --"',
        ],
    )
    def test_bad_input_is_an_error_envelope(self, agent: RAGAgent, bad: Any) -> None:
        """Malformed, refused or out-of-bound input never raises: metadata.error says why."""
        data = _envelope(_tool(agent).invoke(bad))
        assert data["metadata"]["error"]["type"]
        assert data["records"] == []

    def test_hostile_text_is_only_words(self, agent: RAGAgent) -> None:
        """SQL or tsquery syntax in the text is ranked as words, never run."""
        for text in ("'; DROP TABLE inquiries; --", "stop & !paying | (refund:*)", "%_\\"):
            data = _envelope(_tool(agent).invoke({"table": "inquiries", "text": text}))
            assert "error" not in data["metadata"]


class TestFallbackSearch:
    def test_fallback_search_reads_into_its_ledger(self, store: MemoryStore) -> None:
        """The fallback's search_table ledgers the rows it returns and counts as a tool call."""
        from rag_agent.fallback.tools import FallbackSession

        facade = create_read_only_facade("memory", store=store)
        session = FallbackSession(
            facade, max_steps=2, deadline=float("inf"), clock=lambda: 0.0, now=lambda: NOW
        )
        answer = session.search_table("inquiries", "stop paying", limit=2)
        assert "2 rows of 'inquiries' ranked by relevance" in answer
        assert session.tool_calls == 1 and session.rows_read == 2
        refused = session.search_table("secrets", "stop paying")
        assert refused.startswith("ERROR:")


class TestSearchTableOverMCP:
    def test_listed_read_only_and_answers_an_envelope(self, agent: RAGAgent) -> None:
        """MCP lists search_table as read-only; a call answers the ranked envelope, and a bad
        one an envelope with isError."""
        pytest.importorskip("mcp")
        from mcp import ClientSession

        from rag_agent.mcp_server import create_mcp_server
        from tests.support.mcp import envelope_of, in_process

        async def work(client: ClientSession) -> tuple[Any, Any, Any]:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            good = await client.call_tool(
                "search_table", {"table": "inquiries", "text": "could not sign in", "k": 2}
            )
            bad = await client.call_tool("search_table", {"table": "secrets", "text": "x"})
            return tools["search_table"], good, bad

        tool, good, bad = in_process(create_mcp_server(agent), work)
        assert tool.annotations.readOnlyHint is True
        assert tool.annotations.destructiveHint is False
        assert set(tool.inputSchema["required"]) == {"table", "text"}
        data = valid(envelope_of(good))
        assert set(ids(data)) == {2, 7} and good.isError is False
        assert bad.isError is True
        assert envelope_of(bad)["metadata"]["error"]["type"] == "TableNotAllowedError"


class TestNextPageThroughTheRAGAgentTool:
    def test_a_ranked_envelopes_metadata_gives_the_next_ranked_page(self, agent: RAGAgent) -> None:
        """Passing a ranked envelope's metadata with the next offset continues the ranking."""
        tool = {t.name: t for t in build_tools(agent, content="full")}["rag_agent"]
        text = "inquiries of client 7 from customers who want to stop paying"
        whole = ids(agent.run(text, limit=4, return_json=True))
        first = valid(agent.run(text, limit=2, return_json=True))
        metadata = {**first["metadata"], "offset": first["metadata"]["next_offset"]}
        second = _envelope(tool.invoke({"metadata": metadata}))
        assert second["metadata"]["ranking"]["query"] == "stop paying"
        assert ids(first) + ids(second) == whole
        bare = valid(
            agent.run("inquiries from customers who want to stop paying", limit=1, return_json=True)
        )
        again = _envelope(tool.invoke({"metadata": {**bare["metadata"], "offset": 1}}))
        assert again["metadata"]["ranking"]["query"] == "stop paying"
        assert (
            ids(again)
            == ids(
                agent.run(
                    "inquiries from customers who want to stop paying", limit=2, return_json=True
                )
            )[1:]
        )


class TestCompactView:
    def test_compact_content_says_what_the_rows_are_ranked_by(self, agent: RAGAgent) -> None:
        """The default (compact) content keeps the rank order and says by what, not scores."""
        from rag_agent.untrusted import unwrap_boundary as unwrap

        tool = {t.name: t for t in build_tools(agent)}["search_table"]
        view = json.loads(unwrap(tool.invoke({"table": "inquiries", "text": "could not sign in"})))
        assert view["ranking"]["query"] == "not sign" or "sign" in view["ranking"]["query"]
        assert [row["id"] for row in view["rows"]][:2] in ([2, 7], [7, 2])
        assert "provenance" not in view["rows"][0]


class TestAsync:
    def test_arun_and_asearch_rank_as_their_blocking_twins(self, agent: RAGAgent) -> None:
        """The ranked steps are shared: arun/asearch answer what run/search answer."""
        import asyncio

        text = "inquiries of client 7 from customers who want to stop paying"

        async def both() -> tuple[Any, Any]:
            ran = await agent.arun(text, return_json=True)
            searched = await agent.asearch(
                "inquiries", "sign in", [Filter("client_id", Op.EQ, 7)], k=2, return_json=True
            )
            return ran, searched

        ran, searched = asyncio.run(both())
        assert ids(valid(ran)) == ids(agent.run(text, return_json=True))
        assert (
            ran["metadata"]["ranking"] == agent.run(text, return_json=True)["metadata"]["ranking"]
        )
        assert set(ids(valid(searched))) == {2, 7}

    def test_similar_company_on_the_async_path(self, agent: RAGAgent) -> None:
        """The similar-name lookup is a pipeline call too: arun reads Globx as Globex."""
        import asyncio

        data = valid(asyncio.run(agent.arun("leads at Globx", return_json=True)))
        assert sorted(ids(data)) == [1, 2]
        assert data["metadata"]["reformulation_attempts"][0]["reason"] == "similar_company"
