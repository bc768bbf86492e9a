"""Dependencies failing under the agent: Redis gone for the limiter, an LLM that raises, hangs or
talks nonsense, PostgREST answering 5xx, HTML, truncated JSON or nothing at all. Every run ends
within a bounded time with a typed error in the envelope (or a successful retry), never raises."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from langchain_core.messages import AIMessage, BaseMessage

from persistence import MemoryStore, ReadOnlyPersistenceFacade, create_read_only_facade
from rag_agent import RAGAgent, RAGSettings, build_tools, create_limiter
from rag_agent.fallback import create_fallback_runner
from rag_agent.specs import ExtractionRequest, Understanding
from tests.faults.worlds import SETTINGS, World, envelope_problems, open_world, seed_leads
from tests.support.http import ScriptedServer, rows_response
from tests.support.postgrest import BASE_URL, PostgrestEmulator, fake_key
from tests.unit.test_llm_scripted import ScriptedChatModel, call, calls, final

NO_FILTER = "who should I call today?"


@pytest.fixture
def world(request: pytest.FixtureRequest) -> Iterator[World]:
    """The memory backend seeded with the base leads."""
    with open_world("memory", seed_leads(), request) as world:
        yield world


def no_extraction(_request: ExtractionRequest) -> Understanding:
    """A filter extractor that finds nothing, without a model call."""
    return Understanding()


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def timed_run(agent: RAGAgent, text: str, **options: Any) -> tuple[dict[str, Any], float]:
    start = time.monotonic()
    envelope = agent.run(text, return_json=True, **options)
    return envelope, time.monotonic() - start


class TestLimiterStorageDown:
    def test_redis_down_fails_closed_through_run_and_tools(self, world: World) -> None:
        """With Redis unreachable, the fallback is suppressed (never run) within a second."""
        model = ScriptedChatModel(script=[])  # any call would fail the test: nothing scripted
        limiter = create_limiter(f"redis://127.0.0.1:{closed_port()}/0", 5)
        agent = RAGAgent(
            world.facade, settings=SETTINGS, llm=model, extractor=no_extraction, limiter=limiter
        )
        for _ in range(3):
            envelope, elapsed = timed_run(agent, NO_FILTER)
            metadata = envelope["metadata"]
            assert metadata["fallback"] == "suppressed"
            assert metadata["error"]["type"] == "RateLimiterUnavailableError"
            assert envelope["records"] == [] and elapsed < 3
        content = build_tools(agent, content="full")[2].invoke({"query": NO_FILTER})  # rag_agent
        assert '"suppressed"' in content
        assert model.requests == []
        # The deterministic path needs no limiter: it still answers.
        envelope, _ = timed_run(agent, "leads at acme")
        assert envelope["metadata"]["total_count"] > 0 and "error" not in envelope["metadata"]


class TestLLMFailures:
    def agent(self, world: World, model: ScriptedChatModel, **options: Any) -> RAGAgent:
        fallback = create_fallback_runner(world.facade, model, settings=SETTINGS, **options)
        # Filter extraction is bounded by the model client's own request timeout (the built
        # ChatOpenAI has one); these tests aim at the fallback, so extraction finds nothing.
        return RAGAgent(
            world.facade, settings=SETTINGS, llm=model, fallback=fallback, extractor=no_extraction
        )

    def test_raising_model_is_an_error_in_the_envelope(self, world: World) -> None:
        """A model that raises in filter extraction and in the fallback: an error, no records."""
        boom = RuntimeError("model provider is down")
        model = ScriptedChatModel(script=[boom])
        envelope, elapsed = timed_run(self.agent(world, model), NO_FILTER)
        assert envelope["records"] == []
        assert "model provider is down" in envelope["metadata"]["error"]["message"]
        assert elapsed < 5

    def test_hanging_model_is_abandoned_at_the_timeout(self, world: World) -> None:
        """A model that never answers is abandoned after the fallback's timeout."""
        release = threading.Event()

        def hang(messages: list[BaseMessage]) -> AIMessage:
            release.wait(10)
            return AIMessage(content="too late")

        model = ScriptedChatModel(script=[hang])
        agent = self.agent(world, model, timeout_seconds=0.5)
        try:
            envelope, elapsed = timed_run(agent, NO_FILTER)
        finally:
            release.set()
        assert envelope["records"] == []
        assert "timed out" in envelope["metadata"]["error"]["message"]
        assert elapsed < 3

    @pytest.mark.parametrize(
        "garbage",
        [
            AIMessage(content="}{ not json at all"),
            AIMessage(content='{"rows": [{"table": "leads", "id": 1}]}'),  # never read
            calls(call("drop_table", table="leads")),
            calls(call("query_table", table="secrets")),
            calls(call("query_table", table="leads", filters="' OR 1=1 --")),
            final(("leads", 1), ("secrets", 7), ("leads", "1 OR 1=1")),
        ],
    )
    def test_garbage_answers_give_no_invented_records(
        self, world: World, garbage: AIMessage
    ) -> None:
        """Nonsense, unknown tools, refused tables and citations of unread rows yield no records."""
        model = ScriptedChatModel(script=[garbage, garbage, AIMessage(content="done")] * 3)
        envelope, elapsed = timed_run(self.agent(world, model), NO_FILTER)
        assert envelope["records"] == []
        assert envelope_problems(envelope, world, allowed_errors=frozenset({"FallbackError",
            "FallbackStepLimitError", "AssertionError"})) == []  # fmt: skip
        assert elapsed < 5


def _supabase_agent(
    handler: Any, *, retries: int = 2
) -> tuple[RAGAgent, ReadOnlyPersistenceFacade]:
    client = httpx.Client(transport=httpx.MockTransport(handler))
    facade = create_read_only_facade(
        kind="supabase",
        url=BASE_URL,
        key=fake_key("anon"),
        http_client=client,
        retries=retries,
        sleep=lambda _: None,
    )
    return RAGAgent(facade, settings=RAGSettings(cache_disabled=True)), facade


class TestPostgrestFailures:
    @pytest.mark.parametrize(
        ("reply", "error_type"),
        [
            (httpx.Response(503, text="upstream unavailable"), "BackendUnavailableError"),
            (httpx.Response(500, json={"code": "XX000", "message": "boom"}), "BackendError"),
            (httpx.Response(502, html="<html><body>Bad gateway</body></html>"), "BackendUnavailableError"),  # noqa: E501
            (httpx.Response(200, html="<html>login</html>", headers={"Content-Range": "0-0/1"}), "BackendError"),  # noqa: E501
            (httpx.Response(200, content=b'[{"id": 1, "email": "ann@', headers={"Content-Range": "0-0/1"}), "BackendError"),  # noqa: E501
            (httpx.ReadTimeout("server hangs"), "QueryTimeoutError"),
            (httpx.ConnectError("connection refused"), "BackendUnavailableError"),
        ],
    )  # fmt: skip
    def test_broken_answers_are_typed_errors(self, reply: Any, error_type: str) -> None:
        """Every broken answer, even after the retries, is a typed error in the envelope."""
        server = ScriptedServer([reply])
        agent, _ = _supabase_agent(server)
        with agent:
            envelope, elapsed = timed_run(agent, "leads at acme")
            error = envelope["metadata"]["error"]
            assert issubclass_name(error["type"], error_type), error
            assert envelope["records"] == []
            assert elapsed < 2
            content = build_tools(agent, content="full")[1].invoke(
                {"table": "leads", "filters": {"client_id": 1}}
            )
            assert '"error"' in content

    def test_transient_5xx_is_retried_to_success(self) -> None:
        """503, then a timeout, then the real answer: the run succeeds."""
        store = MemoryStore()
        store.insert("leads", [{"email": "ann@acme.io", "company_name": "Acme Inc."}])
        emulator = PostgrestEmulator(store)
        server = ScriptedServer([httpx.Response(503), httpx.ReadTimeout("slow"), emulator])
        agent, _ = _supabase_agent(server)
        with agent:
            envelope, _ = timed_run(agent, "leads at acme")
        assert "error" not in envelope["metadata"]
        assert envelope["metadata"]["total_count"] == 1


_TREE = {
    "BackendError": {"BackendError", "BackendUnavailableError", "QueryTimeoutError"},
}


def issubclass_name(actual: str, expected: str) -> bool:
    """``actual`` is ``expected`` or, for BackendError, one of its subclasses."""
    return actual in _TREE.get(expected, {expected})


def test_worlds_seed_the_base_leads() -> None:
    """The fixture rows every fault test relies on."""
    assert len(seed_leads()) == 8 and all(row["email"] for row in seed_leads())


def test_rows_response_is_postgrest_shaped() -> None:
    """The scripted server helper answers with PostgREST's Content-Range."""
    assert rows_response([], "*/0").headers["Content-Range"] == "*/0"
