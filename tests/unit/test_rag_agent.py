"""``RAGAgent``: the pipeline of ``run``, ``read``, every metadata field, the cache, the seams."""

from __future__ import annotations

import dataclasses
import datetime as dt
import gc
import json
import tracemalloc
from collections.abc import Iterator, Sequence
from typing import Any

import jsonschema
import pytest
import structlog
from structlog.testing import capture_logs

from persistence import (
    AccessPolicy,
    BackendUnavailableError,
    MemoryBackend,
    MemoryStore,
    PersistenceAgent,
    ReadOnlyPersistenceFacade,
    create_persistence_agent,
    create_read_only_facade,
)
from persistence.query import Filter, Op, Order, Page, Query
from rag_agent import (
    Envelope,
    FallbackRead,
    FallbackRequest,
    FallbackResult,
    MemorySlidingWindowLimiter,
    RAGAgent,
    RAGSettings,
    create_rag_agent,
    envelope_json_schema,
    row_hash,
)
from rag_agent.runtime.ratelimit import RateLimiterUnavailableError
from rag_agent.specs import Condition, ExtractionRequest, Understanding
from rag_agent.understanding.filters import MAX_TEXT_LENGTH

NOW = dt.datetime(2026, 3, 4, 5, 6, 7, tzinfo=dt.UTC)
SCHEMA = envelope_json_schema()


class FakeClock:
    """Monotonic seconds moved by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class CountingBackend(MemoryBackend):
    """A memory backend that counts reads, and can be told to fail."""

    def __init__(self, store: MemoryStore) -> None:
        super().__init__(store)
        self.reads: list[Query] = []
        self.fail = False

    def read(self, query: Query) -> Page:
        self.reads.append(query)
        if self.fail:
            raise BackendUnavailableError("connection refused", backend="memory", operation="read")
        return super().read(query)


@pytest.fixture
def backend(store: MemoryStore) -> CountingBackend:
    """A counting backend over the test's private store."""
    return CountingBackend(store)


@pytest.fixture
def writer(store: MemoryStore) -> PersistenceAgent:
    """A writer over the test's private store, for seeding."""
    return create_persistence_agent(kind="memory", store=store)


def make_agent(backend: CountingBackend, **kwargs: Any) -> RAGAgent:
    """An agent over ``backend`` with fixed time and settings overridable by keyword."""
    settings = kwargs.pop("settings", RAGSettings())
    facade = ReadOnlyPersistenceFacade(backend, AccessPolicy.read_only())
    kwargs.setdefault("clock", FakeClock())
    return RAGAgent(facade, settings=settings, now=lambda: NOW, **kwargs)


def valid(data: dict[str, Any]) -> dict[str, Any]:
    """Assert ``data`` is a schema-valid, JSON-ready envelope and every hash re-verifies."""
    jsonschema.validate(json.loads(json.dumps(data)), SCHEMA)
    for record in data["records"]:
        fields = {k: v for k, v in record.items() if k != "provenance"}
        assert row_hash(fields) == record["provenance"]["row_hash"]
    return data


class TestDocumentedPattern:
    """The README's testing pattern works exactly as written."""

    def test_pattern(self) -> None:
        """Write with a persistence agent, read the same default store with a RAG agent."""
        p = create_persistence_agent(kind="memory")
        p.write("leads", {"email": "a@x.io", "company_name": "Acme"})
        rag = create_rag_agent(kind="memory")
        assert rag.run("find leads at acme", return_json=True)["metadata"]["total_count"] == 1


class TestMetadata:
    """Each metadata field means what the design says."""

    def test_a_plain_hit(self, backend: CountingBackend, writer: PersistenceAgent) -> None:
        """source, query_filters, filters, retrieved_at, total_count, has_more, cache, limit,
        offset and the backend that answered."""
        writer.write("leads", {"email": "a@acme.io", "company_name": "Acme"})
        data = valid(make_agent(backend).run("leads at acme", return_json=True))
        assert data["metadata"] == {
            "source": "persistence.leads",
            "query_filters": {"company": "acme"},
            "filters": [
                {"column": "company_name", "op": "icontains", "value": "acme", "source": "rules"}
            ],
            "retrieved_at": "2026-03-04T05:06:07Z",
            "total_count": 1,
            "has_more": False,
            "cache": "miss",
            "limit": 50,
            "offset": 0,
            "backend": {"kind": "memory"},
        }
        (record,) = data["records"]
        assert record["company_name"] == "Acme"
        assert record["provenance"]["source"] == "persistence.leads"
        assert record["provenance"]["row_id"] == record["id"]
        assert record["provenance"]["retrieved_at"] == "2026-03-04T05:06:07Z"

    def test_total_count_is_matches_not_page_length(
        self, backend: CountingBackend, writer: PersistenceAgent
    ) -> None:
        """With limit 2 of 5 matches, total_count is 5 and two records come back."""
        writer.batch("leads", [{"company_name": f"Acme {i}"} for i in range(5)])
        data = valid(make_agent(backend).run("leads at acme", limit=2, return_json=True))
        assert data["metadata"]["total_count"] == 5
        assert len(data["records"]) == 2

    def test_offset_pages_deterministically(
        self, backend: CountingBackend, writer: PersistenceAgent
    ) -> None:
        """Consecutive offsets walk the matches in id order without overlap."""
        writer.batch("leads", [{"company_name": f"Acme {i}"} for i in range(5)])
        agent = make_agent(backend)
        ids = [
            r.provenance.row_id
            for offset in (0, 2, 4)
            for r in agent.run("leads at acme", limit=2, offset=offset).records
        ]
        assert ids == [1, 2, 3, 4, 5]
        assert agent.run("leads at acme", offset=2).metadata.offset == 2

    def test_include_raw(self, backend: CountingBackend, writer: PersistenceAgent) -> None:
        """raw_row appears only with include_raw=True."""
        writer.write("leads", {"company_name": "Acme"})
        agent = make_agent(backend)
        plain = agent.run("leads at acme", return_json=True)
        raw = valid(agent.run("leads at acme", include_raw=True, return_json=True))
        assert "raw_row" not in plain["records"][0]["provenance"]
        assert raw["records"][0]["provenance"]["raw_row"]["company_name"] == "Acme"

    def test_envelope_object_by_default(self, backend: CountingBackend) -> None:
        """Without return_json, run returns an Envelope model."""
        envelope = make_agent(backend).run("lead #1")
        assert isinstance(envelope, Envelope)
        assert envelope.metadata.query_filters == {"id": 1}


class TestLimitClamping:
    """limit defaults, is clamped to the maximum, and bad values become errors."""

    def test_default_limit(self, backend: CountingBackend) -> None:
        """No limit means RAG_DEFAULT_LIMIT."""
        agent = make_agent(backend, settings=RAGSettings(default_limit=7))
        assert agent.run("lead #1").metadata.limit == 7
        assert backend.reads[-1].limit == 7

    def test_clamped_to_max(self, backend: CountingBackend) -> None:
        """A limit above RAG_MAX_LIMIT is reduced to it, and reported as such."""
        agent = make_agent(backend, settings=RAGSettings(max_limit=100))
        assert agent.run("lead #1", limit=10**9).metadata.limit == 100
        assert backend.reads[-1].limit == 100

    @pytest.mark.parametrize(
        ("limit", "offset"), [(0, None), (-1, None), (True, None), ("5", None), (None, -1)]
    )
    def test_bad_window_is_an_error(
        self, backend: CountingBackend, limit: Any, offset: Any
    ) -> None:
        """A non-positive or non-int limit, or a negative offset, is reported, not raised."""
        data = valid(
            make_agent(backend).run("lead #1", limit=limit, offset=offset, return_json=True)
        )
        assert data["metadata"]["error"]["type"] == "InvalidQueryError"
        assert data["records"] == []
        assert backend.reads == []


class TestReformulation:
    """Zero rows trigger reformulations in the design's order."""

    def test_order_and_attempts(self, backend: CountingBackend, writer: PersistenceAgent) -> None:
        """drop_email then shorten_company_suffix; the first with rows wins."""
        writer.write("leads", {"email": "real@acme.io", "company_name": "Acme"})
        data = valid(
            make_agent(backend).run(
                "leads from Acme Inc. with email wrong@acme.io", return_json=True
            )
        )
        meta = data["metadata"]
        assert meta["fallback"] == "reformulation"
        assert meta["query_filters"] == {"company": "Acme"}
        assert meta["reformulation_attempts"] == [
            {"reason": "drop_email", "filters": {"company": "Acme Inc"}, "result_count": 0},
            {"reason": "shorten_company_suffix", "filters": {"company": "Acme"}, "result_count": 1},
        ]
        assert meta["total_count"] == 1

    def test_drop_company_keeps_the_other_filter(
        self, backend: CountingBackend, writer: PersistenceAgent
    ) -> None:
        """drop_company leaves client_id, so the result is still filtered."""
        writer.write("leads", {"client_id": 7, "company_name": "Globex"})
        writer.write("leads", {"client_id": 8, "company_name": "Other"})
        data = valid(make_agent(backend).run("client 7 leads at Initech", return_json=True))
        assert data["metadata"]["query_filters"] == {"client_id": 7}
        assert [r["client_id"] for r in data["records"]] == [7]

    def test_max_attempts(self, backend: CountingBackend, writer: PersistenceAgent) -> None:
        """At most RAG_REFORMULATION_MAX_ATTEMPTS reformulations are tried."""
        writer.write("leads", {"company_name": "Acme"})
        agent = make_agent(backend, settings=RAGSettings(reformulation_max_attempts=1))
        data = agent.run("leads from Acme Inc. with email x@y.io", return_json=True)
        assert [a["reason"] for a in data["metadata"]["reformulation_attempts"]] == ["drop_email"]
        assert data["metadata"]["total_count"] == 0
        assert data["metadata"]["fallback"] == "disabled"


class TestNeverUnfiltered:
    """An unfiltered table is never returned."""

    @pytest.mark.parametrize("text", ["show me all leads", "", "everything please", "leads"])
    def test_no_filter_no_read(
        self, backend: CountingBackend, writer: PersistenceAgent, text: str
    ) -> None:
        """Text with no filter reads nothing and returns no records."""
        writer.batch("leads", [{"company_name": "Acme"}, {"company_name": "Globex"}])
        data = valid(make_agent(backend).run(text, return_json=True))
        assert data["records"] == []
        assert data["metadata"]["total_count"] == 0
        assert data["metadata"]["query_filters"] is None
        assert data["metadata"]["fallback"] == "disabled"
        assert backend.reads == []

    def test_every_read_is_filtered(
        self, backend: CountingBackend, writer: PersistenceAgent
    ) -> None:
        """Across a full reformulation chain every backend read has a filter."""
        writer.write("leads", {"company_name": "Zed"})
        make_agent(backend).run("lead #9 at Acme Inc with email q@q.io")
        assert backend.reads
        assert all(query.filters for query in backend.reads)


class TestSummary:
    """Large results are paged and summarised."""

    def test_threshold(self, backend: CountingBackend, writer: PersistenceAgent) -> None:
        """total_count above RAG_SUMMARY_THRESHOLD: more pages and a summary; at it, neither."""
        writer.batch(
            "leads", [{"company_name": "Acme", "status": "new", "score": i} for i in range(6)]
        )
        agent = make_agent(backend, settings=RAGSettings(summary_threshold=6))
        at_threshold = agent.run("leads at acme", return_json=True)["metadata"]
        assert at_threshold["has_more"] is False and "summary" not in at_threshold
        agent = make_agent(backend, settings=RAGSettings(summary_threshold=5))
        data = valid(agent.run("leads at acme", limit=4, return_json=True))
        meta = data["metadata"]
        assert meta["has_more"] is True
        summary = meta["summary"]
        assert summary["sample"] is True
        assert summary["sample_size"] == 4
        assert summary["total_count"] == 6
        assert summary["columns"]["score"]["min"] == 0
        assert summary["columns"]["score"]["max"] == 3
        assert summary["columns"]["status"]["top"] == [{"value": "new", "count": 4}]
        assert summary["columns"]["email"]["nulls"] == 4


class TestCache:
    """The query cache serves repeats without touching the backend."""

    def test_hit_avoids_backend(self, backend: CountingBackend, writer: PersistenceAgent) -> None:
        """The second identical run is a hit and makes no backend call."""
        writer.write("leads", {"company_name": "Acme"})
        agent = make_agent(backend)
        first = agent.run("leads at acme")
        second = agent.run("leads at ACME".lower())
        assert (first.metadata.cache, second.metadata.cache) == ("miss", "hit")
        assert len(backend.reads) == 1
        assert second.records == first.records

    def test_key_includes_window(self, backend: CountingBackend) -> None:
        """A different limit or offset is a different entry."""
        agent = make_agent(backend)
        agent.run("lead #1", limit=5)
        assert agent.run("lead #1", limit=6).metadata.cache == "miss"
        assert agent.run("lead #1", limit=5, offset=1).metadata.cache == "miss"
        assert len(backend.reads) == 3

    def test_ttl_on_injected_clock(self, backend: CountingBackend) -> None:
        """After RAG_CACHE_TTL_SECONDS on the agent's clock, the entry is gone."""
        clock = FakeClock()
        agent = make_agent(backend, clock=clock, settings=RAGSettings(cache_ttl_seconds=10))
        agent.run("lead #1")
        clock.now = 9.9
        assert agent.run("lead #1").metadata.cache == "hit"
        clock.now = 10.0
        assert agent.run("lead #1").metadata.cache == "miss"

    def test_disabled(self, backend: CountingBackend) -> None:
        """RAG_CACHE_DISABLED makes every run a miss that reads the backend."""
        agent = make_agent(backend, settings=RAGSettings.from_env({"RAG_CACHE_DISABLED": "1"}))
        assert [agent.run("lead #1").metadata.cache for _ in range(3)] == ["miss"] * 3
        assert len(backend.reads) == 3

    def test_reformulation_chain_hits(
        self, backend: CountingBackend, writer: PersistenceAgent
    ) -> None:
        """A repeated run with reformulations is a hit only when every read was cached."""
        writer.write("leads", {"company_name": "Acme"})
        agent = make_agent(backend)
        agent.run("leads from Acme Inc. email x@y.io")
        reads = len(backend.reads)
        again = agent.run("leads from Acme Inc. email x@y.io")
        assert again.metadata.cache == "hit"
        assert len(backend.reads) == reads

    def test_mutating_results_cannot_corrupt_cache(
        self, backend: CountingBackend, writer: PersistenceAgent
    ) -> None:
        """Changing a returned envelope (dict, list or raw row) leaves the next hit intact."""
        writer.write("leads", {"company_name": "Acme", "email": "a@acme.io"})
        agent = make_agent(backend)
        data = agent.run("leads at acme", include_raw=True, return_json=True)
        data["records"][0]["email"] = "evil@x.io"
        data["records"].clear()
        envelope = agent.run("leads at acme", include_raw=True)
        envelope.records.clear()
        envelope = agent.run("leads at acme", include_raw=True)
        raw = envelope.records[0].provenance.raw_row
        assert raw is not None
        raw["email"] = "evil@x.io"
        again = agent.run("leads at acme", include_raw=True, return_json=True)
        assert again["metadata"]["cache"] == "hit"
        assert again["records"][0]["email"] == "a@acme.io"
        assert again["records"][0]["provenance"]["raw_row"]["email"] == "a@acme.io"
        valid(again)

    def test_nested_values_are_copied_on_hit(
        self, backend: CountingBackend, writer: PersistenceAgent
    ) -> None:
        """A nested field value handed out on a hit is a copy, not the cached object."""
        writer.write("leads", {"company_name": "Acme", "tags": ["vip"]})
        agent = make_agent(backend)
        first = agent.run("leads at acme")
        extra = first.records[0].model_extra
        assert extra is not None
        extra["tags"].append("tampered")
        again = agent.run("leads at acme")
        assert again.metadata.cache == "hit"
        assert (again.records[0].model_extra or {})["tags"] == ["vip"]


class TestFailures:
    """run() never raises: failures become metadata.error."""

    def test_backend_failure(self, backend: CountingBackend) -> None:
        """A failing backend gives an error envelope with the error's type."""
        backend.fail = True
        data = valid(make_agent(backend).run("lead #1", return_json=True))
        assert data["metadata"]["error"]["type"] == "BackendUnavailableError"
        assert data["records"] == []
        assert data["metadata"]["total_count"] == 0

    @pytest.mark.parametrize(
        ("table", "source"),
        [("users", "persistence.users"), ("public.leads", "persistence"), ("LEADS", "persistence")],
    )
    def test_table_not_allowed(self, backend: CountingBackend, table: str, source: str) -> None:
        """A table outside the allow-list is refused before any read."""
        data = valid(make_agent(backend).run("lead #1", table=table, return_json=True))
        assert data["metadata"]["error"]["type"] == "TableNotAllowedError"
        assert data["metadata"]["source"] == source
        assert backend.reads == []

    @pytest.mark.parametrize("text", [None, 42, b"lead #1", {"id": 1}])
    def test_non_text(self, backend: CountingBackend, text: Any) -> None:
        """Input that is not a str is an InvalidQueryError in the envelope."""
        data = valid(make_agent(backend).run(text, return_json=True))
        assert data["metadata"]["error"]["type"] == "InvalidQueryError"

    def test_other_tables(self, backend: CountingBackend, writer: PersistenceAgent) -> None:
        """Another allowed table is read with the same rules (here: by id)."""
        writer.write("inquiries", {"subject": "hi"})
        data = valid(make_agent(backend).run("id 1", table="inquiries", return_json=True))
        assert data["metadata"]["source"] == "persistence.inquiries"
        assert data["metadata"]["total_count"] == 1

    def test_unknown_column_for_table(self, backend: CountingBackend) -> None:
        """A company asked of a table without one, and no company table naming it, is reported
        as ignored; nothing of the table is read (only the companies it was sought among)."""
        data = valid(make_agent(backend).run("leads at acme", table="messages", return_json=True))
        meta = data["metadata"]
        assert "error" not in meta and "filters" not in meta
        reasons = {part["text"]: part["reason"] for part in meta["ignored"]}
        assert reasons["at acme"] == "no column of messages holds a company"
        assert data["records"] == []
        assert {query.table for query in backend.reads} <= {"leads", "clients"}


class FakeFallback:
    """A scripted fallback runner that records its requests."""

    def __init__(self, result: FallbackResult | BaseException) -> None:
        self.result = result
        self.requests: list[FallbackRequest] = []

    def __call__(self, request: FallbackRequest) -> FallbackResult:
        self.requests.append(request)
        if isinstance(self.result, BaseException):
            raise self.result
        return self.result


class RefusingLimiter:
    """A limiter that always refuses, or whose storage is down."""

    limit = 1
    window = 60.0

    def __init__(self, down: bool = False) -> None:
        self.down = down

    def try_acquire(self) -> bool:
        if self.down:
            raise RateLimiterUnavailableError("redis down", backend="redis")
        return False


class TestFallbackSeam:
    """Step 5: the fallback hook, metered by the limiter."""

    ROWS: Sequence[dict[str, Any]] = ({"id": 3, "company_name": "Initech", "status": "new"},)

    def test_disabled_without_llm(self, backend: CountingBackend) -> None:
        """No fallback configured → fallback 'disabled', no records."""
        data = make_agent(backend).run("lead #404", return_json=True)
        assert data["metadata"]["fallback"] == "disabled"
        assert data["records"] == []

    def test_records_are_rows_read(self, backend: CountingBackend) -> None:
        """Fallback records are exactly the rows its reads returned, with their provenance."""
        fallback = FakeFallback(
            FallbackResult(
                reads=[
                    FallbackRead("leads", self.ROWS, retrieved_at=NOW),
                    FallbackRead("leads", self.ROWS),  # the same row read twice counts once
                    FallbackRead("clients", [{"id": 9, "name": "Initech"}]),
                ]
            )
        )
        agent = make_agent(backend, fallback=fallback)
        data = valid(agent.run("someone who asked about widgets", limit=10, return_json=True))
        meta = data["metadata"]
        assert (meta["source"], meta["fallback"], meta["total_count"]) == ("agent", "agent", 2)
        assert [r["provenance"]["source"] for r in data["records"]] == [
            "persistence.leads",
            "persistence.clients",
        ]
        (request,) = fallback.requests
        # The seconds left of the run's LLM deadline: at most all of it.
        assert request.seconds_left is not None
        assert 0 < request.seconds_left <= RAGSettings().llm_deadline_s
        assert dataclasses.replace(request, seconds_left=None) == FallbackRequest(
            text="someone who asked about widgets",
            table="leads",
            filters={},
            limit=10,
            offset=0,
            max_steps=6,
        )

    def test_fallback_after_empty_filtered_query(self, backend: CountingBackend) -> None:
        """Filters that find nothing reach the fallback with those filters."""
        fallback = FakeFallback(FallbackResult())
        data = make_agent(backend, fallback=fallback).run("lead #404", return_json=True)
        assert fallback.requests[0].filters == {"id": 404}
        assert data["metadata"]["fallback"] == "agent"
        assert data["metadata"]["query_filters"] == {"id": 404}

    def test_limit_applies_to_fallback_records(self, backend: CountingBackend) -> None:
        """Only ``limit`` records come back; total_count counts all distinct rows read."""
        rows = [{"id": i} for i in range(5)]
        fallback = FakeFallback(FallbackResult(reads=[FallbackRead("leads", rows)]))
        data = make_agent(backend, fallback=fallback).run("?", limit=2, return_json=True)
        assert len(data["records"]) == 2
        assert data["metadata"]["total_count"] == 5

    def test_malformed_reads_are_ignored(self, backend: CountingBackend) -> None:
        """A read naming a malformed table never becomes a record."""
        fallback = FakeFallback(
            FallbackResult(reads=[FallbackRead("public.leads", self.ROWS), "text"])  # type: ignore[list-item]
        )
        data = valid(make_agent(backend, fallback=fallback).run("?", return_json=True))
        assert data["records"] == []

    def test_fallback_error(self, backend: CountingBackend) -> None:
        """An error the fallback reports is in the envelope, alongside what it read."""
        fallback = FakeFallback(
            FallbackResult(reads=[FallbackRead("leads", self.ROWS)], error=TimeoutError("slow"))
        )
        data = valid(make_agent(backend, fallback=fallback).run("?", return_json=True))
        assert data["metadata"]["error"] == {"type": "TimeoutError", "message": "slow"}
        assert len(data["records"]) == 1

    def test_fallback_string_error(self, backend: CountingBackend) -> None:
        """A string error is reported as a FallbackError."""
        fallback = FakeFallback(FallbackResult(error="model refused"))
        data = valid(make_agent(backend, fallback=fallback).run("?", return_json=True))
        assert data["metadata"]["error"] == {"type": "FallbackError", "message": "model refused"}

    def test_raising_fallback(self, backend: CountingBackend) -> None:
        """A hook that raises is caught; run() still returns an envelope."""
        fallback = FakeFallback(RuntimeError("boom"))
        data = valid(make_agent(backend, fallback=fallback).run("?", return_json=True))
        assert data["metadata"]["error"]["type"] == "RuntimeError"
        assert data["metadata"]["fallback"] == "agent"

    def test_suppressed_by_limiter(self, backend: CountingBackend) -> None:
        """A full window → 'suppressed', the hook is not called, no error."""
        fallback = FakeFallback(FallbackResult())
        agent = make_agent(backend, fallback=fallback, limiter=RefusingLimiter())
        data = valid(agent.run("?", return_json=True))
        assert data["metadata"]["fallback"] == "suppressed"
        assert "error" not in data["metadata"]
        assert fallback.requests == []

    def test_limiter_down_fails_closed(self, backend: CountingBackend) -> None:
        """Limiter storage down → 'suppressed' plus the error; the hook is not called."""
        fallback = FakeFallback(FallbackResult())
        agent = make_agent(backend, fallback=fallback, limiter=RefusingLimiter(down=True))
        data = valid(agent.run("?", return_json=True))
        assert data["metadata"]["fallback"] == "suppressed"
        assert data["metadata"]["error"]["type"] == "RateLimiterUnavailableError"
        assert fallback.requests == []

    def test_window_with_moved_clock(self, backend: CountingBackend) -> None:
        """RAG_MAX_FALLBACKS_PER_MIN per sliding minute, on the agent's clock."""
        clock = FakeClock()
        fallback = FakeFallback(FallbackResult())
        agent = make_agent(
            backend,
            fallback=fallback,
            clock=clock,
            settings=RAGSettings(max_fallbacks_per_min=2),
        )
        # Distinct questions: a repeated one is answered from the fallback cache, unmetered.
        questions = ("?", "??", "???")
        statuses = [agent.run(q, return_json=True)["metadata"]["fallback"] for q in questions]
        assert statuses == ["agent", "agent", "suppressed"]
        clock.now = 60.0
        assert agent.run("????", return_json=True)["metadata"]["fallback"] == "agent"
        assert isinstance(agent.limiter, MemorySlidingWindowLimiter)


class TestFilterSeam:
    """Step 2: the extraction hook runs only when the rules find nothing."""

    def test_used_when_rules_find_nothing(
        self, backend: CountingBackend, writer: PersistenceAgent
    ) -> None:
        """The hook gets the text; its conditions drive the query, checked by the facade."""
        writer.write("leads", {"company_name": "Initech"})
        texts: list[str] = []

        def extract(request: ExtractionRequest) -> Understanding:
            texts.append(request.text)
            return Understanding(
                conditions=(Condition("company_name", Op.ICONTAINS, "Initech", "llm"),)
            )

        data = make_agent(backend, extractor=extract).run(
            "whoever handles TPS reports", return_json=True
        )
        assert texts == ["whoever handles TPS reports"]
        assert data["metadata"]["query_filters"] == {"company": "Initech"}
        assert data["metadata"]["total_count"] == 1

    def test_not_used_when_rules_match(self, backend: CountingBackend) -> None:
        """Rules that find filters skip the hook."""
        texts: list[str] = []

        def extract(request: ExtractionRequest) -> Understanding:
            texts.append(request.text)
            return Understanding()

        make_agent(backend, extractor=extract).run("lead #1")
        assert texts == []

    @pytest.mark.parametrize(
        "answer",
        [
            None,
            "company=acme",
            {"company": "acme"},
            Understanding(conditions=(Condition("id", Op.EQ, "drop table", "llm"),)),
            ValueError(),
        ],
    )
    def test_invalid_answer_counts_as_empty(self, backend: CountingBackend, answer: Any) -> None:
        """An invalid or failing answer means no filters: nothing is read."""

        def extract(request: ExtractionRequest) -> Any:
            if isinstance(answer, BaseException):
                raise answer
            return answer

        data = valid(make_agent(backend, extractor=extract).run("hmm", return_json=True))
        assert data["records"] == []
        assert backend.reads == []
        assert "error" not in data["metadata"]


@pytest.fixture
def _debug_logging() -> Iterator[None]:
    """Let debug events through whatever level an earlier test configured, then restore."""
    import logging

    saved = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    yield
    structlog.configure(**saved)


@pytest.mark.usefixtures("_debug_logging")
class TestLogging:
    """structlog events name each step."""

    def test_events(self, backend: CountingBackend, writer: PersistenceAgent) -> None:
        """filters, query, reformulation, fallback and run events are emitted."""
        writer.write("leads", {"company_name": "Zed"})
        with capture_logs() as logs:
            make_agent(backend).run("leads from Acme Inc with email x@y.io")
        events = [entry["event"] for entry in logs]
        assert events[0] == "rag.filters"
        assert "rag.query" in events
        assert events.count("rag.reformulation") == 2
        assert "rag.fallback" in events
        assert events[-1] == "rag.run"

    def test_error_event(self, backend: CountingBackend) -> None:
        """A failure logs rag.error at warning level with the error type."""
        backend.fail = True
        with capture_logs() as logs:
            make_agent(backend).run("lead #1")
        (error,) = [entry for entry in logs if entry["event"] == "rag.error"]
        assert error["log_level"] == "warning"
        assert error["error_type"] == "BackendUnavailableError"

    @pytest.mark.parametrize("call", ["run", "read", "aggregate"])
    def test_a_hostile_table_name_is_not_logged_whole(
        self, backend: CountingBackend, call: str
    ) -> None:
        """A 100 KB table name is refused, and no log entry repeats it."""
        name = "x" * 100_000
        agent = make_agent(backend)
        with capture_logs() as logs:
            if call == "run":
                data = agent.run("lead #1", table=name, return_json=True)
            else:
                data = getattr(agent, call)(name, return_json=True)
        assert data["metadata"]["error"]["type"] == "TableNotAllowedError"
        assert logs and max(len(repr(entry)) for entry in logs) < 2_000

    def test_library_does_not_configure_structlog(self) -> None:
        """Importing and running the agent leaves structlog's global configuration alone."""
        before = structlog.get_config()
        create_rag_agent(kind="memory").run("lead #1")
        assert structlog.get_config() == before


class TestFactory:
    """``create_rag_agent`` builds on the read-only facade."""

    def test_reads_through_a_read_only_facade(self) -> None:
        """The agent's facade refuses writes."""
        from persistence import PersistencePermissionError

        agent = create_rag_agent(kind="memory", settings=RAGSettings(default_limit=3))
        assert isinstance(agent.facade, ReadOnlyPersistenceFacade)
        assert agent.settings.default_limit == 3
        with pytest.raises(PersistencePermissionError):
            agent.facade.write("leads", {"email": "x@y.io"})

    def test_backend_options_pass_through(self, store: MemoryStore) -> None:
        """Backend options (here a private store) reach the backend factory."""
        create_persistence_agent(kind="memory", store=store).write("leads", {"company_name": "Q"})
        agent = create_rag_agent(kind="memory", store=store)
        assert agent.run("leads at Q corp").metadata.total_count == 1

    def test_settings_from_environment(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without settings=, the environment is read."""
        monkeypatch.setenv("RAG_DEFAULT_LIMIT", "4")
        assert create_rag_agent(kind="memory").run("lead #1").metadata.limit == 4

    def test_context_manager(self) -> None:
        """The agent closes its facade on exit."""
        with create_rag_agent(kind="memory") as agent:
            assert agent.run("lead #1").metadata.error is None

    def test_requires_read_only_facade(self, store: MemoryStore) -> None:
        """A read-write agent is refused: the RAG agent only ever reads."""
        with pytest.raises(TypeError):
            RAGAgent(create_persistence_agent(kind="memory", store=store))  # type: ignore[arg-type]


class TestRead:
    """``RAGAgent.read``: a plain filtered read through the same window, cache and envelope."""

    @staticmethod
    def _seed(writer: PersistenceAgent) -> None:
        writer.batch(
            "leads",
            [
                {"company_name": "Acme", "title": "CTO", "score": 9},
                {"company_name": "Acme", "title": "CEO", "score": 4},
                {"company_name": "Globex", "title": "CTO", "score": 7},
            ],
        )

    def test_filters_columns_order(
        self, backend: CountingBackend, writer: PersistenceAgent
    ) -> None:
        """Filters are ANDed, columns project, order sorts; the filters are shown by column."""
        self._seed(writer)
        data = valid(
            make_agent(backend).read(
                "leads",
                [Filter("title", Op.EQ, "CTO"), Filter("score", Op.GTE, 5)],
                columns=["id", "score"],
                order=[Order("score", descending=True)],
                return_json=True,
            )
        )
        fields = [{k: v for k, v in r.items() if k != "provenance"} for r in data["records"]]
        assert fields == [{"id": 1, "score": 9}, {"id": 3, "score": 7}]
        meta = data["metadata"]
        assert meta["query_filters"] == {"title": {"eq": "CTO"}, "score": {"gte": 5}}
        assert (meta["source"], meta["total_count"], meta["cache"]) == (
            "persistence.leads",
            2,
            "miss",
        )
        assert (meta["limit"], meta["offset"]) == (50, 0)
        assert data["records"][0]["provenance"]["retrieved_at"] == "2026-03-04T05:06:07Z"

    def test_window_is_clamped_like_run(self, backend: CountingBackend) -> None:
        """The limit defaults to RAG_DEFAULT_LIMIT and is clamped to RAG_MAX_LIMIT."""
        agent = make_agent(backend, settings=RAGSettings(default_limit=7, max_limit=20))
        assert agent.read("leads").metadata.limit == 7
        assert agent.read("leads", limit=10_000, offset=3).metadata.limit == 20
        assert [q.limit for q in backend.reads] == [7, 20]

    def test_cache_key_includes_columns_and_order(
        self, backend: CountingBackend, writer: PersistenceAgent
    ) -> None:
        """A repeat is a hit; other columns or another order is a miss; a value the column's type
        reads the same way (4.0 on an integer column is 4) is the same query, so a hit."""
        self._seed(writer)
        agent = make_agent(backend)
        flt = [Filter("score", Op.GTE, 4)]
        assert agent.read("leads", flt).metadata.cache == "miss"
        assert agent.read("leads", flt).metadata.cache == "hit"
        assert agent.read("leads", flt, columns=["id"]).metadata.cache == "miss"
        assert agent.read("leads", flt, order=[Order("score", True)]).metadata.cache == "miss"
        assert agent.read("leads", [Filter("score", Op.GTE, 4.0)]).metadata.cache == "hit"
        assert len(backend.reads) == 3

    def test_run_and_read_share_a_cached_page(
        self, backend: CountingBackend, writer: PersistenceAgent
    ) -> None:
        """run's query and the same read are one cache entry: one backend read for both."""
        self._seed(writer)
        agent = make_agent(backend)
        ran = agent.run("leads at globex")
        read = agent.read("leads", [Filter("company_name", Op.ICONTAINS, "globex")])
        assert read.metadata.cache == "hit" and len(backend.reads) == 1
        assert read.records == ran.records

    def test_summary_when_more_rows_match(
        self, backend: CountingBackend, writer: PersistenceAgent
    ) -> None:
        """Above RAG_SUMMARY_THRESHOLD the envelope has more pages and is summarised."""
        self._seed(writer)
        agent = make_agent(backend, settings=RAGSettings(summary_threshold=2, default_limit=2))
        meta = agent.read("leads").metadata
        assert meta.has_more is True and meta.summary is not None
        assert meta.summary["sample_size"] == 2 and meta.summary["total_count"] == 3

    @pytest.mark.parametrize(
        ("kwargs", "error"),
        [
            ({"table": "secrets"}, "TableNotAllowedError"),
            ({"table": "leads", "filters": Filter("id", Op.EQ, 1)}, "InvalidQueryError"),
            ({"table": "leads", "filters": ["id = 1"]}, "InvalidQueryError"),
            ({"table": "leads", "columns": "email"}, "InvalidQueryError"),
            ({"table": "leads", "order": ["no such"]}, "InvalidQueryError"),
            ({"table": "leads", "limit": 0}, "InvalidQueryError"),
            ({"table": "leads", "include_raw": "yes"}, "InvalidQueryError"),
            ({"table": "leads", "columns": ["password"]}, "ColumnNotAllowedError"),
            (
                {"table": "leads", "filters": [Filter("id", Op.EQ, 1), Filter("id", Op.EQ, 2)]},
                "InvalidQueryError",
            ),
        ],
    )
    def test_never_raises(
        self, backend: CountingBackend, kwargs: dict[str, Any], error: str
    ) -> None:
        """Refused or malformed reads are error envelopes with no records."""
        data = valid(make_agent(backend).read(return_json=True, **kwargs))
        assert data["records"] == []
        assert data["metadata"]["error"]["type"] == error

    def test_backend_failure(self, backend: CountingBackend) -> None:
        """A failing backend is reported in metadata.error, with the effective window."""
        backend.fail = True
        envelope = make_agent(backend).read("leads", limit=5)
        assert envelope.metadata.error is not None
        assert envelope.metadata.error.type == "BackendUnavailableError"
        assert (envelope.metadata.limit, envelope.records) == (5, [])

    def test_error_envelope(self, backend: CountingBackend) -> None:
        """error_envelope reports an error for a table, stamped by the agent's clock."""
        envelope = make_agent(backend).error_envelope("leads", ValueError("bad input"))
        assert envelope.metadata.source == "persistence.leads"
        assert envelope.metadata.retrieved_at == NOW
        assert envelope.metadata.error is not None
        assert (envelope.metadata.error.type, envelope.metadata.error.message) == (
            "ValueError",
            "bad input",
        )
        assert make_agent(backend).error_envelope(None, "x").metadata.source == "persistence"


class TestExplicitFilters:
    """``run(filters=...)`` skips reading the text and every LLM step."""

    @staticmethod
    def _agent(calls: list[str]) -> RAGAgent:
        store = MemoryStore()
        create_persistence_agent(kind="memory", store=store).batch(
            "leads",
            [
                {"email": "a@acme.io", "company_name": "Acme Inc."},
                {"email": "b@globex.io", "company_name": "Globex"},
            ],
        )

        def extractor(request: ExtractionRequest) -> Understanding:
            calls.append("filters")
            return Understanding()

        def fallback(request: FallbackRequest) -> FallbackResult:
            calls.append("fallback")
            return FallbackResult()

        return RAGAgent(
            create_read_only_facade("memory", store=store),
            settings=RAGSettings(),
            extractor=extractor,
            fallback=fallback,
        )

    def test_explicit_filters_replace_the_text(self) -> None:
        """The given filters are queried (and reformulated); the text is not parsed."""
        calls: list[str] = []
        envelope = self._agent(calls).run("leads at globex", filters={"company": "Acme Corp"})
        assert envelope.metadata.fallback == "reformulation"
        assert envelope.metadata.query_filters == {"company": "Acme"}
        assert [r.model_extra["email"] for r in envelope.records] == ["a@acme.io"]  # type: ignore[index]
        assert calls == []

    def test_no_fallback_when_nothing_matches(self) -> None:
        """Zero rows with explicit filters never reach the LLM fallback."""
        calls: list[str] = []
        envelope = self._agent(calls).run("", filters={"email": "nobody@x.io"})
        assert envelope.metadata.total_count == 0
        assert envelope.records == []
        assert calls == []

    def test_invalid_filters_are_an_error_envelope(self) -> None:
        """A non-mapping is refused in the envelope; so are filters of which none is valid (an
        unfiltered table is never read instead)."""
        calls: list[str] = []
        agent = self._agent(calls)
        bad = agent.run("", filters=["company", "acme"])  # type: ignore[arg-type]
        assert bad.metadata.error is not None
        assert bad.metadata.error.type == "InvalidQueryError"
        empty = agent.run("", filters={"id": "not a number"})
        assert empty.metadata.error is not None
        assert "at least one filter" in empty.metadata.error.message
        assert empty.metadata.total_count == 0 and empty.records == []
        assert calls == []


class TestFallbackPage:
    """Fallback records are paged by the effective ``offset`` that the metadata reports."""

    def test_offset_applies_to_fallback_records(self) -> None:
        """With five rows read, offset 2 and limit 2 give rows 3 and 4 of five."""
        rows = [{"id": i, "company_name": f"C{i}"} for i in range(1, 6)]

        def fallback(request: FallbackRequest) -> FallbackResult:
            return FallbackResult(reads=[FallbackRead(table="leads", rows=rows)])

        agent = RAGAgent(
            create_read_only_facade("memory"), settings=RAGSettings(), fallback=fallback
        )
        envelope = agent.run("something vague", limit=2, offset=2)
        assert envelope.metadata.fallback == "agent"
        assert (envelope.metadata.limit, envelope.metadata.offset) == (2, 2)
        assert envelope.metadata.total_count == 5
        assert [r.provenance.row_id for r in envelope.records] == [3, 4]


class TestLongTextReachesNoModel:
    """The LLM steps see at most the prefix the rules read, never a megabyte of text."""

    def test_llm_steps_receive_the_prefix_only(self) -> None:
        """Filter extraction and the fallback get the first MAX_TEXT_LENGTH characters."""
        seen: list[int] = []

        def extractor(request: ExtractionRequest) -> Understanding:
            seen.append(len(request.text))
            return Understanding()

        def fallback(request: FallbackRequest) -> FallbackResult:
            seen.append(len(request.text))
            return FallbackResult()

        agent = RAGAgent(
            create_read_only_facade("memory"),
            settings=RAGSettings(),
            extractor=extractor,
            fallback=fallback,
        )
        # Longer than the prefix, within the question bound (a longer one is refused).
        envelope = agent.run("y" * (2 * MAX_TEXT_LENGTH))
        assert envelope.metadata.error is None
        assert seen == [MAX_TEXT_LENGTH, MAX_TEXT_LENGTH]


class TestLongTextIsNotRetained:
    """The agent does not keep copies of long query texts after ``run`` returns."""

    def test_memoised_rule_parse_keeps_only_the_parsed_prefix(self) -> None:
        """What twenty distinct long texts leave behind does not grow with their length: the
        memos keep the parsed prefix (a few copies of it: the parse's key, its topic, its
        tokens), never the text."""

        def retained(size: int) -> int:
            # The question bound raised past the texts: what is kept of an accepted long text.
            settings = RAGSettings(max_question_chars=2 * size)
            agent = RAGAgent(create_read_only_facade("memory"), settings=settings)
            # Warmed with a text of the same shape: what is measured is what each further text
            # leaves, not the caches every first run of a process fills.
            agent.run(f"lead #{size} " + "x" * size)
            gc.collect()
            tracemalloc.start()
            try:
                before = tracemalloc.get_traced_memory()[0]
                for i in range(20):
                    agent.run(f"lead #{i} " + chr(ord("a") + i % 20) * size)
                gc.collect()
                return tracemalloc.get_traced_memory()[0] - before
            finally:
                tracemalloc.stop()

        assert MAX_TEXT_LENGTH < 100_000
        short, long = retained(100_000), retained(400_000)
        assert short < 20 * 10 * MAX_TEXT_LENGTH  # about ten prefix-sized objects a text
        assert long < short * 1.25 + 20_000  # four times the text, the same memory


class TestCachedRecordsCannotBeAltered:
    """A caller cannot change, through ``model_extra``, the records the cache hands out again."""

    @staticmethod
    def _agent() -> RAGAgent:
        store = MemoryStore()
        create_persistence_agent(kind="memory", store=store).write(
            "leads", {"email": "a@x.io", "company_name": "Acme"}
        )
        return RAGAgent(create_read_only_facade("memory", store=store), settings=RAGSettings())

    def test_record_fields_are_read_only(self) -> None:
        """Item assignment, deletion and update of a record's fields raise TypeError."""
        [record] = self._agent().run("leads at acme").records
        fields = record.model_extra
        assert fields is not None
        for mutate in (
            lambda: fields.__setitem__("email", "evil@x.io"),
            lambda: fields.__delitem__("email"),
            lambda: fields.update(email="evil@x.io"),
            lambda: fields.pop("email"),
            lambda: fields.setdefault("new", 1),
            fields.clear,
            fields.popitem,
        ):
            with pytest.raises(TypeError):
                mutate()
        assert fields["email"] == "a@x.io"

    def test_cache_hit_is_unchanged_after_a_mutation_attempt(self) -> None:
        """After a refused mutation the cache hit still carries the row as read, hash intact."""
        agent = self._agent()
        first = agent.run("leads at acme").records[0]
        with pytest.raises(TypeError):
            first.model_extra["email"] = "evil@x.io"  # type: ignore[index]
        again = agent.run("leads at acme")
        assert again.metadata.cache == "hit"
        fields = again.records[0].model_extra
        assert fields is not None and fields["email"] == "a@x.io"
        assert row_hash(fields) == again.records[0].provenance.row_hash

    def test_cached_summary_is_unchanged_after_a_caller_edits_its_copy(self) -> None:
        """Editing one envelope's summary leaves the next cache hit's summary as computed."""
        store = MemoryStore()
        create_persistence_agent(kind="memory", store=store).batch(
            "leads", [{"company_name": "Acme", "status": "new"} for _ in range(4)]
        )
        agent = RAGAgent(
            create_read_only_facade("memory", store=store),
            settings=RAGSettings(summary_threshold=2),
        )
        first = agent.run("leads at acme").metadata.summary
        assert first is not None
        first["columns"]["status"]["top"].clear()
        again = agent.run("leads at acme")
        assert again.metadata.cache == "hit"
        assert again.metadata.summary is not None
        assert again.metadata.summary["columns"]["status"]["top"] == [{"value": "new", "count": 4}]


@pytest.fixture(autouse=True)
def _no_env_settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Tests here start from the design's defaults whatever the shell exports."""
    import os

    for name in list(os.environ):
        if name.startswith("RAG_") or name in {"OPENAI_API_KEY", "OPENAI_BASE_URL"}:
            monkeypatch.delenv(name)
    yield
