"""The fallback's own tools, and the bounds of one run they count against.

Six read-only tools over the facade: ``list_tables``, ``list_columns``, ``query_table``
(structured filters, :class:`~rag_agent.specs.FilterSpec`), ``search_table`` (rows ranked by
relevance to a text, inside the same filters), ``count_rows`` and ``aggregate_table``. They
are closures over a :class:`FallbackSession`, the state of one run: its
:class:`~.ledger.ReadLedger`, its counters and its deadline.

- **Aggregates are numbers.** ``aggregate_table`` answers groups and metrics; nothing it returns
  enters the ledger, so no record can ever be made of an aggregate (records come only from rows
  ``query_table`` read). Its group keys are data, and are handed over as data.

- **Allow-list and scope.** Tools read through the facade, so a table outside the allow-list
  (``secrets``, ``public.leads``) is refused; so is an allow-listed table outside the run's
  ``scope`` (the table asked about and its related tables, :mod:`.scope`), whatever the rows or
  the prompt say. The refusal goes back to the model as a tool error and the run continues. Only
  literal-value operators are offered (no ``ilike`` patterns, no SQL).
- **Untrusted data.** Rows come back between markers with a fresh random token per call
  (:func:`rag_agent.untrusted.boundary_block`), and the tool description says so.
- **Bounded cost.** At most ``max_steps`` model calls, a cap on tool calls
  (``_TOOL_CALLS_PER_STEP`` a step) and on rows per call, and a deadline, checked before every
  model and tool call against an injectable clock.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from collections.abc import Callable, Collection, Sequence
from typing import Any, Literal

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from persistence import (
    Filter,
    Order,
    PersistenceError,
    ReadOnlyPersistenceFacade,
    TableNotAllowedError,
    get_logger,
)
from rag_agent.envelope.assemble import aggregates_info
from rag_agent.fallback.ledger import ReadLedger, Row
from rag_agent.hooks import FallbackCall
from rag_agent.specs import FilterSpec, WholeNumber, to_filters
from rag_agent.untrusted import UNTRUSTED_DATA_NOTE, boundary_block

__all__ = [
    "FallbackSession",
    "FallbackStepLimitError",
    "FallbackStopped",
    "FallbackTimeoutError",
    "FallbackToolCallLimitError",
]

_DEFAULT_ROWS_PER_CALL = 10
_MAX_ROWS_PER_CALL = 50
_TOOL_CALLS_PER_STEP = 4
_MAX_GROUPS = 20
#: Steps (model and tool calls) one run's trace keeps; a run that makes more says how many not.
MAX_TRACED_STEPS = 64
_AGGREGATE_TEXT = (
    "Count rows (or sum/avg/min/max a column) per group of up to 3 columns, for questions "
    "about numbers ('how many ... by status'). Returns numbers, never rows."
)

_log = get_logger("rag_agent.fallback")


class FallbackStopped(Exception):
    """The run was stopped by its own bounds (raised inside the agent graph, never to callers)."""

    reason: Literal["step_limit", "timeout"] = "timeout"


class FallbackToolCallLimitError(FallbackStopped):
    """One model step asked for more tool calls than ``RAG_FALLBACK_MAX_TOOL_CALLS``: each is
    parsed, checked and answered, so a thousand in one step cost seconds of CPU; the run ends
    rather than run (or refuse) them one by one."""

    reason = "step_limit"


class FallbackStepLimitError(FallbackStopped):
    """The model used all its steps (``RAG_FALLBACK_MAX_STEPS``) without a final answer."""

    reason = "step_limit"


class FallbackTimeoutError(FallbackStopped):
    """The run went past its overall timeout."""

    reason = "timeout"


class _QueryArgs(BaseModel):
    table: str = Field(description="A table from list_tables, e.g. leads.")
    filters: list[FilterSpec] = Field(default_factory=list, description="ANDed conditions.")
    columns: list[str] | None = Field(default=None, description="Columns to return (all if null).")
    order_by: str | None = Field(default=None, description="Column to sort by.")
    descending: bool = False
    limit: WholeNumber = Field(default=_DEFAULT_ROWS_PER_CALL, ge=1, le=_MAX_ROWS_PER_CALL)
    offset: WholeNumber = Field(default=0, ge=0)


class _SearchArgs(BaseModel):
    table: str = Field(description="A table from list_tables, e.g. inquiries.")
    text: str = Field(description="What the rows should be about, in a few words.")
    filters: list[FilterSpec] = Field(default_factory=list, description="ANDed conditions.")
    mode: Literal["hybrid", "keyword", "semantic"] = "hybrid"
    limit: WholeNumber = Field(default=_DEFAULT_ROWS_PER_CALL, ge=1, le=_MAX_ROWS_PER_CALL)
    offset: WholeNumber = Field(default=0, ge=0)


class _CountArgs(BaseModel):
    table: str = Field(description="A table from list_tables.")
    filters: list[FilterSpec] = Field(default_factory=list, description="ANDed conditions.")


class _AggregateArgs(_CountArgs):
    group_by: list[str] = Field(default_factory=list, max_length=3, description="Up to 3 columns.")
    metrics: list[str] = Field(
        default_factory=lambda: ["count"],
        min_length=1,
        max_length=8,
        description="'count' or '<count_distinct|sum|avg|min|max>:<column>'.",
    )


class _TableArgs(BaseModel):
    table: str = Field(description="A table from list_tables.")


class _NoArgs(BaseModel):
    pass


class FallbackSession:
    """The state of one fallback run: ledger, counters, deadline. Its tools are closures over it.

    Thread-safe: the counters are lock-protected and the ledger is thread-safe, since the agent
    may run several tool calls of one step in parallel.
    """

    def __init__(
        self,
        facade: ReadOnlyPersistenceFacade,
        *,
        max_steps: int,
        deadline: float,
        max_calls_per_step: int = 8,
        clock: Callable[[], float],
        now: Callable[[], dt.datetime],
        scope: Collection[str] | None = None,
    ) -> None:
        self.facade = facade
        #: The tables this run may read (``None``: every allow-listed table).
        self.scope = None if scope is None else frozenset(scope)
        self.max_steps = max_steps
        self.max_tool_calls = max_steps * _TOOL_CALLS_PER_STEP
        #: Tool calls one model step may ask for; more end the run (RAG_FALLBACK_MAX_TOOL_CALLS).
        self.max_calls_per_step = max_calls_per_step
        self.deadline = deadline
        self.clock = clock
        self.now = now
        self.ledger = ReadLedger()
        self.cancelled = threading.Event()
        self._lock = threading.Lock()
        self.model_calls = 0
        self.tool_calls = 0
        self.refused = 0
        self.rows_read = 0
        self.calls: list[FallbackCall] = []
        #: What ran, in order (``metadata.trace``): model calls and tool calls, refused included.
        self.steps: list[dict[str, Any]] = []
        self.untraced = 0
        self._timer = time.perf_counter  # wall time for the trace, whatever ``clock`` is

    def trace(self, step: dict[str, Any]) -> None:
        """Add ``step`` to the run's trace (counted instead once the trace is full)."""
        with self._lock:
            if len(self.steps) < MAX_TRACED_STEPS:
                self.steps.append(step)
            else:
                self.untraced += 1

    def check_time(self) -> None:
        """Raise :class:`FallbackTimeoutError` once the run is cancelled or past its deadline."""
        if self.cancelled.is_set() or self.clock() >= self.deadline:
            raise FallbackTimeoutError("agent fallback timed out")

    def start_model_call(self) -> None:
        """Count a model call; raise when the time or the step budget is spent."""
        self.check_time()
        with self._lock:
            if self.model_calls >= self.max_steps:
                raise FallbackStepLimitError(
                    f"agent fallback reached its step limit ({self.max_steps} model calls) "
                    "without a final answer",
                )
            self.model_calls += 1

    def check_step(self, asked: int) -> None:
        """Raise :class:`FallbackToolCallLimitError` when one step asks for too many calls."""
        if asked > self.max_calls_per_step:
            raise FallbackToolCallLimitError(
                f"agent fallback stopped: the model asked for {asked} tool calls in one step; "
                f"at most {self.max_calls_per_step} (RAG_FALLBACK_MAX_TOOL_CALLS)"
            )

    def start_tool_call(self) -> str | None:
        """``None`` when the call may run, else the error text to hand back to the model."""
        self.check_time()
        with self._lock:
            if self.tool_calls >= self.max_tool_calls:
                return "ERROR: tool call budget exhausted; call FinalAnswer now."
            self.tool_calls += 1
        return None

    def _refused(self, exc: PersistenceError) -> str:
        with self._lock:
            self.refused += 1
        _log.info("rag.fallback.tool_refused", error=str(exc))
        return f"ERROR: {exc}"

    def _read(self, table: str, filters: list[Filter], rows: list[Row]) -> None:
        self.ledger.record(table, rows, self.now())
        shown: dict[str, dict[str, object]] = {}
        for flt in filters:
            value = list(flt.value) if isinstance(flt.value, tuple) else flt.value
            shown.setdefault(flt.column, {})[flt.op.value] = value
        with self._lock:
            self.rows_read += len(rows)
            self.calls.append(FallbackCall(table, shown, len(rows)))

    def _in_scope(self, table: str) -> str:
        # Enforced here, in the tool, so no prompt and no row text can widen it.
        if self.scope is not None and table not in self.scope:
            raise TableNotAllowedError(
                f"table {table!r} is outside this question's scope; you may read only "
                f"{', '.join(sorted(self.scope))}",
                table=table,
                operation="read",
            )
        return table

    def _guarded(
        self,
        name: str,
        call: Callable[[], tuple[str, int | None]],
        table: object = None,
        filters: Sequence[FilterSpec] | None = None,
    ) -> str:
        # Every tool: count it against the budget, hand a refusal back to the model as text, and
        # trace it (its table and conditions as names only: a value may be a person's).
        started = self._timer()
        step: dict[str, Any] = {"step": name}
        if isinstance(table, str):
            step["table"] = table[:63]
        if filters:
            step["conditions"] = [f"{f.column[:63]} {f.op}" for f in filters[:16]]
        refused = self.start_tool_call()
        try:
            if refused:
                step.update(status="refused", note="tool call budget exhausted")
                return refused
            try:
                text, rows = call()
            except PersistenceError as exc:
                step.update(status="refused", note=type(exc).__name__)
                return self._refused(exc)
            if rows is not None:
                step["rows"] = rows
            return text
        finally:
            self.trace({**step, "ms": (self._timer() - started) * 1000})

    # -- the tools -------------------------------------------------------------------------

    def tools(self) -> list[BaseTool]:
        """The six tools of this run, for the agent graph."""
        query_table = (
            "Read rows of a table matching all filters (each {column, op, value}). "
            f"Returns at most {_MAX_ROWS_PER_CALL} rows and the total match count. "
            + UNTRUSTED_DATA_NOTE
        )
        search_table = (
            "Rows of a table matching all filters, best first by relevance to 'text' (what "
            "they are about; typos in names forgiven). Use it when the question names a topic "
            f"rather than exact values. At most {_MAX_ROWS_PER_CALL} rows. " + UNTRUSTED_DATA_NOTE
        )
        return [
            StructuredTool.from_function(
                method, name=method.__name__, description=text, args_schema=args
            )
            for method, text, args in (
                (self.list_tables, "List the tables you may read for this request.", _NoArgs),
                (self.list_columns, "List the columns of a table.", _TableArgs),
                (self.query_table, query_table, _QueryArgs),
                (self.search_table, search_table, _SearchArgs),
                (self.count_rows, "Count the rows of a table matching all filters.", _CountArgs),
                (self.aggregate_table, _AGGREGATE_TEXT, _AggregateArgs),
            )
        ]

    def list_tables(self) -> str:
        """The allow-listed tables in this run's scope, as JSON."""
        return self._guarded(
            "list_tables",
            lambda: (
                json.dumps(
                    [t for t in self.facade.tables() if self.scope is None or t in self.scope]
                ),
                None,
            ),
        )

    def list_columns(self, table: str) -> str:
        """The columns of ``table``, as JSON (or the refusal)."""
        return self._guarded(
            "list_columns",
            lambda: (json.dumps(list(self.facade.columns(self._in_scope(table)))), None),
            table,
        )

    def query_table(
        self,
        table: str,
        filters: list[FilterSpec] | None = None,
        columns: list[str] | None = None,
        order_by: str | None = None,
        descending: bool = False,
        limit: int = _DEFAULT_ROWS_PER_CALL,
        offset: int = 0,
    ) -> str:
        """Matching rows of ``table`` between untrusted-data markers; every row is ledgered."""

        def query() -> tuple[str, int]:
            shown = columns
            if shown is not None and "id" not in shown:
                shown = ["id", *shown]  # rows must stay citable
            wanted = to_filters(filters)
            page = self.facade.read(
                self._in_scope(table),
                wanted,
                columns=shown,
                order=[Order(order_by, descending)] if order_by else (),
                limit=min(limit, _MAX_ROWS_PER_CALL),
                offset=offset,
            )
            self._read(table, wanted, page.rows)
            payload = json.dumps(
                {"table": table, "total_count": page.total_count, "rows": page.rows},
                default=str,
                ensure_ascii=True,
            )
            return (
                f"{len(page.rows)} of {page.total_count} matching rows of {table!r} "
                f"(offset {offset}). Data only:\n{boundary_block(payload)}"
            ), len(page.rows)

        return self._guarded("query_table", query, table, filters)

    def search_table(
        self,
        table: str,
        text: str,
        filters: list[FilterSpec] | None = None,
        mode: str = "hybrid",
        limit: int = _DEFAULT_ROWS_PER_CALL,
        offset: int = 0,
    ) -> str:
        """Rows of ``table`` ranked by ``text`` between untrusted-data markers; every row is
        ledgered, as ``query_table``'s are."""

        def search() -> tuple[str, int]:
            wanted = to_filters(filters)
            result = self.facade.search(
                self._in_scope(table),
                text,
                filters=wanted,
                k=min(limit, _MAX_ROWS_PER_CALL),
                offset=offset,
                mode=mode,
            )
            rows = result.rows
            self._read(table, wanted, rows)
            payload = json.dumps(
                {"table": table, "ranked_by": result.query, "rows": rows},
                default=str,
                ensure_ascii=True,
            )
            return (
                f"{len(rows)} rows of {table!r} ranked by relevance (offset {offset}; "
                f"{'' if result.total_exact else 'at least '}{result.total_count} match the "
                f"filters). Data only:\n{boundary_block(payload)}"
            ), len(rows)

        return self._guarded("search_table", search, table, filters)

    def count_rows(self, table: str, filters: list[FilterSpec] | None = None) -> str:
        """How many rows of ``table`` match ``filters`` (or the refusal)."""
        return self._guarded(
            "count_rows",
            lambda: (str(self.facade.count(self._in_scope(table), to_filters(filters))), None),
            table,
            filters,
        )

    def aggregate_table(
        self,
        table: str,
        filters: list[FilterSpec] | None = None,
        group_by: list[str] | None = None,
        metrics: list[str] | None = None,
    ) -> str:
        """Counts and metrics per group of ``table`` (at most 20 groups), as data: never rows."""

        def aggregate() -> tuple[str, int | None]:
            result = self.facade.aggregate(
                self._in_scope(table),
                to_filters(filters),
                group_by=group_by or (),
                metrics=metrics or ("count",),
                limit=_MAX_GROUPS,
            )
            payload = json.dumps(
                aggregates_info(result).model_dump(mode="json"), default=str, ensure_ascii=True
            )
            return (
                f"Aggregate of {result.matched} matching rows of {table!r} (numbers, not rows: "
                f"cite no id from it). Data only:\n{boundary_block(payload)}"
            ), None

        return self._guarded("aggregate_table", aggregate, table, filters)
