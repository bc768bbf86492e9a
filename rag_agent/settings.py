"""Settings of the retrieval agent, read from the environment; explicit arguments win.

``RAGSettings.from_env()`` reads the variables below (defaults in brackets); a bad value raises
``ConfigurationError`` naming the variable::

    RAG_DEFAULT_LIMIT [50]            RAG_CACHE_TTL_SECONDS [300]
    RAG_MAX_LIMIT [500]               RAG_CACHE_MAXSIZE [1024]
    RAG_SUMMARY_THRESHOLD [200]       RAG_RATE_LIMIT_STORAGE [memory://]
    RAG_MAX_FALLBACKS_PER_MIN [30]    RAG_STATEMENT_TIMEOUT_MS [5000]
    RAG_REFORMULATION_MAX_ATTEMPTS [3] RAG_FALLBACK_MAX_STEPS [6]
    RAG_CACHE_DISABLED [unset]        RAG_DEBUG [0]
    RAG_FALLBACK_SCOPE [related]      RAG_CACHE_MAX_BYTES [67108864]
    RAG_LLM [on]                      RAG_BACKEND [inferred by the CLI]
    RAG_EMBEDDINGS [none]: none | default | openai:<model> (see rag_agent.pipeline.embeddings)
    RAG_LLM_DEADLINE_S [30]           RAG_MAX_QUESTION_CHARS [4096]
    RAG_FALLBACK_MAX_TOOL_CALLS [8]   RAG_CONVERSATION_MAX_TURNS [20]
    RAG_CONVERSATION_MAX_TOKENS [800] RAG_EXACT_TOTALS [1]
    RAG_POSTGRES_DSN, SUPABASE_URL, SUPABASE_KEY, OPENAI_API_KEY, OPENAI_BASE_URL,
    RAG_OPENAI_MODEL [gpt-4o-mini]

The backend variables come from ``persistence.settings.PersistenceSettings``, which this class
extends; ``create_rag_agent`` hands these settings to the facade factory. Keys and DSNs are
``SecretStr`` (``settings.openai_api_key.get_secret_value()``).

Example::

    settings = RAGSettings.from_env(max_limit=100)   # the argument wins over RAG_MAX_LIMIT
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Literal, Self, get_args

from pydantic import BeforeValidator, Field, StrictFloat, field_validator, model_validator

from persistence.errors import ConfigurationError
from persistence.settings import (
    Count,
    Flag,
    OptionalText,
    PersistenceSettings,
    Secret,
    Text,
    unprefixed,
)
from rag_agent.runtime.cache import DEFAULT_CACHE_MAX_BYTES
from rag_agent.runtime.deadline import DEFAULT_LLM_DEADLINE_SECONDS
from rag_agent.runtime.ratelimit import STORAGE_SCHEMES

__all__ = ["BACKEND_KINDS", "ENV_VARIABLES", "SCOPE_MODES", "RAGSettings", "ScopeMode"]

#: How far the fallback's tools may read (see :mod:`rag_agent.fallback.scope`).
ScopeMode = Literal["table", "related", "related+governance"]
#: The accepted modes, for settings and errors.
SCOPE_MODES: tuple[str, ...] = get_args(ScopeMode)

#: The bundled backends, as ``RAG_BACKEND`` and the CLI's ``--backend`` name them.
BACKEND_KINDS = ("memory", "postgres", "supabase")

_DEFAULT_LIMIT = 50


def _seconds(value: object) -> object:
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise ValueError("is not a number of seconds") from None
    if type(value) is int:
        value = float(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("is not a finite number of seconds")
    return value


#: Seconds as a number; from the environment, its decimal text (``30``, ``12.5``).
Seconds = Annotated[StrictFloat, BeforeValidator(_seconds)]


class RAGSettings(PersistenceSettings):
    """Immutable settings of a ``RAGAgent`` (safe to share between threads).

    Build from the environment with :meth:`from_env`; construct directly for tests (that reads
    no environment). Every field is validated on construction, so an invalid combination never
    reaches the agent. Secrets are ``SecretStr`` and URL passwords are masked in ``repr``.

    >>> RAGSettings.from_env({"RAG_MAX_LIMIT": "100"}).max_limit
    100
    """

    default_limit: Count = Field(_DEFAULT_LIMIT, ge=1)
    max_limit: Count = Field(500, ge=1)
    summary_threshold: Count = Field(200, ge=0)
    #: Off: a page's ``total_count`` is counted only up to the page's end plus one row, so a
    #: read of many matches stops there instead of counting them all (``metadata.total_exact``
    #: is then false when the bound was reached). Counts asked for ("how many …") stay exact.
    exact_totals: Flag = True
    max_fallbacks_per_min: Count = Field(30, ge=0)
    reformulation_max_attempts: Count = Field(3, ge=0)
    cache_disabled: Flag = False
    cache_ttl_seconds: Count = Field(300, ge=1)
    cache_maxsize: Count = Field(1024, ge=1)
    cache_max_bytes: Count = Field(DEFAULT_CACHE_MAX_BYTES, ge=1)
    rate_limit_storage: Text = "memory://"
    fallback_max_steps: Count = Field(6, ge=1)
    #: Tool calls the fallback's model may ask for in one step; more end the run (each is read
    #: and checked, and a hostile model asked for a thousand at once).
    fallback_max_tool_calls: Count = Field(8, ge=1)
    #: The longest question ``run`` accepts; a longer one is refused before it is read, logged
    #: or redacted. Only the first 2,000 characters are ever parsed.
    max_question_chars: Count = Field(4_096, ge=1)
    fallback_scope: Text = "related"
    #: Turns a conversation keeps (the oldest are let go), and the tokens of history a model is
    #: shown (about four characters each; the most recent turns first).
    conversation_max_turns: Count = Field(20, ge=1, le=200)
    conversation_max_tokens: Count = Field(800, ge=0, le=100_000)
    #: Words the rules read as values beyond the generic synonym layer: ``{"vip": ["gold"]}``
    #: (``RAG_SYNONYMS`` as JSON); a synonym applies only where its target is a learned value.
    synonyms: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    debug: Flag = False
    openai_api_key: Secret = unprefixed("OPENAI_API_KEY")
    openai_base_url: OptionalText = unprefixed("OPENAI_BASE_URL")
    openai_model: OptionalText = "gpt-4o-mini"
    #: Off: no chat model and no warning about it, even with ``OPENAI_API_KEY`` set.
    llm: Flag = True
    #: The most one run waits for models: filter extraction and the fallback share it.
    llm_deadline_s: Seconds = Field(DEFAULT_LLM_DEADLINE_SECONDS, gt=0)
    #: The backend the ``rag-agent`` CLI reads when no option names one (else it is inferred).
    backend: Literal["memory", "postgres", "supabase"] | None = None
    #: What embeds text for the semantic leg of search: ``none``, ``default`` (wordllama's
    #: bundled model, offline) or ``openai:<model>`` (:mod:`rag_agent.pipeline.embeddings`).
    embeddings: Text = "none"

    @field_validator("backend", mode="before")
    @classmethod
    def _backend_name(cls, value: object) -> object:
        if isinstance(value, str):
            value = value.strip().lower() or None
            if value is not None and value not in BACKEND_KINDS:
                raise ValueError(f"is not a backend; expected one of {', '.join(BACKEND_KINDS)}")
        return value

    @field_validator("embeddings")
    @classmethod
    def _embeddings_choice(cls, value: str) -> str:
        choice = value.strip()
        lowered = choice.lower()
        if lowered in ("", "none", "default"):
            return lowered or "none"
        if lowered.startswith("openai:") and choice.partition(":")[2].strip():
            return "openai:" + choice.partition(":")[2].strip()
        raise ValueError("is not one of none, default, openai:<model>")

    @field_validator("rate_limit_storage")
    @classmethod
    def _storage_uri(cls, value: str) -> str:
        if not value.startswith(STORAGE_SCHEMES):
            raise ValueError(
                "is not a limiter storage URI; expected memory:// or redis://host:port/db "
                "(rediss://, unix:// also accepted)"
            )
        return value

    @field_validator("fallback_scope")
    @classmethod
    def _scope_mode(cls, value: str) -> str:
        if value not in SCOPE_MODES:
            raise ValueError(f"is not a fallback scope; expected one of {', '.join(SCOPE_MODES)}")
        return value

    @model_validator(mode="after")
    def _default_within_max(self) -> Self:
        if self.default_limit > self.max_limit:
            if self.default_limit != _DEFAULT_LIMIT:
                raise ConfigurationError(
                    f"default_limit={self.default_limit} (env RAG_DEFAULT_LIMIT) exceeds "
                    f"max_limit={self.max_limit} (env RAG_MAX_LIMIT)",
                    variable="RAG_DEFAULT_LIMIT",
                )
            # Only RAG_MAX_LIMIT was lowered: the default page follows it down.
            object.__setattr__(self, "default_limit", self.max_limit)
        return self


#: Field name -> the environment variable it is read from.
ENV_VARIABLES: Mapping[str, str] = RAGSettings.env_variables()
