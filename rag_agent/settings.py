"""Settings of the retrieval agent, read from the environment; explicit arguments win.

``RAGSettings.from_env()`` reads the variables below (defaults in brackets); a bad value raises
``ConfigurationError`` naming the variable::

    RAG_DEFAULT_LIMIT [50]            RAG_CACHE_TTL_SECONDS [300]
    RAG_MAX_LIMIT [500]               RAG_CACHE_MAXSIZE [1024]
    RAG_SUMMARY_THRESHOLD [200]       RAG_RATE_LIMIT_STORAGE [memory://]
    RAG_MAX_FALLBACKS_PER_MIN [30]    RAG_STATEMENT_TIMEOUT_MS [5000]
    RAG_REFORMULATION_MAX_ATTEMPTS [3] RAG_FALLBACK_MAX_STEPS [6]
    RAG_CACHE_DISABLED [unset]        RAG_DEBUG [0]
    RAG_POSTGRES_DSN, SUPABASE_URL, SUPABASE_KEY, OPENAI_API_KEY, OPENAI_BASE_URL,
    RAG_OPENAI_MODEL [gpt-4o-mini]

Example::

    settings = RAGSettings.from_env(max_limit=100)   # the argument wins over RAG_MAX_LIMIT
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from persistence.errors import ConfigurationError
from rag_agent.ratelimit import STORAGE_SCHEMES

__all__ = ["ENV_VARIABLES", "RAGSettings"]

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off"})
_URL_USERINFO = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<info>[^@/?#]*)@")


def _mask_userinfo(url: str) -> str:
    """``url`` with the password (or a lone user token) of its user info replaced by ``***``."""
    match = _URL_USERINFO.match(url)
    if match is None:
        return url
    user, colon, _ = match.group("info").partition(":")
    masked = f"{user}:***" if colon else "***"
    return f"{match.group('scheme')}{masked}@{url[match.end() :]}"


def _parse_int(minimum: int) -> Callable[[str, str], int]:
    def parse(raw: str, variable: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            raise ConfigurationError(
                f"{variable}={raw!r} is not an integer", variable=variable
            ) from None
        if value < minimum:
            raise ConfigurationError(
                f"{variable}={value} must be at least {minimum}", variable=variable
            )
        return value

    return parse


def _parse_bool(raw: str, variable: str) -> bool:
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigurationError(
        f"{variable}={raw!r} is not a boolean; use 1/true/yes/on or 0/false/no/off",
        variable=variable,
    )


def _parse_storage(raw: str, variable: str) -> str:
    value = raw.strip()
    if not value.startswith(STORAGE_SCHEMES):
        raise ConfigurationError(
            f"{variable}={_mask_userinfo(raw)!r} is not a limiter storage URI; expected "
            "memory:// or redis://host:port/db (rediss://, unix:// also accepted)",
            variable=variable,
        )
    return value


def _parse_text(raw: str, variable: str) -> str | None:
    return raw.strip() or None


def _recheck(parser: Callable[[str, str], Any], raw: str, label: str, variable: str) -> None:
    try:
        parser(raw, label)
    except ConfigurationError as exc:
        raise ConfigurationError(str(exc), variable=variable) from None


_DEFAULT_LIMIT = 50

#: field name -> (environment variable, parser)
ENV_VARIABLES: Mapping[str, tuple[str, Callable[[str, str], Any]]] = {
    "default_limit": ("RAG_DEFAULT_LIMIT", _parse_int(1)),
    "max_limit": ("RAG_MAX_LIMIT", _parse_int(1)),
    "summary_threshold": ("RAG_SUMMARY_THRESHOLD", _parse_int(0)),
    "max_fallbacks_per_min": ("RAG_MAX_FALLBACKS_PER_MIN", _parse_int(0)),
    "reformulation_max_attempts": ("RAG_REFORMULATION_MAX_ATTEMPTS", _parse_int(0)),
    "cache_disabled": ("RAG_CACHE_DISABLED", _parse_bool),
    "cache_ttl_seconds": ("RAG_CACHE_TTL_SECONDS", _parse_int(1)),
    "cache_maxsize": ("RAG_CACHE_MAXSIZE", _parse_int(1)),
    "rate_limit_storage": ("RAG_RATE_LIMIT_STORAGE", _parse_storage),
    "statement_timeout_ms": ("RAG_STATEMENT_TIMEOUT_MS", _parse_int(1)),
    "fallback_max_steps": ("RAG_FALLBACK_MAX_STEPS", _parse_int(1)),
    "debug": ("RAG_DEBUG", _parse_bool),
    "postgres_dsn": ("RAG_POSTGRES_DSN", _parse_text),
    "supabase_url": ("SUPABASE_URL", _parse_text),
    "supabase_key": ("SUPABASE_KEY", _parse_text),
    "openai_api_key": ("OPENAI_API_KEY", _parse_text),
    "openai_base_url": ("OPENAI_BASE_URL", _parse_text),
    "openai_model": ("RAG_OPENAI_MODEL", _parse_text),
}


@dataclass(frozen=True, slots=True)
class RAGSettings:
    """Immutable settings of a ``RAGAgent`` (safe to share between threads).

    Build from the environment with :meth:`from_env`; construct directly for tests. Every field is
    validated on construction, so an invalid combination never reaches the agent. Secrets are
    left out of ``repr``.
    """

    default_limit: int = _DEFAULT_LIMIT
    max_limit: int = 500
    summary_threshold: int = 200
    max_fallbacks_per_min: int = 30
    reformulation_max_attempts: int = 3
    cache_disabled: bool = False
    cache_ttl_seconds: int = 300
    cache_maxsize: int = 1024
    rate_limit_storage: str = "memory://"
    statement_timeout_ms: int = 5000
    fallback_max_steps: int = 6
    debug: bool = False
    postgres_dsn: str | None = field(default=None, repr=False)
    supabase_url: str | None = None
    supabase_key: str | None = field(default=None, repr=False)
    openai_api_key: str | None = field(default=None, repr=False)
    openai_base_url: str | None = None
    openai_model: str | None = "gpt-4o-mini"

    def __repr__(self) -> str:
        # URLs may carry credentials (``redis://:password@host``): shown with them masked.
        shown = []
        for item in dataclasses.fields(self):
            if item.repr:
                value = getattr(self, item.name)
                if isinstance(value, str):
                    value = _mask_userinfo(value)
                shown.append(f"{item.name}={value!r}")
        return f"RAGSettings({', '.join(shown)})"

    def __post_init__(self) -> None:
        for name, (variable, parser) in ENV_VARIABLES.items():
            value = getattr(self, name)
            label = f"{name} (env {variable})"
            if parser is _parse_text:
                if value is not None and not isinstance(value, str):
                    raise ConfigurationError(f"{label} must be a string or None", variable=variable)
            elif parser is _parse_bool:
                if type(value) is not bool:
                    raise ConfigurationError(
                        f"{label} must be a bool, not {value!r}", variable=variable
                    )
            elif parser is _parse_storage:
                if not isinstance(value, str):
                    raise ConfigurationError(f"{label} must be a string", variable=variable)
                _recheck(parser, value, label, variable)
            else:
                if type(value) is not int:
                    raise ConfigurationError(
                        f"{label} must be an int, not {value!r}", variable=variable
                    )
                _recheck(parser, str(value), label, variable)
        if self.default_limit > self.max_limit:
            if self.default_limit == _DEFAULT_LIMIT:
                # Only RAG_MAX_LIMIT was lowered: the default page follows it down.
                object.__setattr__(self, "default_limit", self.max_limit)
                return
            raise ConfigurationError(
                f"default_limit={self.default_limit} (env RAG_DEFAULT_LIMIT) exceeds "
                f"max_limit={self.max_limit} (env RAG_MAX_LIMIT)",
                variable="RAG_DEFAULT_LIMIT",
            )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> RAGSettings:
        """Settings from ``env`` (``os.environ`` by default), with ``overrides`` winning.

        >>> RAGSettings.from_env({"RAG_MAX_LIMIT": "100"}).max_limit
        100
        """
        source = os.environ if env is None else env
        unknown = sorted(set(overrides) - set(ENV_VARIABLES))
        if unknown:
            raise ConfigurationError(
                f"unknown setting(s) {', '.join(unknown)}; known: {', '.join(ENV_VARIABLES)}"
            )
        values: dict[str, Any] = {}
        for name, (variable, parser) in ENV_VARIABLES.items():
            if name in overrides:
                values[name] = overrides[name]
            elif variable in source:
                parsed = parser(source[variable], variable)
                # Only a blank text variable parses to None: it leaves the field's default.
                if parsed is not None:
                    values[name] = parsed
        return cls(**values)

    def replace(self, **changes: Any) -> RAGSettings:
        """A copy with ``changes`` applied (validated like the original)."""
        return dataclasses.replace(self, **changes)
