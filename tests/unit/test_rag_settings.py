"""Settings from the environment, explicit arguments winning, bad values named."""

from __future__ import annotations

from typing import ClassVar

import pytest
from pydantic import SecretStr

from persistence import ConfigurationError, PersistenceSettings
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


class TestEnvironmentReading:
    """One reader for every variable: pydantic-settings over the mapping ``from_env`` is given."""

    def test_direct_construction_reads_no_environment(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """``RAGSettings()`` is the design's defaults whatever the shell exports."""
        monkeypatch.setenv("RAG_MAX_LIMIT", "abc")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-shell")
        settings = RAGSettings()
        assert settings.max_limit == 500
        assert settings.openai_api_key is None

    def test_an_explicit_mapping_replaces_os_environ(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """``from_env(mapping)`` reads that mapping only."""
        monkeypatch.setenv("RAG_SUMMARY_THRESHOLD", "7")
        assert RAGSettings.from_env({}).summary_threshold == 200

    @pytest.mark.parametrize(
        ("raw", "expected"),
        [("1", True), ("true", True), ("YES", True), (" on ", True), ("0", False),
         ("false", False), ("No", False), ("off", False), ("", False), ("  ", False)],
    )  # fmt: skip
    def test_boolean_words(self, raw: str, expected: bool) -> None:
        """Booleans accept 1/true/yes/on and 0/false/no/off in any case; blank is false."""
        assert RAGSettings.from_env({"RAG_DEBUG": raw}).debug is expected

    @pytest.mark.parametrize("raw", ["t", "y", "2", "enabled"])
    def test_other_boolean_words_are_refused(self, raw: str) -> None:
        """Anything else is an error naming the variable and the accepted words."""
        with pytest.raises(ConfigurationError, match=r"RAG_CACHE_DISABLED.*1/true/yes/on") as info:
            RAGSettings.from_env({"RAG_CACHE_DISABLED": raw})
        assert info.value.variable == "RAG_CACHE_DISABLED"

    def test_integers_may_be_padded(self) -> None:
        """Whitespace around a count is ignored, as a shell might leave it."""
        assert RAGSettings.from_env({"RAG_CACHE_MAXSIZE": " 64\n"}).cache_maxsize == 64

    def test_blank_count_is_an_error(self) -> None:
        """Only text falls back to its default when blank; a blank count is a mistake."""
        with pytest.raises(ConfigurationError, match="RAG_MAX_LIMIT"):
            RAGSettings.from_env({"RAG_MAX_LIMIT": ""})

    def test_unprefixed_variables_and_explicit_arguments(self) -> None:
        """SUPABASE_* and OPENAI_* are read without the RAG_ prefix; arguments still win."""
        env = {"SUPABASE_URL": "https://env.example", "OPENAI_BASE_URL": "https://llm.example"}
        settings = RAGSettings.from_env(env, supabase_url="https://arg.example")
        assert settings.supabase_url == "https://arg.example"
        assert settings.openai_base_url == "https://llm.example"

    def test_unknown_override_uses_the_shared_wording(self) -> None:
        """A misspelt override is refused like a misspelt backend option, listing the fields."""
        with pytest.raises(
            ConfigurationError, match=r"unknown option\(s\) for RAGSettings: max_limt; accepted:"
        ) as info:
            RAGSettings.from_env({}, max_limt=3)
        assert "max_limit" in str(info.value)
        with pytest.raises(ConfigurationError, match="max_limt"):
            RAGSettings(max_limt=3)
        with pytest.raises(ConfigurationError, match="max_limt"):
            RAGSettings().replace(max_limt=3)

    def test_settings_are_immutable(self) -> None:
        """Assigning to a field fails: settings are shared between threads."""
        settings = RAGSettings()
        with pytest.raises(ValueError, match="frozen"):
            settings.max_limit = 3  # type: ignore[misc]


class TestSecrets:
    """Keys and DSNs are ``SecretStr``; URLs show no password; no secret is ever echoed."""

    ENV: ClassVar[dict[str, str]] = {
        "RAG_POSTGRES_DSN": "postgresql://reader:pg-secret@db/app",
        "SUPABASE_KEY": "sb-secret",
        "OPENAI_API_KEY": "sk-secret",
        "RAG_RATE_LIMIT_STORAGE": "redis://:redis-secret@127.0.0.1:6379/0",
    }

    def test_secrets_are_secret_str(self) -> None:
        """The values are there, behind ``get_secret_value()``."""
        settings = RAGSettings.from_env(self.ENV)
        assert isinstance(settings.postgres_dsn, SecretStr)
        assert settings.postgres_dsn.get_secret_value() == self.ENV["RAG_POSTGRES_DSN"]
        assert isinstance(settings.supabase_key, SecretStr)
        assert isinstance(settings.openai_api_key, SecretStr)

    def test_no_secret_in_repr_or_str(self) -> None:
        """Neither ``repr`` nor ``str`` shows a secret or a URL password."""
        settings = RAGSettings.from_env(self.ENV)
        for text in (repr(settings), str(settings)):
            for secret in ("pg-secret", "sb-secret", "sk-secret", "redis-secret"):
                assert secret not in text

    def test_a_malformed_secret_is_not_echoed(self) -> None:
        """An ill-typed secret is refused without its value in the message."""
        with pytest.raises(ConfigurationError, match="OPENAI_API_KEY") as info:
            RAGSettings(openai_api_key=12345)
        assert "12345" not in str(info.value)


class TestPersistenceSettings:
    """The backend half of the settings, usable without the retrieval agent."""

    def test_fields_and_variables(self) -> None:
        """Four backend settings and the two of redaction, their variables, and RAGSettings
        extends them."""
        assert dict(PersistenceSettings.env_variables()) == {
            "postgres_dsn": "RAG_POSTGRES_DSN",
            "statement_timeout_ms": "RAG_STATEMENT_TIMEOUT_MS",
            "supabase_url": "SUPABASE_URL",
            "supabase_key": "SUPABASE_KEY",
            "redact": "RAG_REDACT",
            "redaction_key": "RAG_REDACTION_KEY",
            "redact_lookups": "RAG_REDACT_LOOKUPS",
        }
        assert issubclass(RAGSettings, PersistenceSettings)
        assert set(PersistenceSettings.env_variables().items()) <= set(ENV_VARIABLES.items())

    def test_bad_timeout_names_the_variable(self) -> None:
        """RAG_STATEMENT_TIMEOUT_MS must be a positive integer."""
        with pytest.raises(ConfigurationError, match="RAG_STATEMENT_TIMEOUT_MS") as info:
            PersistenceSettings.from_env({"RAG_STATEMENT_TIMEOUT_MS": "0"})
        assert info.value.variable == "RAG_STATEMENT_TIMEOUT_MS"

    def test_backend_options(self) -> None:
        """Given options win; unset settings add nothing; secrets are unwrapped."""
        settings = PersistenceSettings.from_env(
            {"RAG_POSTGRES_DSN": "postgresql://env/db", "SUPABASE_URL": "https://x.example"}
        )
        assert settings.backend_options("postgres") == {
            "dsn": "postgresql://env/db",
            "statement_timeout_ms": 5000,
        }
        assert settings.backend_options("postgres", {"dsn": "postgresql://arg/db", "x": 1}) == {
            "dsn": "postgresql://arg/db",
            "statement_timeout_ms": 5000,
            "x": 1,
        }
        assert settings.backend_options("postgres", {"dsn": None})["dsn"] == "postgresql://env/db"
        assert settings.backend_options("supabase") == {"url": "https://x.example"}
        assert settings.backend_options("memory", {"store": None}) == {"store": None}


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
