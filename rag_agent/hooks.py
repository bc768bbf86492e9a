"""The fallback seam of :class:`~rag_agent.RAGAgent`: its types, and nothing else.

Step 5 of the pipeline hands a :class:`FallbackRequest` to a :class:`FallbackRunner`, which
answers with a :class:`FallbackResult` listing the rows its tool calls actually read. The agent
and the grounded fallback (:mod:`rag_agent.fallback`) both import these types from here, so
neither imports the other's module. Step 2's seam, ``Callable[[ExtractionRequest],
Understanding]``, is ``ConditionExtractor`` in :mod:`rag_agent.understanding.request`, beside
the request it reads.

Any callable of the right shape may be injected (``RAGAgent(facade, fallback=my_runner)``);
tests use plain functions.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "FallbackCall",
    "FallbackRead",
    "FallbackRequest",
    "FallbackResult",
    "FallbackRunner",
]


@dataclass(frozen=True, slots=True)
class FallbackRequest:
    """What the fallback gets: the user's text, the table asked for, the filters found (maybe
    none), the effective page window, the step budget (``RAG_FALLBACK_MAX_STEPS``) and the
    seconds left of the run's LLM deadline (``RAG_LLM_DEADLINE_S``; ``None``: no deadline)."""

    text: str
    table: str
    filters: Mapping[str, Any]
    limit: int
    offset: int
    max_steps: int
    seconds_left: float | None = None
    #: In a conversation, the earlier turns as short lines (questions and what each answer held).
    history: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class FallbackRead:
    """Rows one tool call read through the facade, from ``table``, at ``retrieved_at``."""

    table: str
    rows: Sequence[Mapping[str, Any]]
    retrieved_at: dt.datetime | None = None


@dataclass(frozen=True, slots=True)
class FallbackCall:
    """One read the fallback's tools made: the table, its filters as ``{column: {op: value}}``
    and how many rows it returned (the envelope's ``metadata.fallback_reads``)."""

    table: str
    filters: Mapping[str, Any]
    rows: int


@dataclass(frozen=True, slots=True)
class FallbackResult:
    """Everything the fallback read in this run, and the error that stopped it, if any.

    Only ``reads`` become records: the LLM's own text never does (it is ``answer``, shown as
    text beside them).
    """

    reads: Sequence[FallbackRead] = ()
    error: BaseException | str | None = None
    #: Row ids the LLM's final answer cited but no tool call read: dropped, counted here (the
    #: envelope's ``metadata.fallback_dropped_ids``).
    dropped_ids: int = 0
    #: Every read the tools made, in order, whether or not the answer cited its rows.
    calls: Sequence[FallbackCall] = ()
    #: The model's final text (``metadata.answer``); its citations are the rows in ``reads``.
    answer: str | None = None
    #: What ran, in order: each model call (``step="model"``) and tool call (``step`` the tool's
    #: name), refused ones included, as ``metadata.trace`` shows them (see ``TraceStep``).
    steps: Sequence[Mapping[str, Any]] = ()


class FallbackRunner(Protocol):
    """Step 5's hook. Must not raise (an exception is caught and reported as the error)."""

    def __call__(self, request: FallbackRequest) -> FallbackResult:
        """Answer ``request`` by reading through the facade; return the rows read."""
        ...
