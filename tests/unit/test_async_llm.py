"""The model steps of ``RAGAgent.arun``: the extraction and the grounded fallback await the chat
model's ``ainvoke`` on the loop's thread and answer what ``run`` answers."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from pydantic import Field

from persistence import MemoryStore, ReadOnlyPersistenceFacade, create_read_only_facade
from rag_agent import RAGAgent, RAGSettings
from rag_agent.understanding.llm.schema import SCHEMA_NAME
from tests.support.extraction import answer as nothing_understood
from tests.unit.test_llm_scripted import ScriptedChatModel, call, calls, final

NOW = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC)
NO_FILTERS = "who scores highest?"  # the rules read nothing here
# Step 2: the model states no filters.
NO_EXTRACTION = calls(call(SCHEMA_NAME, **nothing_understood()))
TOP_SCORER = calls(
    call("query_table", table="leads", filters=[{"column": "score", "op": "gte", "value": 9}])
)


class AwaitedScriptedModel(ScriptedChatModel):
    """The scripted model with its own awaitable generation (LangChain's default would run
    ``_generate`` in an executor thread), noting the thread of each awaited call."""

    awaited_threads: list[int] = Field(default_factory=list)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.awaited_threads.append(threading.get_ident())
        return self._generate(messages, stop, **kwargs)


@pytest.fixture
def facade(store: MemoryStore) -> ReadOnlyPersistenceFacade:
    store.insert(
        "leads",
        [
            {"id": 1, "email": "ana@acme.example", "company_name": "Acme Inc.", "score": 9},
            {"id": 2, "email": "bo@globex.example", "company_name": "Globex", "score": 4},
        ],
    )
    return create_read_only_facade(kind="memory", store=store)


def _agent(facade: ReadOnlyPersistenceFacade, model: ScriptedChatModel) -> RAGAgent:
    settings = RAGSettings(cache_disabled=True)
    return RAGAgent(facade, settings=settings, llm=model, now=lambda: NOW)


def _without_read_times(envelope: dict[str, Any]) -> dict[str, Any]:
    # The fallback stamps each read with the wall clock, not the agent's injected one.
    for record in envelope["records"]:
        record["provenance"].pop("retrieved_at", None)
    envelope["metadata"].pop("retrieved_at", None)
    return envelope


class TestAwaitedModelSteps:
    def test_extraction_and_fallback_await_the_model_on_the_loop(
        self, facade: ReadOnlyPersistenceFacade
    ) -> None:
        """arun asks the model through ainvoke, every call on the loop's thread, and answers
        what run answers with the same script."""
        script = [NO_EXTRACTION, TOP_SCORER, final(("leads", 1))]
        awaited_model = AwaitedScriptedModel(script=list(script))
        blocking_model = ScriptedChatModel(script=list(script))

        async def main() -> tuple[dict[str, Any], int]:
            answer = await _agent(facade, awaited_model).arun(NO_FILTERS, return_json=True)
            return answer, threading.get_ident()

        awaited, loop_thread = asyncio.run(main())
        blocking = _agent(facade, blocking_model).run(NO_FILTERS, return_json=True)
        assert awaited["metadata"]["fallback"] == "agent"
        assert [r["id"] for r in awaited["records"]] == [1]
        assert _without_read_times(awaited) == _without_read_times(blocking)
        assert awaited_model.awaited_threads == [loop_thread] * 3
        assert awaited_model.script == [] and blocking_model.script == []

    def test_a_failing_model_is_an_error_envelope(self, facade: ReadOnlyPersistenceFacade) -> None:
        """A model failing during the awaited fallback is the envelope's error, never raised."""
        model = AwaitedScriptedModel(
            script=[NO_EXTRACTION, TOP_SCORER, RuntimeError("503")], awaited_threads=[]
        )
        envelope = asyncio.run(_agent(facade, model).arun(NO_FILTERS))
        assert envelope.metadata.fallback == "agent"
        assert envelope.metadata.error is not None
        assert envelope.records == []
