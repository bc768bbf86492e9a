"""``RAGAgent.arun``/``aread``/``aaggregate``: the same steps as their blocking twins, the I/O
awaited; the data tools' ``ainvoke`` through them, on the loop's own thread."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import threading
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from persistence import (
    AggregateResult,
    BackendUnavailableError,
    MemoryBackend,
    MemoryStore,
    ReadOnlyPersistenceFacade,
)
from persistence.policy import BUSINESS_TABLES, AccessPolicy
from persistence.query import Filter, Op, Page, Query
from rag_agent import FallbackRead, FallbackRequest, FallbackResult, RAGAgent, RAGSettings
from rag_agent.specs import ExtractionRequest, Understanding
from rag_agent.tools import build_tools
from rag_agent.untrusted import unwrap_boundary

NOW = dt.datetime(2026, 3, 4, 5, 6, 7, tzinfo=dt.UTC)

WORDS = ["leads", "acme", "how many", "by status", "score", "above", "80", "client", "7"]
WORDS += ["campaigns", "with", "conversations", "email", "a@b.io", "Inc.", "lead 3"]

QUESTIONS = [
    "find leads at acme",
    "how many leads",
    "leads by status",
    "lead 1 with its conversations",
    "leads with score above 80 created after 2025-01-01",
    "campaigns of client 1",
    "",
    "   ",
    "zzz nothing at all",
    "email nobody@nowhere.example",
    "leads at Nonexistent Holdings Inc.",
    "messages of conversation 3",
]


class ThreadNotingBackend(MemoryBackend):
    """A memory backend that notes the thread each read ran on, and can be told to fail."""

    def __init__(self, store: MemoryStore) -> None:
        super().__init__(store, read_only=True)
        self.threads: list[int] = []
        self.fail = False

    def read(self, query: Query) -> Page:
        self.threads.append(threading.get_ident())
        if self.fail:
            raise BackendUnavailableError("connection refused", backend="memory", operation="read")
        return super().read(query)

    def count(self, table: str, filters: Sequence[Filter]) -> int:
        self.threads.append(threading.get_ident())
        return super().count(table, filters)

    def aggregate(self, query: Query, *args: Any) -> AggregateResult:
        self.threads.append(threading.get_ident())
        return super().aggregate(query, *args)


def _agent(store: MemoryStore, **hooks: Any) -> tuple[RAGAgent, ThreadNotingBackend]:
    backend = ThreadNotingBackend(store)
    facade = ReadOnlyPersistenceFacade(backend, AccessPolicy(BUSINESS_TABLES, frozenset()))
    settings = RAGSettings(cache_disabled=True)
    return RAGAgent(facade, settings=settings, now=lambda: NOW, **hooks), backend


def _extractor(request: ExtractionRequest) -> Understanding:
    # A deterministic stand-in for the model: nothing understood, said so.
    return Understanding()


def _fallback(request: FallbackRequest) -> FallbackResult:
    row = {"id": 1, "email": "fallback@example.com"}
    return FallbackResult(reads=[FallbackRead(table=request.table, rows=[row], retrieved_at=NOW)])


class TestArunMatchesRun:
    @pytest.mark.parametrize("question", QUESTIONS)
    def test_same_envelope_as_run(self, sample_store: MemoryStore, question: str) -> None:
        """For each question, arun answers exactly what run answers (hooks included)."""
        agent, _ = _agent(sample_store, extractor=_extractor, fallback=_fallback)
        blocking = agent.run(question, return_json=True)
        awaited = asyncio.run(agent.arun(question, return_json=True))
        assert awaited == blocking

    @settings(max_examples=40, deadline=None)
    @given(
        words=st.lists(
            st.sampled_from(WORDS),
            max_size=6,
        ),
        limit=st.one_of(st.none(), st.integers(-2, 600)),
        offset=st.one_of(st.none(), st.integers(-1, 40)),
    )
    def test_same_envelope_for_any_question_and_window(
        self, sample_store: MemoryStore, words: list[str], limit: int | None, offset: int | None
    ) -> None:
        """Any text and page window, valid or not: arun's envelope equals run's."""
        agent, _ = _agent(sample_store)
        text = " ".join(words)
        blocking = agent.run(text, limit=limit, offset=offset, return_json=True)
        awaited = asyncio.run(agent.arun(text, limit=limit, offset=offset, return_json=True))
        assert awaited == blocking

    @pytest.mark.parametrize(
        ("text", "options"),
        [
            (123, {}),
            ("leads at acme", {"limit": "ten"}),
            ("leads at acme", {"table": "pg_shadow"}),
            ("leads at acme", {"include_raw": "yes"}),
            ("leads", {"filters": {"email": 5}}),
        ],
    )
    def test_bad_input_is_an_error_envelope_not_an_exception(
        self, sample_store: MemoryStore, text: Any, options: dict[str, Any]
    ) -> None:
        """arun never raises on bad input; its error envelope is run's."""
        agent, _ = _agent(sample_store)
        awaited = asyncio.run(agent.arun(text, return_json=True, **options))
        assert awaited["metadata"]["error"]
        assert awaited == agent.run(text, return_json=True, **options)

    def test_a_failing_backend_is_reported_alike(self, sample_store: MemoryStore) -> None:
        """A backend failure during arun is the envelope's error, as in run."""
        agent, backend = _agent(sample_store)
        backend.fail = True
        awaited = asyncio.run(agent.arun("find leads at acme", return_json=True))
        assert awaited["metadata"]["error"]["type"] == "BackendUnavailableError"
        assert awaited == agent.run("find leads at acme", return_json=True)

    def test_aread_and_aaggregate_match_their_twins(self, sample_store: MemoryStore) -> None:
        """aread and aaggregate answer what read and aggregate answer."""
        agent, _ = _agent(sample_store)
        flt = [Filter("score", Op.GTE, 50)]
        assert asyncio.run(agent.aread("leads", flt, limit=5, return_json=True)) == agent.read(
            "leads", flt, limit=5, return_json=True
        )
        grouped = {"group_by": ["status"], "return_json": True}
        assert asyncio.run(agent.aaggregate("leads", flt, **grouped)) == agent.aggregate(
            "leads", flt, **grouped
        )


class TestAsyncHooks:
    def test_awaitable_hooks_are_awaited_on_the_loop(self, sample_store: MemoryStore) -> None:
        """An extractor and a fallback with ``acall`` are awaited, not run in a thread."""
        seen: list[tuple[str, int]] = []

        class Extractor:
            def __call__(self, request: ExtractionRequest) -> Understanding:
                raise AssertionError("the blocking extractor must not be called")

            async def acall(self, request: ExtractionRequest) -> Understanding:
                seen.append(("extract", threading.get_ident()))
                return Understanding()

        class Fallback:
            def __call__(self, request: FallbackRequest) -> FallbackResult:
                raise AssertionError("the blocking fallback must not be called")

            async def acall(self, request: FallbackRequest) -> FallbackResult:
                seen.append(("fallback", threading.get_ident()))
                return _fallback(request)

        agent, _ = _agent(sample_store, extractor=Extractor(), fallback=Fallback())

        async def main() -> tuple[dict[str, Any], int]:
            return await agent.arun("zzz nothing", return_json=True), threading.get_ident()

        envelope, loop_thread = asyncio.run(main())
        assert seen == [("extract", loop_thread), ("fallback", loop_thread)]
        assert envelope["metadata"]["fallback"] == "agent"
        assert envelope["records"][0]["email"] == "fallback@example.com"


class TestToolsAinvoke:
    @pytest.mark.parametrize(
        ("name", "args"),
        [
            ("query_leads", {"query": "leads at acme"}),
            ("query_table", {"table": "leads", "filters": {"status": "new"}}),
            ("count_rows", {"table": "leads"}),
            ("aggregate_table", {"table": "leads", "group_by": ["status"]}),
            ("rag_agent", {"query": "how many leads at acme"}),
            ("describe_table", {"table": "leads", "sample_rows": 2}),
        ],
    )
    def test_ainvoke_reads_on_the_loop_thread(
        self, sample_store: MemoryStore, name: str, args: dict[str, Any]
    ) -> None:
        """A tool's ainvoke awaits the agent, the memory backend's reads run in worker
        threads (never on the loop's thread, which other sessions share), and it answers what
        invoke answers."""
        agent, backend = _agent(sample_store)
        tool = next(t for t in build_tools(agent) if t.name == name)
        call = {"name": name, "args": args, "id": "call-1", "type": "tool_call"}

        async def main() -> tuple[Any, int]:
            return await tool.ainvoke(call), threading.get_ident()

        message, loop_thread = asyncio.run(main())
        assert backend.threads and loop_thread not in set(backend.threads)
        blocking = tool.invoke(call)
        if blocking.artifact is not None:  # the data tools: the envelope
            assert message.artifact == blocking.artifact
        else:  # the discovery tools: JSON text (its untrusted-data marker is drawn per call)
            assert json.loads(unwrap_boundary(message.content)) == json.loads(
                unwrap_boundary(blocking.content)
            )
