"""Adaptive retrieval on top of a read-only persistence facade.

Free text → conditions (rules first, then an optional schema-constrained LLM), each checked by
the facade and applied or reported as ignored → a paginated, cached read (or a count) →
deterministic reformulations → a rate-limited fallback → an envelope whose every record carries
verifiable provenance::

    from rag_agent import create_rag_agent
    rag = create_rag_agent(kind="memory")
    envelope = rag.run("find leads at acme", return_json=True)

The public names are imported on first use (PEP 562), so ``import rag_agent`` (and the
``rag-agent`` command's ``--help``) loads neither LangChain nor pydantic-settings nor a backend
until something needs them.
"""

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from rag_agent.agent import RAGAgent
    from rag_agent.conversation import Conversation, ConversationError, Turn
    from rag_agent.envelope import (
        Envelope,
        ErrorInfo,
        Metadata,
        Provenance,
        Record,
        ReformulationAttempt,
        build_records,
        envelope_json_schema,
        row_hash,
    )
    from rag_agent.envelope.summary import summarize
    from rag_agent.factory import create_rag_agent
    from rag_agent.hooks import (
        FallbackCall,
        FallbackRead,
        FallbackRequest,
        FallbackResult,
        FallbackRunner,
    )
    from rag_agent.runtime.cache import QueryCache
    from rag_agent.runtime.ratelimit import (
        MemorySlidingWindowLimiter,
        RateLimiter,
        RateLimiterUnavailableError,
        RedisSlidingWindowLimiter,
        create_limiter,
    )
    from rag_agent.settings import RAGSettings
    from rag_agent.specs import (
        ColumnInfo,
        Condition,
        ExtractionRequest,
        FilterSpec,
        Ignored,
        Understanding,
    )
    from rag_agent.tools import build_tools, openai_tool_schemas
    from rag_agent.understanding.filters import normalize_filters, understand
    from rag_agent.understanding.llm.extract import SchemaFilterExtractor

#: Each public name -> the module that defines it.
_EXPORTS: dict[str, str] = {
    "ColumnInfo": "rag_agent.specs",
    "Condition": "rag_agent.specs",
    "Conversation": "rag_agent.conversation",
    "ConversationError": "rag_agent.conversation",
    "Envelope": "rag_agent.envelope",
    "ErrorInfo": "rag_agent.envelope",
    "ExtractionRequest": "rag_agent.specs",
    "FallbackCall": "rag_agent.hooks",
    "FallbackRead": "rag_agent.hooks",
    "FallbackRequest": "rag_agent.hooks",
    "FallbackResult": "rag_agent.hooks",
    "FallbackRunner": "rag_agent.hooks",
    "FilterSpec": "rag_agent.specs",
    "Ignored": "rag_agent.specs",
    "MemorySlidingWindowLimiter": "rag_agent.runtime.ratelimit",
    "Metadata": "rag_agent.envelope",
    "Provenance": "rag_agent.envelope",
    "QueryCache": "rag_agent.runtime.cache",
    "RAGAgent": "rag_agent.agent",
    "RAGSettings": "rag_agent.settings",
    "RateLimiter": "rag_agent.runtime.ratelimit",
    "RateLimiterUnavailableError": "rag_agent.runtime.ratelimit",
    "Record": "rag_agent.envelope",
    "RedisSlidingWindowLimiter": "rag_agent.runtime.ratelimit",
    "ReformulationAttempt": "rag_agent.envelope",
    "SchemaFilterExtractor": "rag_agent.understanding.llm.extract",
    "Turn": "rag_agent.conversation",
    "Understanding": "rag_agent.specs",
    "build_records": "rag_agent.envelope",
    "build_tools": "rag_agent.tools",
    "create_limiter": "rag_agent.runtime.ratelimit",
    "create_rag_agent": "rag_agent.factory",
    "envelope_json_schema": "rag_agent.envelope",
    "normalize_filters": "rag_agent.understanding.filters",
    "openai_tool_schemas": "rag_agent.tools",
    "row_hash": "rag_agent.envelope",
    "summarize": "rag_agent.envelope.summary",
    "understand": "rag_agent.understanding.filters",
}

__all__ = [
    "ColumnInfo",
    "Condition",
    "Conversation",
    "ConversationError",
    "Envelope",
    "ErrorInfo",
    "ExtractionRequest",
    "FallbackCall",
    "FallbackRead",
    "FallbackRequest",
    "FallbackResult",
    "FallbackRunner",
    "FilterSpec",
    "Ignored",
    "MemorySlidingWindowLimiter",
    "Metadata",
    "Provenance",
    "QueryCache",
    "RAGAgent",
    "RAGSettings",
    "RateLimiter",
    "RateLimiterUnavailableError",
    "Record",
    "RedisSlidingWindowLimiter",
    "ReformulationAttempt",
    "SchemaFilterExtractor",
    "Turn",
    "Understanding",
    "build_records",
    "build_tools",
    "create_limiter",
    "create_rag_agent",
    "envelope_json_schema",
    "normalize_filters",
    "openai_tool_schemas",
    "row_hash",
    "summarize",
    "understand",
]


def __getattr__(name: str) -> _typing.Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rag_agent' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is an ordinary attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
