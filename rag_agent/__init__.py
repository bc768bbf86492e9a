"""Adaptive retrieval on top of a read-only persistence facade.

Free text → conditions (rules first, then an optional schema-constrained LLM), each checked by
the facade and applied or reported as ignored → a paginated, cached read (or a count) →
deterministic reformulations → a rate-limited fallback → an envelope whose every record carries
verifiable provenance::

    from rag_agent import create_rag_agent
    rag = create_rag_agent(kind="memory")
    envelope = rag.run("find leads at acme", return_json=True)
"""

from rag_agent.agent import RAGAgent
from rag_agent.cache import QueryCache
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
from rag_agent.factory import create_rag_agent
from rag_agent.filters import (
    filters_to_query,
    normalize_filters,
    parse_filters_from_text,
    understand,
)
from rag_agent.hooks import (
    FallbackCall,
    FallbackRead,
    FallbackRequest,
    FallbackResult,
    FallbackRunner,
    FilterExtractor,
)
from rag_agent.llm_filters import SchemaFilterExtractor, parse_filters_with_llm
from rag_agent.ratelimit import (
    MemorySlidingWindowLimiter,
    RateLimiter,
    RateLimiterUnavailableError,
    RedisSlidingWindowLimiter,
    create_limiter,
)
from rag_agent.reformulation import REFORMULATION_ORDER, reformulations
from rag_agent.settings import RAGSettings
from rag_agent.specs import (
    ColumnInfo,
    Condition,
    ExtractionRequest,
    FilterSpec,
    Ignored,
    Understanding,
)
from rag_agent.summary import summarize
from rag_agent.tools import build_tools, openai_tool_schemas

__all__ = [
    "REFORMULATION_ORDER",
    "ColumnInfo",
    "Condition",
    "Envelope",
    "ErrorInfo",
    "ExtractionRequest",
    "FallbackCall",
    "FallbackRead",
    "FallbackRequest",
    "FallbackResult",
    "FallbackRunner",
    "FilterExtractor",
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
    "Understanding",
    "build_records",
    "build_tools",
    "create_limiter",
    "create_rag_agent",
    "envelope_json_schema",
    "filters_to_query",
    "normalize_filters",
    "openai_tool_schemas",
    "parse_filters_from_text",
    "parse_filters_with_llm",
    "reformulations",
    "row_hash",
    "summarize",
    "understand",
]
