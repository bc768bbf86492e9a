"""``RAGSettings``: credentials in URL settings stay out of its repr and its errors."""

from __future__ import annotations

import pytest

from persistence import ConfigurationError
from rag_agent.settings import RAGSettings


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
