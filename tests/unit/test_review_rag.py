"""Regression tests for problems found by reviewing the ``rag_agent`` package."""

from __future__ import annotations

import copy
import datetime as dt
import gc
import io
import json
import pickle
import tracemalloc
from zoneinfo import ZoneInfo

import pytest

from persistence import (
    ConfigurationError,
    MemoryStore,
    create_persistence_agent,
    create_read_only_facade,
)
from rag_agent import RAGAgent, row_hash
from rag_agent.hooks import FallbackRead, FallbackRequest, FallbackResult
from rag_agent.cli.render import emit, error_of
from rag_agent.envelope import Record, build_records
from rag_agent.filters import MAX_TEXT_LENGTH
from rag_agent.settings import RAGSettings

NOW = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


class TestOffsetsWithSeconds:
    """Datetimes whose UTC offset is not a whole number of minutes keep their exact value."""

    def test_second_resolution_offset_is_kept_and_hash_follows_design(self) -> None:
        """A +00:19:32 offset (Amsterdam mean time) is not rounded, and row_hash agrees."""
        value = dt.datetime(1850, 1, 1, tzinfo=ZoneInfo("Europe/Amsterdam"))
        row = {"id": 1, "created_at": value}
        [record] = build_records([row], source="persistence.leads", retrieved_at=NOW)
        assert record.model_extra == {"id": 1, "created_at": "1850-01-01T00:00:00+00:19:32"}
        assert record.provenance.row_hash == row_hash(row)

    def test_fixed_offset_with_seconds(self) -> None:
        """A fixed ``timezone`` offset of 30 seconds is written by isoformat, not rounded."""
        value = dt.datetime(2024, 1, 1, tzinfo=dt.timezone(dt.timedelta(seconds=30)))
        [record] = build_records([{"t": value}], source="persistence.leads", retrieved_at=NOW)
        assert record.model_extra == {"t": value.isoformat()}
        assert record.provenance.row_hash == row_hash({"t": value})


class TestSecretsStayOutOfSettingsRepr:
    """Credentials embedded in URL settings never appear in ``repr(settings)``."""

    def test_redis_password_is_masked(self) -> None:
        """A password in RAG_RATE_LIMIT_STORAGE is replaced in the repr."""
        settings = RAGSettings(rate_limit_storage="redis://:s3cret-pw@127.0.0.1:6379/0")
        text = repr(settings)
        assert "s3cret-pw" not in text
        assert "redis://:***@127.0.0.1:6379/0" in text
        assert settings.rate_limit_storage == "redis://:s3cret-pw@127.0.0.1:6379/0"

    def test_user_info_in_base_url_is_masked(self) -> None:
        """User and password in OPENAI_BASE_URL and SUPABASE_URL are masked."""
        settings = RAGSettings(
            openai_base_url="https://bob:hunter2@llm.example/v1",
            supabase_url="https://alice:topsecret@db.example",
        )
        text = repr(settings)
        assert "hunter2" not in text and "topsecret" not in text
        assert "https://bob:***@llm.example/v1" in text

    def test_urls_without_credentials_are_shown(self) -> None:
        """Plain URLs stay readable in the repr."""
        text = repr(RAGSettings(rate_limit_storage="redis://127.0.0.1:6379/0"))
        assert "rate_limit_storage='redis://127.0.0.1:6379/0'" in text

    def test_bad_storage_error_masks_the_password(self) -> None:
        """A mistyped storage scheme is refused without echoing the password in the message."""
        with pytest.raises(ConfigurationError, match="RAG_RATE_LIMIT_STORAGE") as info:
            RAGSettings.from_env({"RAG_RATE_LIMIT_STORAGE": "reddis://:s3cret-pw@127.0.0.1:6379"})
        assert "s3cret-pw" not in str(info.value)
        assert "reddis://:***@127.0.0.1:6379" in str(info.value)


class TestLongTextIsNotRetained:
    """The agent does not keep copies of long query texts after ``run`` returns."""

    def test_memoised_rule_parse_keeps_only_the_parsed_prefix(self) -> None:
        """Twenty distinct 200 kB texts leave well under one text's size of memory behind."""
        agent = RAGAgent(create_read_only_facade("memory"), settings=RAGSettings())
        size = 200_000
        assert size > MAX_TEXT_LENGTH
        agent.run("warm up the lru cache and logging")
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for i in range(20):
                agent.run(f"lead #{i} " + "x" * size)
            gc.collect()
            retained = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert retained < size


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

    def test_copies_serialise_and_compare_like_plain_records(self) -> None:
        """Deep and shallow copies, pickling, JSON and equality work and give plain dicts."""
        [record] = build_records(
            [{"id": 1, "email": "a@x.io"}], source="persistence.leads", retrieved_at=NOW
        )
        validated = Record.model_validate(record.model_dump())
        assert record == validated
        for clone in (
            record.model_copy(deep=True),
            copy.deepcopy(record),
            pickle.loads(pickle.dumps(record)),
        ):
            assert clone == record
            assert type(clone.model_extra) is dict
        assert type(record.model_copy(update={"email": "b@x.io"}).model_extra) is dict
        assert json.loads(record.model_dump_json())["email"] == "a@x.io"
        assert record.model_dump()["email"] == "a@x.io"


HOSTILE_TEXT = "Acme\x1b]52;c;ZXZpbA==\x07\x1b[2J\x9b31m\u202eevil\u2066\x7f"
_TERMINAL_CONTROLS = ("\x1b", "\x07", "\x9b", "\x7f", "\u202e", "\u2066")


class TestTerminalOutputIsInert:
    """Row text cannot send control sequences or bidi overrides to the user's terminal."""

    @staticmethod
    def _envelope() -> dict[str, object]:
        [record] = build_records(
            [{"id": 1, "company_name": HOSTILE_TEXT, "email": "a@x.io"}],
            source="persistence.leads",
            retrieved_at=NOW,
        )
        metadata = {
            "source": "persistence.leads",
            "query_filters": {"company": HOSTILE_TEXT},
            "retrieved_at": NOW.isoformat(),
            "total_count": 1,
            "error": {"type": "BackendError", "message": HOSTILE_TEXT},
        }
        return {"metadata": metadata, "records": [record.model_dump(mode="json")]}

    def test_text_rendering_has_no_control_characters(self) -> None:
        """The table, filters and error line show no escape, bell, C1, DEL or bidi control."""
        out = io.StringIO()
        emit(self._envelope(), False, out)
        text = out.getvalue()
        assert "Acme" in text and "evil" in text
        for control in _TERMINAL_CONTROLS:
            assert control not in text
        assert error_of(self._envelope()) is not None
        for control in _TERMINAL_CONTROLS:
            assert control not in (error_of(self._envelope()) or "")

    def test_json_output_escapes_them_and_keeps_the_value(self) -> None:
        """JSON output carries the controls as \\u escapes: same data, inert on a terminal."""
        out = io.StringIO()
        envelope = self._envelope()
        emit(envelope, True, out)
        text = out.getvalue()
        for control in _TERMINAL_CONTROLS:
            assert control not in text
        assert json.loads(text) == envelope
        assert "zoë" in _json_line({"name": "zoë"})


def _json_line(value: object) -> str:
    out = io.StringIO()
    emit(value, True, out)  # type: ignore[arg-type]
    return out.getvalue()


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

        def llm_filters(text: str) -> dict[str, object]:
            seen.append(len(text))
            return {}

        def fallback(request: FallbackRequest) -> FallbackResult:
            seen.append(len(request.text))
            return FallbackResult()

        agent = RAGAgent(
            create_read_only_facade("memory"),
            settings=RAGSettings(),
            llm_filters=llm_filters,
            fallback=fallback,
        )
        envelope = agent.run("y" * 1_000_000)
        assert envelope.metadata.error is None
        assert seen == [MAX_TEXT_LENGTH, MAX_TEXT_LENGTH]


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

        def llm_filters(text: str) -> dict[str, object]:
            calls.append("filters")
            return {}

        def fallback(request: FallbackRequest) -> FallbackResult:
            calls.append("fallback")
            return FallbackResult()

        return RAGAgent(
            create_read_only_facade("memory", store=store),
            settings=RAGSettings(),
            llm_filters=llm_filters,
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
        """A non-mapping is refused in the envelope; invalid values count as no filter."""
        calls: list[str] = []
        agent = self._agent(calls)
        bad = agent.run("", filters=["company", "acme"])  # type: ignore[arg-type]
        assert bad.metadata.error is not None
        assert bad.metadata.error.type == "InvalidQueryError"
        empty = agent.run("", filters={"id": "not a number"})
        assert empty.metadata.error is None
        assert empty.metadata.total_count == 0
        assert calls == []
