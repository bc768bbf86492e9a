"""Settings from the environment, explicit arguments winning, bad values named."""

from __future__ import annotations

import pytest

from persistence import ConfigurationError
from rag_agent.settings import ENV_VARIABLES, RAGSettings


class TestRAGSettings:
    """``RAGSettings`` reads the documented variables and validates every value."""

    def test_defaults_match_the_design(self) -> None:
        """An empty environment gives the design's defaults."""
        settings = RAGSettings.from_env({})
        assert (
            settings.default_limit,
            settings.max_limit,
            settings.summary_threshold,
            settings.max_fallbacks_per_min,
            settings.reformulation_max_attempts,
            settings.cache_disabled,
            settings.cache_ttl_seconds,
            settings.cache_maxsize,
            settings.rate_limit_storage,
            settings.statement_timeout_ms,
            settings.fallback_max_steps,
            settings.debug,
        ) == (50, 500, 200, 30, 3, False, 300, 1024, "memory://", 5000, 6, False)

    def test_environment_is_read(self) -> None:
        """Each variable sets its field."""
        env = {
            "RAG_DEFAULT_LIMIT": "10",
            "RAG_MAX_LIMIT": "20",
            "RAG_CACHE_DISABLED": "true",
            "RAG_RATE_LIMIT_STORAGE": "redis://127.0.0.1:6379/0",
            "RAG_DEBUG": "1",
            "OPENAI_API_KEY": "sk-test",
        }
        settings = RAGSettings.from_env(env)
        assert settings.default_limit == 10
        assert settings.max_limit == 20
        assert settings.cache_disabled is True
        assert settings.rate_limit_storage == "redis://127.0.0.1:6379/0"
        assert settings.debug is True
        assert settings.openai_api_key is not None
        assert settings.openai_api_key.get_secret_value() == "sk-test"

    def test_blank_text_variables_keep_the_defaults(self) -> None:
        """A blank text variable counts as unset: RAG_OPENAI_MODEL="" keeps the default model."""
        env = {"RAG_OPENAI_MODEL": "  ", "RAG_POSTGRES_DSN": "", "OPENAI_API_KEY": " "}
        settings = RAGSettings.from_env(env)
        assert settings.openai_model == "gpt-4o-mini"
        assert settings.postgres_dsn is None
        assert settings.openai_api_key is None

    def test_os_environ_is_the_default_source(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without an explicit mapping, ``os.environ`` is read."""
        monkeypatch.setenv("RAG_SUMMARY_THRESHOLD", "7")
        assert RAGSettings.from_env().summary_threshold == 7

    def test_explicit_arguments_win(self) -> None:
        """An override beats the environment variable."""
        settings = RAGSettings.from_env({"RAG_MAX_LIMIT": "100"}, max_limit=80)
        assert settings.max_limit == 80

    def test_lower_max_limit_lowers_the_unset_default(self) -> None:
        """Lowering only RAG_MAX_LIMIT brings the default page size down with it."""
        assert RAGSettings.from_env({"RAG_MAX_LIMIT": "30"}).default_limit == 30

    @pytest.mark.parametrize(
        ("variable", "value"),
        [
            ("RAG_DEFAULT_LIMIT", "ten"),
            ("RAG_DEFAULT_LIMIT", "0"),
            ("RAG_MAX_LIMIT", "-5"),
            ("RAG_CACHE_DISABLED", "maybe"),
            ("RAG_RATE_LIMIT_STORAGE", "mongodb://x"),
            ("RAG_CACHE_TTL_SECONDS", "1.5"),
        ],
    )
    def test_bad_value_names_the_variable(self, variable: str, value: str) -> None:
        """A bad value raises ConfigurationError naming the variable."""
        with pytest.raises(ConfigurationError, match=variable) as info:
            RAGSettings.from_env({variable: value})
        assert info.value.variable == variable

    def test_bad_explicit_value_names_argument_and_variable(self) -> None:
        """A bad explicit argument names both the argument and its variable."""
        with pytest.raises(ConfigurationError, match=r"max_limit.*RAG_MAX_LIMIT") as info:
            RAGSettings(max_limit=0)
        assert info.value.variable == "RAG_MAX_LIMIT"

    def test_bool_is_not_an_int(self) -> None:
        """``True`` is refused where a count is expected."""
        with pytest.raises(ConfigurationError, match="default_limit"):
            RAGSettings(default_limit=True)

    def test_default_limit_cannot_exceed_max(self) -> None:
        """RAG_DEFAULT_LIMIT above RAG_MAX_LIMIT is a configuration error."""
        with pytest.raises(ConfigurationError, match="RAG_DEFAULT_LIMIT"):
            RAGSettings.from_env({"RAG_DEFAULT_LIMIT": "60", "RAG_MAX_LIMIT": "40"})

    def test_unknown_override_is_refused(self) -> None:
        """A misspelt override is an error, not silently ignored."""
        with pytest.raises(ConfigurationError, match="max_limt"):
            RAGSettings.from_env({}, max_limt=3)

    def test_secrets_are_not_in_repr(self) -> None:
        """Keys and DSNs never appear in ``repr``."""
        settings = RAGSettings(openai_api_key="sk-secret", postgres_dsn="postgresql://u:pw@h/db")
        assert "sk-secret" not in repr(settings)
        assert "pw@" not in repr(settings)

    def test_replace_validates(self) -> None:
        """``replace`` returns a validated copy."""
        assert RAGSettings().replace(max_limit=9, default_limit=9).max_limit == 9
        with pytest.raises(ConfigurationError):
            RAGSettings().replace(cache_maxsize=0)

    def test_every_documented_variable_is_known(self) -> None:
        """The design's variables are all read."""
        variables = set(ENV_VARIABLES.values())
        assert {
            "RAG_DEFAULT_LIMIT",
            "RAG_MAX_LIMIT",
            "RAG_SUMMARY_THRESHOLD",
            "RAG_MAX_FALLBACKS_PER_MIN",
            "RAG_REFORMULATION_MAX_ATTEMPTS",
            "RAG_CACHE_DISABLED",
            "RAG_CACHE_TTL_SECONDS",
            "RAG_CACHE_MAXSIZE",
            "RAG_RATE_LIMIT_STORAGE",
            "RAG_STATEMENT_TIMEOUT_MS",
            "RAG_FALLBACK_MAX_STEPS",
            "RAG_DEBUG",
            "RAG_POSTGRES_DSN",
            "SUPABASE_URL",
            "SUPABASE_KEY",
            "OPENAI_API_KEY",
            "OPENAI_BASE_URL",
            "RAG_OPENAI_MODEL",
        } <= variables
