"""The fallback wired into ``RAGAgent``: the step-5 hook, envelopes, errors, settings."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from structlog.testing import capture_logs

from persistence import (
    MemoryStore,
    ReadOnlyPersistenceFacade,
    create_persistence_agent,
    create_read_only_facade,
)
from rag_agent import FallbackRequest, RAGAgent, RAGSettings, row_hash
from rag_agent.fallback import AgentFallback, PipelineFallback, create_fallback_runner
from rag_agent.understanding.llm.schema import SCHEMA_NAME
from tests.support.extraction import answer
from tests.unit.test_llm_scripted import ScriptedChatModel, call, calls, final

NOW = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC)
NO_FILTERS = "who scores highest?"  # the rules read nothing here
NO_EXTRACTION = calls(call(SCHEMA_NAME, **answer()))  # step 2: the model states no filters


@pytest.fixture
def facade(store: MemoryStore) -> ReadOnlyPersistenceFacade:
    writer = create_persistence_agent(kind="memory", store=store)
    writer.batch(
        "leads",
        [
            {"id": 1, "email": "ana@acme.example", "company_name": "Acme Inc.", "score": 9},
            {"id": 2, "email": "bo@globex.example", "company_name": "Globex", "score": 4},
        ],
    )
    store.insert("clients", [{"id": 1, "name": "Client One"}])
    return create_read_only_facade(kind="memory", store=store)


def top_scorer() -> AIMessage:
    return calls(
        call(
            "query_table",
            table="leads",
            filters=[{"column": "score", "op": "gte", "value": 9}],
        )
    )


def request(**changes: Any) -> FallbackRequest:
    values: dict[str, Any] = {
        "text": NO_FILTERS,
        "table": "leads",
        "filters": {},
        "limit": 50,
        "offset": 0,
        "max_steps": 6,
    }
    values.update(changes)
    return FallbackRequest(**values)


def agent_with(
    facade: ReadOnlyPersistenceFacade, model: ScriptedChatModel, **settings: Any
) -> RAGAgent:
    return RAGAgent(facade, settings=RAGSettings(**settings), llm=model)


class TestCreateFallbackRunner:
    def test_settings_apply(self, facade: ReadOnlyPersistenceFacade) -> None:
        """RAG_FALLBACK_MAX_STEPS and RAG_DEBUG reach the fallback."""
        settings = RAGSettings(fallback_max_steps=3, debug=True)
        runner = create_fallback_runner(facade, ScriptedChatModel(script=[]), settings=settings)
        assert isinstance(runner, PipelineFallback)
        assert runner.fallback.max_steps == 3 and runner.fallback.debug is True

    def test_agent_picks_the_runner_when_it_has_a_model(
        self, facade: ReadOnlyPersistenceFacade
    ) -> None:
        """A RAGAgent with an LLM uses the grounded fallback for step 5."""
        model = ScriptedChatModel(script=[NO_EXTRACTION, top_scorer(), final(("leads", 1))])
        envelope = agent_with(facade, model).run(NO_FILTERS)
        assert envelope.metadata.fallback == "agent"
        assert [r.model_extra["id"] for r in envelope.records] == [1]  # type: ignore[index]


class TestPipelineFallback:
    def test_cited_rows_become_reads_with_their_read_time(
        self, facade: ReadOnlyPersistenceFacade
    ) -> None:
        """Each cited row read is one FallbackRead carrying the time of its read."""
        model = ScriptedChatModel(script=[top_scorer(), final(("leads", 1), ("leads", 2))])
        runner = PipelineFallback(AgentFallback(facade, model, now=lambda: NOW))
        result = runner(request())
        assert [(r.table, [row["id"] for row in r.rows]) for r in result.reads] == [("leads", [1])]
        assert result.reads[0].retrieved_at == NOW
        assert result.dropped_ids == 1 and result.error is None

    def test_step_budget_comes_from_the_request(self, facade: ReadOnlyPersistenceFacade) -> None:
        """The request's max_steps bounds the run."""
        model = ScriptedChatModel(script=[top_scorer() for _ in range(5)])
        result = PipelineFallback(AgentFallback(facade, model, max_steps=6))(request(max_steps=2))
        assert len(model.requests) == 2
        assert type(result.error).__name__ == "FallbackStepLimitError"

    def test_tried_filters_reach_the_model(self, facade: ReadOnlyPersistenceFacade) -> None:
        """Filters the deterministic steps tried are passed on as a hint."""
        model = ScriptedChatModel(script=[final()])
        PipelineFallback(AgentFallback(facade, model))(request(filters={"company": "Initech"}))
        assert '"company": "Initech"' in model.requests[0][1].content


class TestEnvelopes:
    def test_records_carry_the_provenance_of_their_read(
        self, facade: ReadOnlyPersistenceFacade
    ) -> None:
        """Fallback records: source 'agent' in metadata, the table and read time per record."""
        model = ScriptedChatModel(
            script=[NO_EXTRACTION, top_scorer(), final(("leads", 1), ("leads", 5))]
        )
        envelope = agent_with(facade, model).run(NO_FILTERS, return_json=True)
        assert envelope["metadata"]["source"] == "agent"
        assert envelope["metadata"]["fallback_dropped_ids"] == 1
        [record] = envelope["records"]
        fields = {k: v for k, v in record.items() if k != "provenance"}
        assert record["provenance"]["source"] == "persistence.leads"
        assert record["provenance"]["row_hash"] == row_hash(fields)
        assert record["provenance"]["row_id"] == 1

    def test_rows_from_another_table_keep_their_source(
        self, facade: ReadOnlyPersistenceFacade
    ) -> None:
        """With governance tables in scope, a cited clients row's provenance names clients."""
        read_client = calls(
            call("query_table", table="clients", filters=[{"column": "id", "op": "eq", "value": 1}])
        )
        model = ScriptedChatModel(script=[NO_EXTRACTION, read_client, final(("clients", 1))])
        envelope = agent_with(facade, model, fallback_scope="related+governance").run(
            NO_FILTERS, return_json=True
        )
        assert envelope["records"][0]["provenance"]["source"] == "persistence.clients"

    def test_model_error_is_an_error_envelope(self, facade: ReadOnlyPersistenceFacade) -> None:
        """A model that raises mid-run gives metadata.error with its type, and no records."""
        model = ScriptedChatModel(script=[NO_EXTRACTION, top_scorer(), RuntimeError("503")])
        envelope = agent_with(facade, model).run(NO_FILTERS, return_json=True)
        assert envelope["records"] == []
        assert envelope["metadata"]["error"] == {"type": "RuntimeError", "message": "503"}
        assert envelope["metadata"]["fallback"] == "agent"

    def test_step_limit_is_an_error_envelope(self, facade: ReadOnlyPersistenceFacade) -> None:
        """RAG_FALLBACK_MAX_STEPS reached: an error envelope naming the limit."""
        model = ScriptedChatModel(script=[NO_EXTRACTION, *[top_scorer() for _ in range(3)]])
        envelope = agent_with(facade, model, fallback_max_steps=2).run(NO_FILTERS)
        assert envelope.metadata.error is not None
        assert envelope.metadata.error.type == "FallbackStepLimitError"
        assert envelope.records == []

    def test_debug_setting_logs_the_chain(self, facade: ReadOnlyPersistenceFacade) -> None:
        """With RAG_DEBUG on, the fallback's error event carries the exception chain."""
        error = RuntimeError("model call failed")
        error.__cause__ = ConnectionError("reset by peer")
        model = ScriptedChatModel(script=[NO_EXTRACTION, error])
        with capture_logs() as logs:
            agent_with(facade, model, debug=True).run(NO_FILTERS)
        event = next(e for e in logs if e["event"] == "rag.fallback.error")
        assert event["chain"] == [
            "RuntimeError: model call failed",
            "ConnectionError: reset by peer",
        ]
