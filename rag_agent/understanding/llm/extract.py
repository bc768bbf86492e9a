"""Filter extraction by an LLM: step 2 of the pipeline, used when the rules find nothing (or
only weak evidence).

:class:`SchemaFilterExtractor` asks the model for the conditions of an
:class:`~rag_agent.specs.ExtractionRequest`: any column the table offers, any operator allowed on
it, typed values, counts, and an account of what was not understood. It asks through a JSON Schema
generated per request (:mod:`rag_agent.understanding.llm.schema`), checks and grounds the answer
(:mod:`rag_agent.understanding.llm.grounding`), meters model calls by an injected budget and caches
answers. The model's answer is never trusted as is: it is read through structured output when the
model supports it, otherwise through a tolerant JSON reader (:func:`read_json_object`: code
fences, prose around the JSON, a list of content blocks, see :func:`message_text`); anything
unreadable, or a model that raises, counts as nothing understood. See ``docs/llm.md``.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable

from persistence import ConfigurationError, get_logger
from persistence.steps import Steps, adrive, drive
from rag_agent.runtime.cache import QueryCache
from rag_agent.runtime.deadline import current_deadline, thinking, timeout_kwargs
from rag_agent.specs import ExtractionRequest, Ignored, Understanding
from rag_agent.understanding.llm.grounding import understand_answer
from rag_agent.understanding.llm.schema import (
    extraction_messages,
    extraction_schema,
    schema_fingerprint,
)

__all__ = ["SchemaFilterExtractor", "message_text", "read_json_object"]

_FENCE = re.compile(r"```[A-Za-z0-9_-]*\s*\n?(.*?)```", re.DOTALL)
_log = get_logger("rag_agent.understanding.llm.extract")


def message_text(message: object) -> str:
    """The text of a chat message (``content`` as a string or a list of content blocks)."""
    content = getattr(message, "content", message)
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, Mapping) and isinstance(block.get("text"), str):
                parts.append(block["text"])
        return "\n".join(parts)
    return ""


def read_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text``: inside a code fence or surrounded by prose.

    Returns ``None`` when there is none. Only ``json`` parsing is involved: nothing is evaluated.

    >>> read_json_object('Sure! ```json\\n{"id": 7}\\n``` Anything else?')
    {'id': 7}
    """
    if not isinstance(text, str):
        return None
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    for candidate in candidates:
        start = candidate.find("{")
        while start != -1:
            try:
                value, _ = decoder.raw_decode(candidate, start)
            except (ValueError, RecursionError):
                value = None
            if isinstance(value, dict):
                return value
            start = candidate.find("{", start + 1)
    return None


class SchemaFilterExtractor:
    """Conditions a chat model reads in free text, constrained by the table's schema.

    ``extractor(request)`` asks ``llm`` for the conditions of an
    :class:`~rag_agent.specs.ExtractionRequest` through structured output whose JSON Schema is
    generated from the request's columns, kinds and operators
    (:mod:`rag_agent.understanding.llm.schema`), and returns the checked, grounded part of the
    answer (:mod:`rag_agent.understanding.llm.grounding`) as an
    :class:`~rag_agent.specs.Understanding` whose conditions have ``source="llm"``. It never
    raises for what the model does: a failing model, an unreadable answer or a refused budget
    give an Understanding without conditions, with an ``ignored`` entry saying why.

    - **Structured output**: ``method="json_schema", strict=True`` where the model supports it,
      else the model's default method (tool calling), else plain text read by
      :func:`read_json_object`.
    - **Metering**: ``budget()`` is asked before every model call; ``False`` (or an exception)
      means no call. Pass the agent's limiter's ``try_acquire`` so extraction and the fallback
      share one budget; ``lambda: True`` means unmetered.
    - **Deadline**: inside a run, no model call is made once the run's LLM deadline
      (:mod:`rag_agent.runtime.deadline`) has passed; the model's own request timeout (a quarter of
      the deadline for the ``ChatOpenAI`` that ``resolve_llm`` builds) bounds each try.
    - **Caching**: answers are kept per (table, text, schema fingerprint, UTC day of ``now``) for
      ``cache_ttl`` seconds of ``timer`` (at most ``cache_maxsize`` entries; ``0`` turns the
      cache off). A hit costs no model call and no budget. Failures are not cached.

    Thread-safety: the cache is lock-protected and nothing else is mutable, so one extractor may
    serve many threads (two threads missing the same key at once may both call the model).

    >>> extractor = SchemaFilterExtractor(llm, budget=limiter.try_acquire)  # doctest: +SKIP
    >>> extractor(request).conditions  # doctest: +SKIP
    (Condition(column='score', op=<Op.GT: 'gt'>, value=80, source='llm'),)
    """

    __slots__ = ("_budget", "_cache", "_llm")

    def __init__(
        self,
        llm: BaseChatModel,
        *,
        budget: Callable[[], bool],
        cache_maxsize: int = 1024,
        cache_ttl: float = 300.0,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        if not isinstance(llm, BaseChatModel):
            raise ConfigurationError(f"llm must be a LangChain chat model, not {llm!r}")
        if not callable(budget):
            raise ConfigurationError(f"budget must be a callable returning bool, not {budget!r}")
        if type(cache_maxsize) is not int or cache_maxsize < 0:
            raise ConfigurationError(f"cache_maxsize must be an int >= 0, not {cache_maxsize!r}")
        if not isinstance(cache_ttl, int | float) or not cache_ttl > 0:
            raise ConfigurationError(f"cache_ttl must be a positive number, not {cache_ttl!r}")
        self._llm = llm
        self._budget = budget
        self._cache = QueryCache(
            maxsize=max(cache_maxsize, 1), ttl=cache_ttl, enabled=cache_maxsize > 0, timer=timer
        )

    def __call__(self, request: ExtractionRequest) -> Understanding:
        """The conditions the model reads in ``request.text``, checked and grounded."""
        return drive(self._steps(request), _invoke)

    async def acall(self, request: ExtractionRequest) -> Understanding:
        """The awaitable twin of calling the extractor: the model's ``ainvoke``, the same
        schema, budget, cache and checks (what ``RAGAgent.arun`` awaits)."""
        return await adrive(self._steps(request), _ainvoke)

    def _steps(self, request: ExtractionRequest) -> Steps[_Ask, Understanding]:
        if not isinstance(request, ExtractionRequest):
            raise TypeError(f"expected an ExtractionRequest, not {type(request).__name__}")
        if not isinstance(request.text, str) or not request.text.strip():
            return Understanding()
        log = _log.bind(extractor="schema", table=request.table)
        schema = extraction_schema(request)
        if schema is None:
            log.info("rag.filters.llm", outcome="no_columns")
            return _nothing(request, f"{request.table} offers no column to filter on")
        key = (
            request.table,
            request.text,
            schema_fingerprint(schema),
            _utc_day(request.now),
            request.history,  # the same words after other turns may mean something else
        )
        cached = self._cache.get(key)
        if isinstance(cached, Understanding):
            log.info("rag.filters.llm", outcome="cache_hit")
            return cached
        deadline = current_deadline()
        if deadline is not None and deadline.expired:
            log.info("rag.filters.llm", outcome="deadline_passed")
            return _nothing(request, "not read by the language model: the run's deadline passed")
        if not self._allowed(log):
            return _nothing(request, "not read by the language model: its call budget is spent")
        try:
            with thinking("filters"):
                raw = yield from self._ask(schema, request)
        except Exception as exc:  # any model failure means "nothing understood", never a crash
            log.warning("rag.filters.llm", outcome="model_error", error=repr(exc))
            return _nothing(request, f"the language model failed ({type(exc).__name__})")
        if raw is None:
            log.info("rag.filters.llm", outcome="unparsable")
            return _nothing(request, "the language model's answer could not be read")
        understanding = understand_answer(raw, request)
        self._cache.put(key, understanding)
        log.info(
            "rag.filters.llm",
            outcome="conditions" if understanding.conditions else "rejected_or_empty",
            conditions=[f"{c.column} {c.op.value}" for c in understanding.conditions],
            ignored=len(understanding.ignored),
        )
        return understanding

    def _allowed(self, log: Any) -> bool:
        try:
            allowed = self._budget() is True
        except Exception as exc:  # an unreachable limiter refuses, as it does for the fallback
            log.warning("rag.filters.llm", outcome="budget_error", error=repr(exc))
            return False
        if not allowed:
            log.info("rag.filters.llm", outcome="budget_exhausted")
        return allowed

    def _structured(self, schema: dict[str, Any]) -> Runnable[Any, Any] | None:
        """Structured output for ``schema``: strict JSON schema, else the default, else None."""
        attempts: tuple[dict[str, Any], ...] = ({"method": "json_schema", "strict": True}, {})
        for options in attempts:
            try:
                return self._llm.with_structured_output(schema, include_raw=True, **options)
            except NotImplementedError:
                return None
            except (ValueError, TypeError):  # this model does not take these options
                continue
        return None

    def _ask(
        self, schema: dict[str, Any], request: ExtractionRequest
    ) -> Steps[_Ask, Mapping[str, Any] | None]:
        structured = self._structured(schema)
        if structured is None:
            # No structured output at all: the schema goes into the prompt, the answer is text.
            system, human = extraction_messages(request, extraction_schema(request))
            deadline = current_deadline()
            # A model that takes a per-call timeout gets the extraction's share of the deadline
            # (structured output cannot pass one: the model's own request timeout bounds it).
            bound = timeout_kwargs(self._llm, deadline.extraction_timeout()) if deadline else {}
            reply = yield (self._llm, [SystemMessage(system), HumanMessage(human)], bound)
            return read_json_object(message_text(reply))
        system, human = extraction_messages(request)
        answer = yield (structured, [SystemMessage(system), HumanMessage(human)], {})
        parsed = answer.get("parsed") if isinstance(answer, Mapping) else answer
        if isinstance(parsed, Mapping):
            return parsed
        # The model answered in prose (or a malformed call): read JSON from its text.
        raw = answer.get("raw") if isinstance(answer, Mapping) else None
        return read_json_object(message_text(raw)) if raw is not None else None


#: A model call the extraction's steps ask for: the runnable, its messages and call options
#: (a request timeout within the run's deadline, for models that take one).
_Ask = tuple[Runnable[Any, Any], list[BaseMessage], dict[str, Any]]


def _invoke(ask: _Ask) -> Any:
    runnable, messages, options = ask
    return runnable.invoke(messages, **options)


async def _ainvoke(ask: _Ask) -> Any:
    runnable, messages, options = ask
    return await runnable.ainvoke(messages, **options)


def _utc_day(now: dt.datetime) -> dt.date:
    # Relative dates ("today", "last week") change at midnight UTC: never serve yesterday's.
    return (now if now.tzinfo else now.replace(tzinfo=dt.UTC)).astimezone(dt.UTC).date()


def _nothing(request: ExtractionRequest, reason: str) -> Understanding:
    return Understanding(ignored=(Ignored(" ".join(request.text.split())[:120], reason),))
