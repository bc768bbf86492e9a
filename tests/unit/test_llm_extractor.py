"""SchemaFilterExtractor: structured output, fallbacks, metering, caching and failures."""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import httpx
import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable
from pydantic import Field
from structlog.testing import capture_logs

from persistence import ConfigurationError, Op
from rag_agent.runtime.ratelimit import MemorySlidingWindowLimiter
from rag_agent.settings import RAGSettings
from rag_agent.specs import ColumnInfo, Condition, ExtractionRequest, Understanding
from rag_agent.understanding.llm.chat_model import resolve_llm
from rag_agent.understanding.llm.extract import SchemaFilterExtractor
from rag_agent.understanding.llm.schema import SCHEMA_NAME
from tests.support.clocks import FakeClock
from tests.support.extraction import (
    LEADS_COLUMNS,
    NOW,
    answer,
    cond,
    extraction_request,
    strict_schema_problems,
)
from tests.unit.test_llm_openai import BASE_URL, FakeOpenAI, completion
from tests.unit.test_llm_scripted import ScriptedChatModel, call, calls

ACME_80 = answer(cond("company_name", "icontains", "Acme"), cond("score", "gt", 80))
ACME_80_TEXT = "leads at Acme with a score above 80"
ACME_80_CONDITIONS = (
    Condition("company_name", Op.ICONTAINS, "Acme", "llm"),
    Condition("score", Op.GT, 80, "llm"),
)


def structured(payload: dict[str, Any]) -> AIMessage:
    """An assistant message answering through the generated schema (as a tool call)."""
    return calls(call(SCHEMA_NAME, **payload))


class Budget:
    """Counts how often it is asked; answers ``allowed``."""

    def __init__(self, allowed: bool = True) -> None:
        self.allowed = allowed
        self.asked = 0

    def __call__(self) -> bool:
        self.asked += 1
        return self.allowed


class RecordingModel(ScriptedChatModel):
    """Records the options of every structured-output request; refuses them when ``refuse``."""

    refuse: bool = False
    structured_options: list[dict[str, Any]] = Field(default_factory=list)

    def with_structured_output(
        self, schema: Any, *, include_raw: bool = False, **options: Any
    ) -> Runnable[Any, Any]:
        self.structured_options.append(dict(options))
        if self.refuse and options:
            raise ValueError(f"unsupported options {options}")
        return super().with_structured_output(schema, include_raw=include_raw, **options)


class TextOnlyModel(ScriptedChatModel):
    """A model without tool calling or structured output: it only answers text."""

    bind_tools = BaseChatModel.bind_tools  # type: ignore[assignment]


def extractor(
    model: BaseChatModel, budget: Callable[[], bool] | None = None, **options: Any
) -> SchemaFilterExtractor:
    """An extractor over ``model``, unmetered unless a ``budget`` is given."""
    return SchemaFilterExtractor(model, budget=budget or (lambda: True), **options)


def system_text(messages: Sequence[BaseMessage]) -> str:
    """The system prompt of one recorded request."""
    return str(messages[0].content)


class TestStructuredOutput:
    def test_answers_through_the_generated_schema(self) -> None:
        """A tool-calling model answers through the schema; the checked conditions come back."""
        model = ScriptedChatModel(script=[structured(ACME_80)])
        result = extractor(model)(extraction_request(ACME_80_TEXT))
        assert result.conditions == ACME_80_CONDITIONS
        assert model.bound_tools == [[SCHEMA_NAME]]
        system = system_text(model.requests[0])
        assert "2025-05-07T10:30:00Z" in system and "- score: integer;" in system
        assert model.requests[0][-1].content == ACME_80_TEXT

    def test_asks_for_strict_json_schema_first(self) -> None:
        """The first structured-output request is method='json_schema', strict=True."""
        model = RecordingModel(script=[structured(ACME_80)])
        assert extractor(model)(extraction_request(ACME_80_TEXT)).conditions
        assert model.structured_options == [{"method": "json_schema", "strict": True}]

    def test_falls_back_to_the_default_method(self) -> None:
        """A model refusing json_schema/strict is asked with its default method."""
        model = RecordingModel(refuse=True, script=[structured(ACME_80)])
        result = extractor(model)(extraction_request(ACME_80_TEXT))
        assert result.conditions == ACME_80_CONDITIONS
        assert model.structured_options == [{"method": "json_schema", "strict": True}, {}]

    def test_falls_back_to_json_in_text(self) -> None:
        """A model without structured output sees the schema in the prompt; its JSON is read."""
        reply = "Sure:\n```json\n" + json.dumps(ACME_80) + "\n```"
        model = TextOnlyModel(script=[AIMessage(reply)])
        result = extractor(model)(extraction_request(ACME_80_TEXT))
        assert result.conditions == ACME_80_CONDITIONS
        assert '"title": "UnderstoodRequest"' in system_text(model.requests[0])

    def test_prose_from_a_structured_model_is_read(self) -> None:
        """A tool-calling model answering in prose is read with the JSON reader."""
        model = ScriptedChatModel(script=[AIMessage("Here: " + json.dumps(ACME_80))])
        assert extractor(model)(extraction_request(ACME_80_TEXT)).conditions == ACME_80_CONDITIONS

    def test_the_answer_is_checked(self) -> None:
        """Inventions in a well-formed answer are dropped into ignored."""
        invented = answer(cond("company_name", "icontains", "Initech"), cond("id", "eq", 7))
        model = ScriptedChatModel(script=[structured(invented)])
        result = extractor(model)(extraction_request("the people we met in Berlin, lead 12"))
        assert result.conditions == ()
        assert len(result.ignored) == 2


class TestFailures:
    def test_model_error_gives_nothing_and_a_log(self) -> None:
        """A model that raises gives an empty Understanding saying why, and a warning."""
        model = ScriptedChatModel(script=[TimeoutError("read timed out")])
        with capture_logs() as logs:
            result = extractor(model)(extraction_request(ACME_80_TEXT))
        assert result.conditions == () and "TimeoutError" in result.ignored[0].reason
        assert any(
            e["event"] == "rag.filters.llm" and e.get("outcome") == "model_error" for e in logs
        )

    def test_unreadable_answer_gives_nothing(self) -> None:
        """Prose without JSON gives no conditions."""
        model = ScriptedChatModel(script=[AIMessage("Acme, I guess.")])
        result = extractor(model)(extraction_request(ACME_80_TEXT))
        assert result.conditions == () and "could not be read" in result.ignored[0].reason

    def test_failures_are_not_cached(self) -> None:
        """After a failure, the same question asks the model again."""
        model = ScriptedChatModel(script=[TimeoutError("slow"), structured(ACME_80)])
        extract = extractor(model)
        assert extract(extraction_request(ACME_80_TEXT)).conditions == ()
        assert extract(extraction_request(ACME_80_TEXT)).conditions == ACME_80_CONDITIONS

    @pytest.mark.parametrize("text", ["", "   \n"])
    def test_blank_text_never_calls_the_model(self, text: str) -> None:
        """Nothing to read means no model call and no budget."""
        budget = Budget()
        model = ScriptedChatModel(script=[])
        assert extractor(model, budget)(extraction_request(text)) == Understanding()
        assert model.requests == [] and budget.asked == 0

    def test_no_offered_column_never_calls_the_model(self) -> None:
        """A table with nothing to filter on is answered without the model."""
        model = ScriptedChatModel(script=[])
        columns = (ColumnInfo("profile", "json", ("eq",)),)
        result = extractor(model)(extraction_request("acme", columns=columns))
        assert result.conditions == () and "no column" in result.ignored[0].reason
        assert model.requests == []

    def test_a_wrong_request_type_is_a_type_error(self) -> None:
        """Passing text instead of an ExtractionRequest is a developer's mistake."""
        with pytest.raises(TypeError, match="ExtractionRequest"):
            extractor(ScriptedChatModel(script=[]))("acme")  # type: ignore[arg-type]

    @pytest.mark.parametrize(
        "options",
        [
            {"budget": None},
            {"budget": True},
            {"cache_maxsize": -1},
            {"cache_maxsize": 1.5},
            {"cache_ttl": 0},
            {"cache_ttl": "300"},
        ],
    )
    def test_bad_options_are_configuration_errors(self, options: dict[str, Any]) -> None:
        """Bad constructor arguments raise ConfigurationError."""
        arguments: dict[str, Any] = {"budget": lambda: True, **options}
        with pytest.raises(ConfigurationError):
            SchemaFilterExtractor(ScriptedChatModel(script=[]), **arguments)

    def test_a_non_model_is_a_configuration_error(self) -> None:
        """Only LangChain chat models are accepted."""
        with pytest.raises(ConfigurationError, match="chat model"):
            SchemaFilterExtractor("gpt-4o", budget=lambda: True)  # type: ignore[arg-type]


class TestMetering:
    def test_a_refused_budget_makes_no_call(self) -> None:
        """Over budget, the model is not called and the result says so."""
        budget = Budget(allowed=False)
        model = ScriptedChatModel(script=[])
        result = extractor(model, budget)(extraction_request(ACME_80_TEXT))
        assert model.requests == [] and budget.asked == 1
        assert result.conditions == () and "budget" in result.ignored[0].reason

    def test_a_failing_budget_refuses(self) -> None:
        """A budget that raises (an unreachable limiter) counts as refused."""

        def unreachable() -> bool:
            raise ConnectionError("redis down")

        model = ScriptedChatModel(script=[])
        with capture_logs() as logs:
            result = extractor(model, unreachable)(extraction_request(ACME_80_TEXT))
        assert model.requests == [] and "budget" in result.ignored[0].reason
        assert any(e.get("outcome") == "budget_error" for e in logs)

    def test_only_a_real_true_allows(self) -> None:
        """A budget answering something truthy but not True refuses."""
        model = ScriptedChatModel(script=[])
        extractor(model, lambda: 1)(extraction_request(ACME_80_TEXT))  # type: ignore[arg-type,return-value]
        assert model.requests == []

    def test_extraction_and_fallback_share_one_limiter(self) -> None:
        """With the fallback's limiter as budget, extraction spends units the fallback lacks."""
        limiter = MemorySlidingWindowLimiter(1, 60, clock=FakeClock())
        model = ScriptedChatModel(script=[structured(ACME_80)])
        extract = extractor(model, limiter.try_acquire)
        assert extract(extraction_request(ACME_80_TEXT)).conditions == ACME_80_CONDITIONS
        assert limiter.try_acquire() is False
        other = extract(extraction_request("leads at Globex"))
        assert other.conditions == () and len(model.requests) == 1


class TestCache:
    def test_a_repeated_question_costs_no_call_and_no_budget(self) -> None:
        """The second identical request is served from the cache."""
        budget = Budget()
        model = ScriptedChatModel(script=[structured(ACME_80)])
        extract = extractor(model, budget)
        first = extract(extraction_request(ACME_80_TEXT))
        with capture_logs() as logs:
            second = extract(extraction_request(ACME_80_TEXT))
        assert first == second and second.conditions == ACME_80_CONDITIONS
        assert len(model.requests) == 1 and budget.asked == 1
        assert [e.get("outcome") for e in logs] == ["cache_hit"]

    def test_a_hit_needs_no_budget_even_when_it_is_spent(self) -> None:
        """A cached answer is served even when the budget would refuse a call."""
        budget = Budget()
        model = ScriptedChatModel(script=[structured(ACME_80)])
        extract = extractor(model, budget)
        extract(extraction_request(ACME_80_TEXT))
        budget.allowed = False
        assert extract(extraction_request(ACME_80_TEXT)).conditions == ACME_80_CONDITIONS

    @pytest.mark.parametrize(
        "other",
        [
            extraction_request("leads at Acme with a score above 81"),
            extraction_request(ACME_80_TEXT, table="staging_leads"),
            extraction_request(
                ACME_80_TEXT, columns=tuple(c for c in LEADS_COLUMNS if c.name != "status")
            ),
            extraction_request(ACME_80_TEXT, now=NOW + dt.timedelta(days=1)),
        ],
        ids=["text", "table", "schema", "utc-day"],
    )
    def test_the_key_is_table_text_schema_and_day(self, other: ExtractionRequest) -> None:
        """Another text, table, schema or UTC day is another model call."""
        model = ScriptedChatModel(script=[structured(ACME_80), structured(answer())])
        extract = extractor(model)
        extract(extraction_request(ACME_80_TEXT))
        extract(other)
        assert len(model.requests) == 2

    def test_the_same_day_hits(self) -> None:
        """Later the same UTC day, the answer is still cached."""
        model = ScriptedChatModel(script=[structured(ACME_80)])
        extract = extractor(model)
        extract(extraction_request(ACME_80_TEXT))
        later = extraction_request(ACME_80_TEXT, now=NOW + dt.timedelta(hours=5))
        assert extract(later).conditions == ACME_80_CONDITIONS

    def test_entries_expire_by_the_injected_timer(self) -> None:
        """After the TTL on the injected clock, the model is asked again."""
        clock = FakeClock()
        model = ScriptedChatModel(script=[structured(ACME_80), structured(ACME_80)])
        extract = extractor(model, cache_ttl=60, timer=clock)
        extract(extraction_request(ACME_80_TEXT))
        clock.advance(59)
        extract(extraction_request(ACME_80_TEXT))
        assert len(model.requests) == 1
        clock.advance(2)
        extract(extraction_request(ACME_80_TEXT))
        assert len(model.requests) == 2

    def test_the_cache_is_bounded(self) -> None:
        """Past maxsize the oldest answer is evicted."""
        model = ScriptedChatModel(script=[structured(answer())] * 3)
        extract = extractor(model, cache_maxsize=1)
        extract(extraction_request("first question"))
        extract(extraction_request("second question"))
        extract(extraction_request("first question"))
        assert len(model.requests) == 3

    def test_size_zero_turns_the_cache_off(self) -> None:
        """cache_maxsize=0 asks the model every time."""
        model = ScriptedChatModel(script=[structured(ACME_80), structured(ACME_80)])
        extract = extractor(model, cache_maxsize=0)
        extract(extraction_request(ACME_80_TEXT))
        extract(extraction_request(ACME_80_TEXT))
        assert len(model.requests) == 2

    def test_threads_get_their_own_answers(self) -> None:
        """Eight threads asking different questions each get the answer to theirs."""

        def echo_number(messages: list[BaseMessage]) -> AIMessage:
            number = str(messages[-1].content).split()[-1]
            return structured(answer(cond("score", "eq", int(number))))

        model = ScriptedChatModel(script=[echo_number] * 8)
        extract = extractor(model)
        results: dict[int, Understanding] = {}

        def ask(number: int) -> None:
            results[number] = extract(extraction_request(f"leads with score {number}"))

        threads = [threading.Thread(target=ask, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert {n: r.conditions for n, r in results.items()} == {
            n: (Condition("score", Op.EQ, n, "llm"),) for n in range(8)
        }


@pytest.fixture
def openai_model() -> Iterator[Callable[[FakeOpenAI], BaseChatModel]]:
    """A real ChatOpenAI (no retries) whose HTTP goes to a FakeOpenAI server."""
    opened: list[httpx.Client] = []

    def make(server: FakeOpenAI) -> BaseChatModel:
        client = httpx.Client(transport=httpx.MockTransport(server))
        opened.append(client)
        settings = RAGSettings(openai_api_key="sk-test", openai_base_url=BASE_URL)
        model = resolve_llm(None, settings, http_client=client, max_retries=0)
        assert model is not None
        return model

    yield make
    for client in opened:
        client.close()


class TestOverOpenAI:
    def test_the_wire_request_is_strict_json_schema(
        self, openai_model: Callable[[FakeOpenAI], BaseChatModel]
    ) -> None:
        """ChatOpenAI sends a strict json_schema response format that strict mode accepts."""
        server = FakeOpenAI(httpx.Response(200, json=completion(json.dumps(ACME_80))))
        result = extractor(openai_model(server))(extraction_request(ACME_80_TEXT))
        assert result.conditions == ACME_80_CONDITIONS
        body = server.bodies()[0]
        response_format = body["response_format"]
        assert response_format["type"] == "json_schema"
        assert response_format["json_schema"]["name"] == SCHEMA_NAME
        assert response_format["json_schema"]["strict"] is True
        schema = response_format["json_schema"]["schema"]
        assert strict_schema_problems(schema) == []
        columns = {
            column
            for variant in schema["properties"]["conditions"]["items"]["anyOf"]
            for column in variant["properties"]["column"]["enum"]
        }
        assert "company_name" in columns and "profile" not in columns
        assert body["messages"][0]["role"] == "system"
        assert "2025-05-07T10:30:00Z" in body["messages"][0]["content"]
        assert body["messages"][-1] == {"role": "user", "content": ACME_80_TEXT}

    def test_a_server_error_gives_nothing(
        self, openai_model: Callable[[FakeOpenAI], BaseChatModel]
    ) -> None:
        """A server error is an empty Understanding, not an exception."""
        server = FakeOpenAI(httpx.Response(500, json={"error": {"message": "down"}}))
        result = extractor(openai_model(server))(extraction_request(ACME_80_TEXT))
        assert result.conditions == () and "failed" in result.ignored[0].reason
        assert len(server.requests) == 1
