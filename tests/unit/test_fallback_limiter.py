"""The fallback through the pipeline's sliding-window limiter: over budget, no LLM call."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable

from persistence import MemoryStore, ReadOnlyPersistenceFacade, create_read_only_facade
from rag_agent import RAGAgent, RAGSettings
from rag_agent.fallback import create_fallback_runner
from rag_agent.runtime.ratelimit import (
    MemorySlidingWindowLimiter,
    RateLimiter,
    RedisSlidingWindowLimiter,
)
from rag_agent.specs import Understanding
from tests.unit.test_llm_scripted import ScriptedChatModel, final

NO_FILTERS = "???"  # the rules find nothing here, so every run goes to the fallback
BUDGET = 5
WINDOW = 60.0


class AnsweringModel(BaseChatModel):
    """A thread-safe model that answers at once (citing nothing) and counts its calls."""

    calls: int = 0
    lock: Any = None

    def model_post_init(self, context: Any) -> None:
        self.lock = threading.Lock()

    @property
    def _llm_type(self) -> str:
        return "answering"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Runnable[Any, Any]:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        with self.lock:
            self.calls += 1
        return ChatResult(generations=[ChatGeneration(message=final())])


class TickClock:
    """Every call moves time forward by ``tick`` seconds and remembers, per thread, what it said."""

    def __init__(self, tick: float) -> None:
        self.tick = tick
        self.now = 0.0
        self._lock = threading.Lock()
        self._local = threading.local()

    def __call__(self) -> float:
        with self._lock:
            self.now += self.tick
            self._local.last = self.now
            return self.now

    @property
    def last_in_this_thread(self) -> float:
        value: float = self._local.last
        return value


class RecordingLimiter:
    """Wraps a limiter; records the clock reading of every acquisition it allowed."""

    def __init__(self, inner: RateLimiter, clock: TickClock) -> None:
        self.inner = inner
        self.limit = inner.limit
        self.window = inner.window
        self.clock = clock
        self.allowed: list[float] = []
        self._lock = threading.Lock()

    def try_acquire(self) -> bool:
        allowed = self.inner.try_acquire()
        if allowed:
            with self._lock:
                self.allowed.append(self.clock.last_in_this_thread)
        return allowed


def agent_with(
    facade: ReadOnlyPersistenceFacade, llm: BaseChatModel, limiter: RateLimiter
) -> RAGAgent:
    settings = RAGSettings(cache_disabled=True)
    return RAGAgent(
        facade,
        settings=settings,
        llm=llm,
        extractor=lambda _request: Understanding(),
        fallback=create_fallback_runner(facade, llm, settings=settings),
        limiter=limiter,
    )


@pytest.fixture
def facade(store: MemoryStore) -> ReadOnlyPersistenceFacade:
    return create_read_only_facade(kind="memory", store=store)


class TestSuppression:
    def test_over_budget_is_suppressed_without_a_model_call(
        self, facade: ReadOnlyPersistenceFacade
    ) -> None:
        """Past the budget the envelope says suppressed, has no records, and the LLM is idle."""
        now = [0.0]
        model = ScriptedChatModel(script=[final()])
        limiter = MemorySlidingWindowLimiter(limit=1, clock=lambda: now[0])
        agent = agent_with(facade, model, limiter)
        first = agent.run(NO_FILTERS, return_json=True)
        second = agent.run(NO_FILTERS, return_json=True)
        assert first["metadata"]["fallback"] == "agent"
        assert second["metadata"]["fallback"] == "suppressed"
        assert second["records"] == [] and second["metadata"]["total_count"] == 0
        assert len(model.requests) == 1

    def test_budget_returns_after_the_window(self, facade: ReadOnlyPersistenceFacade) -> None:
        """Sixty seconds after an acquisition, the fallback runs again."""
        now = [0.0]
        model = ScriptedChatModel(script=[final(), final()])
        agent = agent_with(facade, model, MemorySlidingWindowLimiter(1, clock=lambda: now[0]))
        agent.run(NO_FILTERS)
        now[0] += 59.9
        assert agent.run(NO_FILTERS).metadata.fallback == "suppressed"
        now[0] += 0.1
        assert agent.run(NO_FILTERS).metadata.fallback == "agent"
        assert len(model.requests) == 2

    def test_zero_budget_never_calls_the_model(self, facade: ReadOnlyPersistenceFacade) -> None:
        """RAG_MAX_FALLBACKS_PER_MIN=0 switches the fallback off without a single model call."""
        model = ScriptedChatModel(script=[])
        agent = agent_with(facade, model, MemorySlidingWindowLimiter(0))
        assert agent.run(NO_FILTERS).metadata.fallback == "suppressed"
        assert model.requests == []

    def test_unreachable_limiter_storage_fails_closed(
        self, facade: ReadOnlyPersistenceFacade
    ) -> None:
        """When the shared budget cannot be read, the fallback is suppressed, the LLM idle."""
        model = ScriptedChatModel(script=[])
        limiter = RedisSlidingWindowLimiter("redis://127.0.0.1:1/0", BUDGET, socket_timeout=0.2)
        envelope = agent_with(facade, model, limiter).run(NO_FILTERS)
        assert envelope.metadata.fallback == "suppressed"
        assert envelope.metadata.error is not None and envelope.records == []
        assert model.requests == []


def _max_in_any_window(stamps: list[float], window: float) -> int:
    stamps = sorted(stamps)
    best = 0
    for i, start in enumerate(stamps):
        inside = sum(1 for t in stamps[i:] if t < start + window)
        best = max(best, inside)
    return best


class TestUnderConcurrency:
    THREADS = 8
    RUNS_PER_THREAD = 40

    def _hammer(self, agent: RAGAgent) -> list[str]:
        outcomes: list[str] = []
        lock = threading.Lock()

        def work() -> None:
            for _ in range(self.RUNS_PER_THREAD):
                fallback = agent.run(NO_FILTERS).metadata.fallback
                with lock:
                    outcomes.append(str(fallback))

        threads = [threading.Thread(target=work) for _ in range(self.THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return outcomes

    @pytest.mark.parametrize("storage", ["memory", "redis"])
    def test_never_more_than_the_budget_in_any_window(
        self,
        facade: ReadOnlyPersistenceFacade,
        storage: str,
        request: pytest.FixtureRequest,
    ) -> None:
        """Eight threads running the pipeline never get more than the budget per 60 s window."""
        clock = TickClock(0.5)  # 320 runs span 160 s: almost three windows
        inner: RateLimiter
        if storage == "memory":
            inner = MemorySlidingWindowLimiter(BUDGET, WINDOW, clock=clock)
        else:
            url: str = request.getfixturevalue("redis_url")
            prefix: str = request.getfixturevalue("redis_key_prefix")
            inner = RedisSlidingWindowLimiter(url, BUDGET, WINDOW, key=f"{prefix}fb", clock=clock)
        limiter = RecordingLimiter(inner, clock)
        model = AnsweringModel()
        outcomes = self._hammer(agent_with(facade, model, limiter))

        assert len(outcomes) == self.THREADS * self.RUNS_PER_THREAD
        assert _max_in_any_window(limiter.allowed, WINDOW) <= BUDGET
        assert outcomes.count("agent") == len(limiter.allowed) == model.calls
        # Demand never stops, so every window that fully elapsed was used to the full budget.
        assert len(limiter.allowed) >= BUDGET * int(clock.now // WINDOW)
        assert outcomes.count("suppressed") == len(outcomes) - model.calls


class TestMaxInAnyWindow:
    @pytest.mark.parametrize(
        ("stamps", "expected"),
        [([], 0), ([0, 59.9], 2), ([0, 60], 1), ([0, 30, 59, 61, 89], 4), ([0, 1, 2, 70], 3)],
    )
    def test_counts_the_busiest_window(self, stamps: list[float], expected: int) -> None:
        """The helper finds the busiest half-open 60-second window."""
        assert _max_in_any_window(stamps, 60.0) == expected
