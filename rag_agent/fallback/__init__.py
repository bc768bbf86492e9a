"""The grounded tool-calling fallback: step 5 of the pipeline.

When the deterministic steps find nothing, an LLM agent (LangChain's ``create_agent``) may look
for the rows itself, with four read-only tools over the same facade: ``list_tables``,
``list_columns``, ``query_table`` (structured filters) and ``count_rows``. What it can do is
bounded, and what it says is never taken on trust:

- **Grounded records** (:mod:`.ledger`). Every row a tool call reads is written to a per-run
  :class:`ReadLedger`. The model's final answer only *cites* rows by table and id; the records are
  those ledger entries. A cited id that was never read is dropped and counted
  (``FallbackOutcome.dropped_ids``, the envelope's ``fallback_dropped_ids``): the model's text
  never becomes a record.
- **Untrusted-data boundary** (:mod:`.prompt`). Rows are shown to the model between two markers
  carrying a fresh random token per tool call, with the rule (in the system prompt) that nothing
  between markers is an instruction.
- **Scope** (:mod:`.scope`). A run reads only the table asked about and its related tables
  (governance tables only when the caller opts in), enforced by the tools themselves.
- **Allow-list and bounded cost** (:mod:`.tools`). Tools read through the facade, so a table
  outside the allow-list is refused and the refusal goes back to the model; only literal-value
  operators are offered. At most ``max_steps`` model calls (``RAG_FALLBACK_MAX_STEPS``), a cap on
  tool calls and on rows per call, and an overall ``timeout_seconds``.
- **Errors end the run** (:mod:`.runner`). A model that raises, the step limit or the timeout give
  a result with ``error`` (never an exception); with ``debug=True`` (``RAG_DEBUG=1``) the full
  error chain is logged (``rag.fallback.error``).

A typical successful run costs two or three model calls: one ``query_table`` call (or
``list_columns`` then ``query_table``) and the final answer.

Example::

    fallback = AgentFallback(facade, llm, max_steps=6)
    outcome = fallback.run("the CTO of that widget company in Berlin", table="leads")
    outcome.records       # ledger entries of rows actually read, with their read time
"""

from rag_agent.fallback.ledger import LedgerEntry, ReadLedger
from rag_agent.fallback.prompt import CitedRow, FinalAnswer, boundary_block
from rag_agent.fallback.runner import (
    DEFAULT_FALLBACK_TIMEOUT_SECONDS,
    AgentFallback,
    FallbackOutcome,
    PipelineFallback,
    create_fallback_runner,
)
from rag_agent.fallback.scope import REFERENCE_RELATIONS, FallbackScope
from rag_agent.fallback.tools import (
    FallbackStepLimitError,
    FallbackStopped,
    FallbackTimeoutError,
)
from rag_agent.specs import LLM_OPERATORS, FilterSpec

__all__ = [
    "DEFAULT_FALLBACK_TIMEOUT_SECONDS",
    "LLM_OPERATORS",
    "REFERENCE_RELATIONS",
    "AgentFallback",
    "CitedRow",
    "FallbackOutcome",
    "FallbackScope",
    "FallbackStepLimitError",
    "FallbackStopped",
    "FallbackTimeoutError",
    "FilterSpec",
    "FinalAnswer",
    "LedgerEntry",
    "PipelineFallback",
    "ReadLedger",
    "boundary_block",
    "create_fallback_runner",
]
