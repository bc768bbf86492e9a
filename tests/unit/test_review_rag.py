"""Regression tests for problems found by reviewing the ``rag_agent`` package."""

from __future__ import annotations

import datetime as dt
import gc
import tracemalloc
from zoneinfo import ZoneInfo

import pytest

from persistence import ConfigurationError, create_read_only_facade
from rag_agent import RAGAgent, row_hash
from rag_agent.envelope import build_records
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
