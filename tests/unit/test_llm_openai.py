"""The real ChatOpenAI code path, offline: an httpx.MockTransport serves OpenAI-shaped replies."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from langchain_core.language_models import BaseChatModel

from persistence import MemoryStore, Op, create_persistence_agent, create_read_only_facade
from rag_agent.fallback import AgentFallback
from rag_agent.settings import RAGSettings
from rag_agent.specs import Condition
from rag_agent.understanding.llm.chat_model import resolve_llm
from rag_agent.understanding.llm.extract import SchemaFilterExtractor
from tests.support.extraction import answer, cond, extraction_request

BASE_URL = "http://llm.test/v1"
NOW = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)


def completion(content: str | None = None, tool_calls: list[dict[str, Any]] | None = None) -> Any:
    """An OpenAI chat.completions response body."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for i, (name, args) in enumerate((c["name"], c["args"]) for c in tool_calls)
        ]
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if tool_calls else "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


class FakeOpenAI:
    """Serves scripted responses in order and records every request it saw."""

    def __init__(self, *responses: httpx.Response | Callable[[httpx.Request], httpx.Response]):
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        step = self.responses.pop(0)
        return step(request) if callable(step) else step

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests]


@pytest.fixture
def clients() -> Iterator[list[httpx.Client]]:
    opened: list[httpx.Client] = []
    yield opened
    for client in opened:
        client.close()


@pytest.fixture
def make_llm(clients: list[httpx.Client]) -> Callable[..., BaseChatModel]:
    def make(server: FakeOpenAI, **options: Any) -> BaseChatModel:
        client = httpx.Client(transport=httpx.MockTransport(server))
        clients.append(client)
        settings = RAGSettings(openai_api_key="sk-test", openai_base_url=BASE_URL)
        model = resolve_llm(None, settings, http_client=client, **options)
        assert model is not None
        return model

    return make


ACME = answer(cond("company_name", "icontains", "Acme"))
ACME_CONDITIONS = (Condition("company_name", Op.ICONTAINS, "Acme", "llm"),)


def extract(text: str, model: BaseChatModel) -> tuple[Condition, ...]:
    """The conditions an unmetered extractor over ``model`` reads in ``text``."""
    return SchemaFilterExtractor(model, budget=lambda: True)(extraction_request(text)).conditions


class TestFilterExtractionOverOpenAI:
    def test_structured_output_request_and_answer(
        self, make_llm: Callable[..., BaseChatModel]
    ) -> None:
        """A json_schema request goes to the base URL with the key; the answer is checked."""
        server = FakeOpenAI(httpx.Response(200, json=completion(json.dumps(ACME))))
        assert extract("people at acme please", make_llm(server)) == ACME_CONDITIONS
        request = server.requests[0]
        assert str(request.url) == f"{BASE_URL}/chat/completions"
        assert request.headers["authorization"] == "Bearer sk-test"
        body = server.bodies()[0]
        assert body["model"] == "gpt-4o-mini" and body["temperature"] == 0
        assert body["response_format"]["type"] == "json_schema"
        assert body["messages"][-1] == {"role": "user", "content": "people at acme please"}

    def test_server_error_counts_as_no_filters(
        self, make_llm: Callable[..., BaseChatModel]
    ) -> None:
        """A 500 (after the bounded retries) is no conditions, not an exception."""
        server = FakeOpenAI(httpx.Response(500, json={"error": {"message": "down"}}))
        assert extract("acme", make_llm(server, max_retries=0)) == ()
        assert len(server.requests) == 1

    def test_rate_limited_request_is_retried(self, make_llm: Callable[..., BaseChatModel]) -> None:
        """A 429 with a retry-after hint is retried once, then succeeds."""
        server = FakeOpenAI(
            httpx.Response(429, headers={"retry-after-ms": "1"}, json={"error": {}}),
            httpx.Response(200, json=completion(json.dumps(ACME))),
        )
        assert extract("acme", make_llm(server, max_retries=1)) == ACME_CONDITIONS
        assert len(server.requests) == 2

    def test_read_timeout_counts_as_no_filters(
        self, make_llm: Callable[..., BaseChatModel]
    ) -> None:
        """A transport timeout is no conditions."""

        def timeout(request: httpx.Request) -> httpx.Response:
            raise httpx.ReadTimeout("timed out", request=request)

        server = FakeOpenAI(timeout)
        assert extract("acme", make_llm(server, max_retries=0)) == ()


class TestFallbackOverOpenAI:
    @pytest.fixture
    def facade(self, store: MemoryStore) -> Any:
        create_persistence_agent(kind="memory", store=store).batch(
            "leads",
            [
                {"id": 1, "email": "ana@acme.example", "company_name": "Acme Inc."},
                {"id": 2, "email": "bo@globex.example", "company_name": "Globex"},
            ],
        )
        return create_read_only_facade(kind="memory", store=store)

    def test_tool_calls_round_trip(
        self, facade: Any, make_llm: Callable[..., BaseChatModel]
    ) -> None:
        """OpenAI tool_calls drive the tools; the final answer selects rows that were read."""
        query = {
            "name": "query_table",
            "args": {
                "table": "leads",
                "filters": [{"column": "company_name", "op": "icontains", "value": "acme"}],
            },
        }
        answer = {"name": "FinalAnswer", "args": {"answer": "Ana", "rows": [{"id": 1}, {"id": 2}]}}
        server = FakeOpenAI(
            httpx.Response(200, json=completion(tool_calls=[query])),
            httpx.Response(200, json=completion(tool_calls=[answer])),
        )
        result = AgentFallback(facade, make_llm(server), now=lambda: NOW).run("acme people")
        assert [e.row["id"] for e in result.records] == [1]
        assert result.dropped_ids == 1 and result.model_calls == 2

        first, second = server.bodies()
        names = {tool["function"]["name"] for tool in first["tools"]}
        assert names == {
            "list_tables",
            "list_columns",
            "query_table",
            "count_rows",
            "aggregate_table",
            "search_table",
            "FinalAnswer",
        }
        assert first["tool_choice"] == "required"
        tool_reply = next(m for m in second["messages"] if m["role"] == "tool")
        assert tool_reply["tool_call_id"] == "call_0"
        assert "<<untrusted-data " in tool_reply["content"]
        assert "ana@acme.example" in tool_reply["content"]

    def test_api_error_ends_in_an_error_result(
        self, facade: Any, make_llm: Callable[..., BaseChatModel]
    ) -> None:
        """An authentication error from the API is an error result naming the error type."""
        server = FakeOpenAI(httpx.Response(401, json={"error": {"message": "bad key"}}))
        result = AgentFallback(facade, make_llm(server, max_retries=0)).run("acme")
        assert "AuthenticationError" in (result.error_type or "") and result.records == ()
