"""Load: eight threads of mixed queries on memory and PostgreSQL with the fallback limiter on.

Zero unexpected errors, every envelope checked, and the fallbacks counted from their recorded
time stamps: never more than the budget in any 60-second window. Time is a shared tick clock
(each fallback attempt moves it), so the run spans several windows without sleeping.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from rag_agent import (
    FallbackRequest,
    FallbackResult,
    MemorySlidingWindowLimiter,
    RAGAgent,
    RAGSettings,
)
from tests.faults.worlds import (
    World,
    envelope_problems,
    invoke_tool,
    open_world,
    seed_leads,
)

UNCACHED = RAGSettings(cache_disabled=True)  # every run reads the backend
THREADS = 8
RUNS_PER_THREAD = 60
BUDGET = 5
WINDOW = 60.0
MIXED = [
    "leads at acme",
    "email ann@acme.io",
    "lead #3",
    "client_id=2",
    "leads at globex inc.",
    "who should I call today?",  # no filter: goes to the (limited) fallback
    "leads at nowhere-co",  # reformulations, then the fallback
    "' OR 1=1 --",
]


class TickClock:
    """Monotonic seconds that advance by ``tick`` on every reading; thread-safe."""

    def __init__(self, tick: float) -> None:
        self.now = 0.0
        self.tick = tick
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            self.now += self.tick
            return self.now


class RecordingFallback:
    """A fallback that records when it ran (the limiter's clock) and finds nothing."""

    def __init__(self, world: World, clock: TickClock) -> None:
        self.world = world
        self.clock = clock
        self.stamps: list[float] = []
        self._lock = threading.Lock()

    def __call__(self, request: FallbackRequest) -> FallbackResult:
        with self._lock:
            self.stamps.append(self.clock.now)
        return FallbackResult()


def max_in_any_window(stamps: list[float], window: float) -> int:
    """The most stamps inside any half-open window of ``window`` seconds."""
    ordered = sorted(stamps)
    best, start = 0, 0
    for end, stamp in enumerate(ordered):
        while stamp - ordered[start] >= window:
            start += 1
        best = max(best, end - start + 1)
    return best


@pytest.fixture(params=["memory", "postgres"])
def world(request: pytest.FixtureRequest) -> Iterator[World]:
    """Memory or PostgreSQL seeded with the base leads."""
    with open_world(request.param, seed_leads(), request) as world:
        yield world


class TestLoad:
    def test_eight_threads_of_mixed_queries(self, world: World) -> None:
        """8 x 60 mixed runs and tool calls: no unexpected error, the budget holds per window."""
        clock = TickClock(2.0)  # ~90 fallback attempts span about three windows
        fallback = RecordingFallback(world, clock)
        limiter = MemorySlidingWindowLimiter(BUDGET, WINDOW, clock=clock)
        agent = RAGAgent(world.facade, settings=UNCACHED, fallback=fallback, limiter=limiter)
        world_for_checks = World(world.kind, world.facade, agent, world.rows, world.checksum)
        tools = world_for_checks.tools
        before = world.checksum()
        problems: list[str] = []
        outcomes: dict[str, int] = {}
        lock = threading.Lock()

        def work(worker: int) -> None:
            for i in range(RUNS_PER_THREAD):
                text = MIXED[(i + worker) % len(MIXED)]
                answer: Any
                if i % 4 == 3:
                    answer = invoke_tool(
                        tools["query_table"],
                        {"table": "leads", "filters": {"client_id": 1 + i % 4}},
                    )
                else:
                    answer = agent.run(text, return_json=True)
                found = envelope_problems(answer, world_for_checks, allowed_errors=frozenset())
                kind = answer["metadata"].get("fallback") or "query"
                with lock:
                    problems.extend(found)
                    outcomes[kind] = outcomes.get(kind, 0) + 1

        threads = [threading.Thread(target=work, args=(n,)) for n in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert problems == []
        assert sum(outcomes.values()) == THREADS * RUNS_PER_THREAD
        assert max_in_any_window(fallback.stamps, WINDOW) <= BUDGET
        assert len(fallback.stamps) >= BUDGET * 2  # the run spanned several windows
        assert outcomes.get("suppressed", 0) > 0 and outcomes.get("query", 0) > 0
        assert world.checksum() == before


class TestMaxInAnyWindow:
    @pytest.mark.parametrize(
        ("stamps", "expected"),
        [([], 0), ([0, 59.9], 2), ([0, 60], 1), ([0, 30, 59, 61, 89], 4), ([5, 1, 2, 70], 3)],
    )
    def test_counts_the_busiest_window(self, stamps: list[float], expected: int) -> None:
        """The checker finds the busiest half-open 60-second window."""
        assert max_in_any_window(stamps, 60.0) == expected
