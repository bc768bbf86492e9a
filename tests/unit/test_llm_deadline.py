"""One LLM deadline per run: extraction and fallback share it, no worker thread outlives it,
and a fallback's answer is asked for once however many pages are read."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from langchain_openai import ChatOpenAI
from pydantic import Field
from structlog.testing import capture_logs

from persistence import (
    MemoryStore,
    ReadOnlyPersistenceFacade,
    create_persistence_agent,
    create_read_only_facade,
)
from rag_agent import RAGAgent, RAGSettings
from rag_agent.fallback import AgentFallback
from rag_agent.fallback import runner as fallback_runner
from rag_agent.runtime.deadline import (
    LLMDeadline,
    add_thinking_listener,
    current_deadline,
    deadline_scope,
    extraction_timeout,
    remove_thinking_listener,
    thinking,
    timeout_kwargs,
)
from rag_agent.understanding.llm.chat_model import resolve_llm
from tests.support.extraction import answer
from tests.unit.test_llm_scripted import ScriptedChatModel, call, calls, final

NO_FILTERS = "who scores highest?"  # the rules read nothing here


@pytest.fixture
def facade(store: MemoryStore) -> ReadOnlyPersistenceFacade:
    writer = create_persistence_agent(kind="memory", store=store)
    writer.batch(
        "leads",
        [
            {"id": i, "email": f"p{i}@acme.example", "company_name": "Acme Inc.", "score": 9}
            for i in range(1, 6)
        ],
    )
    return create_read_only_facade(kind="memory", store=store)


class BlockingModel(ScriptedChatModel):
    """A model whose every call hangs until its request timeout, then fails as an HTTP client
    does; its own ``timeout`` is the default, a per-call ``timeout`` wins (as ``ChatOpenAI``)."""

    timeout: float = 30.0
    release: Any = None
    timeouts: list[float] = Field(default_factory=list)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        limit = kwargs.get("timeout", self.timeout)
        self.timeouts.append(limit)
        self.release.wait(limit)
        raise TimeoutError("request timed out")


class DeafModel(BlockingModel):
    """A model that ignores its timeout: it hangs until released."""

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.release.wait(30)
        raise TimeoutError("released")


def fallback_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "rag-fallback" and t.is_alive()]


class TestDeadline:
    def test_remaining_and_expiry_follow_the_clock(self) -> None:
        """The deadline counts down on the injected clock and never goes below zero."""
        now = [100.0]
        deadline = LLMDeadline(30.0, clock=lambda: now[0])
        assert deadline.remaining() == 30.0 and not deadline.expired
        assert deadline.extraction_timeout() == extraction_timeout(30.0) == 7.5
        now[0] += 28.0
        assert deadline.extraction_timeout() == pytest.approx(2.0)
        now[0] += 5.0
        assert deadline.remaining() == 0.0 and deadline.expired

    def test_scope_is_per_context(self) -> None:
        """The current deadline is set inside the block only."""
        deadline = LLMDeadline(5.0)
        assert current_deadline() is None
        with deadline_scope(deadline):
            assert current_deadline() is deadline
        assert current_deadline() is None

    def test_non_positive_deadline_is_refused(self) -> None:
        """A deadline of zero seconds is a mistake, not an instant timeout."""
        with pytest.raises(ValueError, match="positive"):
            LLMDeadline(0)

    def test_timeout_only_for_models_that_take_one(self) -> None:
        """A model declaring a timeout gets one per call; others get no unknown argument."""
        release = threading.Event()
        assert timeout_kwargs(BlockingModel(script=[], release=release), 2.0) == {"timeout": 2.0}
        assert timeout_kwargs(ScriptedChatModel(script=[]), 2.0) == {}
        # A client that retries shares the time between its tries.
        openai = ChatOpenAI(api_key="sk-test", max_retries=1)  # type: ignore[arg-type]
        assert timeout_kwargs(openai, 2.0) == {"timeout": 1.0}

    def test_thinking_listeners_hear_start_and_end(self) -> None:
        """Listeners hear a step start and end; one that raises breaks nothing."""
        heard: list[tuple[str, bool]] = []

        def listener(step: str, started: bool) -> None:
            heard.append((step, started))

        def broken(step: str, started: bool) -> None:
            raise RuntimeError("display gone")

        add_thinking_listener(broken)
        add_thinking_listener(listener)
        try:
            with thinking("filters"):
                pass
        finally:
            remove_thinking_listener(broken)
            remove_thinking_listener(listener)
        assert heard == [("filters", True), ("filters", False)]
        with thinking("fallback"):
            pass
        assert len(heard) == 2  # removed listeners hear nothing


class TestWorkerThreads:
    def test_no_thread_outlives_the_fallback_timeout(
        self, facade: ReadOnlyPersistenceFacade
    ) -> None:
        """A hanging model is given the seconds left; when the timeout passes, the run returns
        and its worker thread has ended."""
        release = threading.Event()
        model = BlockingModel(script=[], release=release, timeouts=[])
        # Long enough that building the agent never uses it all up on a loaded machine, so
        # the model is always reached (0.3 s was not, with eight processes on two cores).
        timeout = 1.0
        try:
            outcome = AgentFallback(facade, model, timeout_seconds=timeout).run("acme")
            assert fallback_threads() == []
        finally:
            release.set()
        assert outcome.stopped in {"timeout", "error"} and outcome.records == ()
        assert len(model.timeouts) == 1 and 0 < model.timeouts[0] <= timeout

    def test_a_model_ignoring_its_timeout_is_reported(
        self, facade: ReadOnlyPersistenceFacade, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The caller is not held past the timeout and a grace; the overrun is logged."""
        monkeypatch.setattr(fallback_runner, "JOIN_GRACE_SECONDS", 0.05)
        release = threading.Event()
        model = DeafModel(script=[], release=release, timeouts=[])
        try:
            with capture_logs() as logs:
                outcome = AgentFallback(facade, model, timeout_seconds=0.1).run("acme")
        finally:
            release.set()
        assert outcome.stopped == "timeout"
        assert any(log["event"] == "rag.fallback.overrun" for log in logs)

    def test_one_deadline_covers_extraction_and_fallback(
        self, facade: ReadOnlyPersistenceFacade
    ) -> None:
        """Extraction waits its own request timeout, the fallback gets what is left, and once
        run() returns no fallback thread is alive."""
        deadline = 0.6
        release = threading.Event()
        model = BlockingModel(
            script=[], release=release, timeout=extraction_timeout(deadline), timeouts=[]
        )
        agent = RAGAgent(facade, settings=RAGSettings(llm_deadline_s=deadline), llm=model)
        try:
            envelope = agent.run(NO_FILTERS, return_json=True)
            assert fallback_threads() == []
        finally:
            release.set()
        assert envelope["records"] == []
        extraction, *fallback = model.timeouts
        assert extraction == extraction_timeout(deadline)  # the model's own, not a per-call one
        assert len(fallback) == 1 and 0 < fallback[0] <= deadline - extraction

    def test_no_model_call_after_the_deadline(self, facade: ReadOnlyPersistenceFacade) -> None:
        """Extraction that used the whole deadline leaves no time: the fallback is suppressed."""
        release = threading.Event()
        model = BlockingModel(script=[], release=release, timeout=0.3, timeouts=[])
        agent = RAGAgent(facade, settings=RAGSettings(llm_deadline_s=0.2), llm=model)
        try:
            envelope = agent.run(NO_FILTERS, return_json=True)
        finally:
            release.set()
        assert len(model.timeouts) == 1  # extraction only
        assert envelope["metadata"]["fallback"] == "suppressed"


class TestFallbackCache:
    def test_paging_asks_the_model_once(self, facade: ReadOnlyPersistenceFacade) -> None:
        """The next page of a fallback's answer comes from the cache: no model call, no budget."""
        query = calls(
            call(
                "query_table", table="leads", filters=[{"column": "score", "op": "gte", "value": 9}]
            )
        )
        model = ScriptedChatModel(
            script=[
                calls(call("UnderstoodRequest", **answer())),  # extraction: nothing understood
                query,
                final(*(("leads", i) for i in range(1, 6))),
            ]
        )
        agent = RAGAgent(facade, settings=RAGSettings(), llm=model)
        first = agent.run(NO_FILTERS, limit=2, return_json=True)
        calls_made = len(model.requests)
        second = agent.run(NO_FILTERS, limit=2, offset=2, return_json=True)
        assert first["metadata"]["fallback"] == second["metadata"]["fallback"] == "agent"
        assert len(model.requests) == calls_made  # extraction is cached too
        assert [r["id"] for r in first["records"]] == [1, 2]
        assert [r["id"] for r in second["records"]] == [3, 4]
        assert second["metadata"]["cache"] == "hit"

    def test_errors_are_not_cached(self, facade: ReadOnlyPersistenceFacade) -> None:
        """A failed fallback is asked again next time (it may have been a passing outage)."""
        model = ScriptedChatModel(
            script=[
                calls(call("UnderstoodRequest", **answer())),
                RuntimeError("down"),
                RuntimeError("down"),
            ]
        )
        agent = RAGAgent(facade, settings=RAGSettings(), llm=model)
        agent.run(NO_FILTERS, return_json=True)
        before = len(model.requests)
        agent.run(NO_FILTERS, offset=1, return_json=True)
        assert len(model.requests) == before + 1


class TestOpenAIClient:
    def test_request_timeouts_follow_the_deadline(self, facade: ReadOnlyPersistenceFacade) -> None:
        """With the real ChatOpenAI: each extraction try waits a quarter of the deadline, each
        fallback request a share of what is left, and the worker thread ends on its own soon
        after run() returns (the endpoint answers nothing; the transport honours each request's
        timeout, and the client's back-off between tries may carry the last one past the
        deadline: run() does not wait for it)."""
        deadline = 2.0
        release = threading.Event()
        seen: list[float] = []

        def silent(request: httpx.Request) -> httpx.Response:
            read = request.extensions["timeout"]["read"]
            seen.append(read)
            release.wait(read)
            raise httpx.ReadTimeout("no answer", request=request)

        settings = RAGSettings(
            openai_api_key="sk-test", openai_base_url="http://llm.test/v1", llm_deadline_s=deadline
        )
        model = resolve_llm(
            None, settings, http_client=httpx.Client(transport=httpx.MockTransport(silent))
        )
        assert isinstance(model, ChatOpenAI) and model.max_retries == 1
        agent = RAGAgent(facade, settings=settings, llm=model)
        try:
            with capture_logs() as logs:
                envelope = agent.run(NO_FILTERS, return_json=True)
            for thread in fallback_threads():
                thread.join(deadline)  # its own request timeout ends it, with no release
            assert fallback_threads() == []
        finally:
            release.set()
        assert envelope["records"] == []
        extraction, fallback = seen[:2], seen[2:]
        assert extraction == [extraction_timeout(deadline)] * 2  # one try and one retry
        if fallback:  # extraction and its back-off may leave too little for the fallback
            assert all(0 < t <= (deadline - sum(extraction)) / 2 for t in fallback)
            assert envelope["metadata"]["fallback"] == "agent"
        overruns = [log for log in logs if log["event"] == "rag.fallback.overrun"]
        assert all("left to end" in log["reason"] for log in overruns)
