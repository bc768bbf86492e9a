"""What the LangChain tools accept: input coercion and the argument schemas.

Tool calls come from models and from people, in many shapes. :func:`coerce_tool_input` turns any
of them into keyword arguments or raises :class:`ToolInputError`; the argument schemas
(:class:`QueryLeadsInput`, :class:`QueryTableInput`, :class:`RAGAgentInput`,
:class:`DeliverDataInput`) then validate them, and are also the tools' OpenAI function-calling
schemas. :func:`bounded` refuses input nested deeper than any schema before anything formats it.
The tools themselves live in :mod:`rag_agent.tools`.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from typing import Any, Literal

from langchain_core.tools import BaseTool
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from persistence import DEFAULT_RELATED_LIMIT, MAX_RELATED_LIMIT, Include, Op, Order
from persistence.query import MAX_NUMBER_DIGITS, MAX_ORDER_KEYS, MAX_TEXT_VALUE_LENGTH
from persistence.search import DEFAULT_K, MAX_K, MAX_OFFSET, MAX_SEARCH_TEXT_LENGTH
from rag_agent.specs import Condition, FilterSpec, OrderSpec, WholeNumber
from rag_agent.understanding.conditions import key_conditions
from rag_agent.understanding.filters import FILTER_KEYS, normalize_filters

__all__ = [
    "MAX_DEPTH",
    "MAX_INPUT_CHARS",
    "MAX_TEXT_ARGUMENT_CHARS",
    "AggregateTableInput",
    "BoundedInputTool",
    "CountRowsInput",
    "DeliverDataInput",
    "QueryLeadsInput",
    "QueryTableInput",
    "RAGAgentInput",
    "RangeSpec",
    "Refused",
    "SearchTableInput",
    "TooDeep",
    "TooLarge",
    "ToolInputError",
    "bounded",
    "brief",
    "checked_filters",
    "coerce_tool_input",
    "orders",
    "refusal",
]

#: Inputs longer than this are refused before any parsing: a tool call is not a document.
MAX_INPUT_CHARS = 100_000
#: Tool arguments nest a few levels at most; deeper input is refused before anything formats it.
MAX_DEPTH = 32
#: One text argument longer than this is refused at the tool's entry, before anything parses,
#: logs or redacts it: the longest value a filter accepts (an e-mail is at most 254). Free text
#: is bounded by the agent's question bound instead (``RAG_MAX_QUESTION_CHARS``).
MAX_TEXT_ARGUMENT_CHARS = MAX_TEXT_VALUE_LENGTH
# Bits of the smallest integer of MAX_NUMBER_DIGITS + 1 digits, less one.
_MAX_NUMBER_BITS = (10**MAX_NUMBER_DIGITS).bit_length() - 1
_WRAPPER_KEYS = ("input", "query")
_MAX_UNWRAP = 5
_Scalar = str | int | float | bool


class ToolInputError(ValueError):
    """Tool input that cannot be read; becomes the ``error`` of an envelope, never raised out."""


def coerce_tool_input(raw: object, *, text_field: str | None = None) -> dict[str, Any]:
    """Turn whatever a caller sent into keyword arguments, or raise :class:`ToolInputError`.

    Accepted: a mapping; a JSON object string; a Python-literal dict string (read with
    ``ast.literal_eval``, which evaluates nothing); ``{"input": …}`` or ``{"query": …}`` wrapping
    any of these. For tools with a free-text field (``text_field``), any other string is that
    text. ``None`` means no arguments.

    >>> coerce_tool_input('{"input": "{\\'company\\': \\'Acme\\'}"}')
    {'company': 'Acme'}
    >>> coerce_tool_input("leads at acme", text_field="query")
    {'query': 'leads at acme'}
    """
    value = raw
    for _ in range(_MAX_UNWRAP):
        if value is None:
            return {}
        if isinstance(value, str):
            parsed = _parse_text(value)
            if parsed is None:
                if text_field is None:
                    raise ToolInputError(
                        "expected a JSON object (or a mapping) of arguments, got plain text"
                    )
                return {text_field: value}
            value = parsed
            continue
        if not isinstance(value, Mapping):
            raise ToolInputError(f"expected a mapping of arguments, not {type(value).__name__}")
        if any(not isinstance(key, str) for key in value):
            raise ToolInputError("argument names must be strings")
        if len(value) == 1:
            [(key, inner)] = value.items()
            if key in _WRAPPER_KEYS and (inner is None or isinstance(inner, str | Mapping)):
                value = inner  # a plain-text inner value becomes the text field, as above
                continue
        return dict(value)
    raise ToolInputError("input is wrapped too deeply")


def _parse_text(text: str) -> Any:
    """A JSON or Python-literal dict (or wrapped value) in ``text``; ``None`` if it is not one."""
    stripped = text.strip()
    if not stripped.startswith("{"):
        return None
    if len(stripped) > MAX_INPUT_CHARS:
        raise ToolInputError(f"input longer than {MAX_INPUT_CHARS} characters")
    try:
        return json.loads(stripped)
    except (ValueError, RecursionError):
        pass
    try:
        return ast.literal_eval(stripped)  # literals only: nothing is evaluated
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
        raise ToolInputError(
            f"input looks like an object but is neither JSON nor a Python literal: {exc}"
        ) from None


class Refused:
    """Stands in for input refused at the tool's entry: cheap to format, refused later with
    :attr:`reason` (LangChain formats the input with ``str()`` for its callbacks first, which
    raises for an integer past 4,300 digits and costs time in the input's size)."""

    reason = "input refused"

    def __repr__(self) -> str:
        return f"<{self.reason}>"


class TooDeep(Refused):
    """Stands in for input nested deeper than ``MAX_DEPTH``."""

    reason = f"input is nested deeper than {MAX_DEPTH} levels"

    def __repr__(self) -> str:
        return "<input nested too deeply>"


class TooLarge(Refused):
    """Stands in for input with a text, a number or a total size past the entry bounds."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


def bounded(value: Any) -> Any:
    """``value``, or a :class:`Refused` when it breaks an entry bound: containers nested deeper
    than ``MAX_DEPTH``, a text argument over :data:`MAX_TEXT_ARGUMENT_CHARS` characters, all text
    together over :data:`MAX_INPUT_CHARS`, or an integer of more than :data:`MAX_NUMBER_DIGITS`
    digits. A plain-text input (the free text of a tool that takes one, or a JSON object still
    to parse) may use the whole of :data:`MAX_INPUT_CHARS`.

    Iterative, and each container is visited once, so cyclic or shared structures cost linear
    time (a cycle itself is left to argument validation, which refuses it). Runs before anything
    parses, logs or redacts the input: the refusal costs time in the bounds, not in the input.
    """
    if isinstance(value, str):
        return value if len(value) <= MAX_INPUT_CHARS else TooLarge(_too_long(len(value)))
    seen: set[int] = set()
    stack: list[tuple[Any, int]] = [(value, 0)]
    chars = 0
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            chars += len(item)
            if len(item) > MAX_TEXT_ARGUMENT_CHARS:
                return TooLarge(
                    f"a text argument of {len(item)} characters; at most "
                    f"{MAX_TEXT_ARGUMENT_CHARS} per argument"
                )
            if chars > MAX_INPUT_CHARS:
                return TooLarge(_too_long(chars))
            continue
        if isinstance(item, int) and not isinstance(item, bool):
            if abs(item).bit_length() > _MAX_NUMBER_BITS:
                return TooLarge(f"a number of more than {MAX_NUMBER_DIGITS} digits")
            continue
        if not isinstance(item, Mapping | list | tuple | set | frozenset) or id(item) in seen:
            continue
        if depth >= MAX_DEPTH:
            return TooDeep()
        seen.add(id(item))
        children = [*item.keys(), *item.values()] if isinstance(item, Mapping) else item
        stack.extend((child, depth + 1) for child in children)
    return value


def refusal(value: Any) -> ToolInputError | None:
    """The error for input :func:`bounded` refuses, or ``None`` when it is within bounds."""
    checked = bounded(value)
    return ToolInputError(checked.reason) if isinstance(checked, Refused) else None


def _too_long(chars: int) -> str:
    return f"input of {chars} characters; at most {MAX_INPUT_CHARS} in one call"


def brief(exc: ValidationError) -> str:
    """The first few problems of a validation error, on one line."""
    problems = [
        f"{'.'.join(str(p) for p in error['loc']) or 'input'}: {error['msg']}"
        for error in exc.errors()[:5]
    ]
    return "invalid arguments: " + "; ".join(problems)


def checked_filters(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The pipeline's filters (``id``, ``email``, ``company``, ``client_id``) in ``raw``.

    Other keys and ``None`` values are ignored; an invalid value is a :class:`ToolInputError`.
    """
    given = {k: v for k, v in raw.items() if k in FILTER_KEYS and v is not None}
    clean = normalize_filters(given)
    bad = sorted(set(given) - set(clean))
    if bad:
        raise ToolInputError(f"invalid filter value(s) for {', '.join(bad)}")
    return clean


def orders(raw: list[str | OrderSpec] | str | None) -> list[Order]:
    """Sort keys as given to ``query_table``: ``"col"``, ``"-col"`` or ``OrderSpec`` objects."""
    if raw is None:
        return []
    items = [raw] if isinstance(raw, str) else raw
    if len(items) > MAX_ORDER_KEYS:
        # Counted before any key is read: the facade would refuse them all the same.
        raise ToolInputError(f"order has {len(items)} sort keys; at most {MAX_ORDER_KEYS}")
    result = []
    for item in items:
        if isinstance(item, OrderSpec):
            result.append(item.to_order())
        else:
            name = item.strip()
            result.append(Order(name[1:], True) if name.startswith("-") else Order(name))
    return result


# -- argument schemas (also the OpenAI function-calling schemas) -------------------------------


class _Args(BaseModel):
    model_config = ConfigDict(extra="ignore")


class QueryLeadsInput(_Args):
    """Look up leads by free text and/or explicit filters (at least one filter is required)."""

    query: str | None = Field(
        default=None, description="Free text, e.g. 'leads at Acme Inc' or 'lead #42'."
    )
    email: str | None = Field(default=None, description="Exact e-mail (case-insensitive).")
    company: str | None = Field(default=None, description="Company name (substring match).")
    id: WholeNumber | str | None = Field(default=None, description="The lead's id.")
    client_id: WholeNumber | str | None = Field(
        default=None, description="The client account's id."
    )
    status: str | None = Field(
        default=None, description="Lead status, e.g. 'qualified' (case-insensitive)."
    )
    title: str | None = Field(default=None, description="Job title (substring), e.g. 'CTO'.")
    score_min: WholeNumber | None = Field(default=None, description="Lowest score (inclusive).")
    score_max: WholeNumber | None = Field(default=None, description="Highest score (inclusive).")
    created_after: str | None = Field(
        default=None, description="Created at or after this ISO 8601 date/time (UTC if no zone)."
    )
    created_before: str | None = Field(
        default=None, description="Created before this ISO 8601 date/time (UTC if no zone)."
    )
    count_only: bool = Field(default=False, description="Only count the matches.")
    limit: WholeNumber | None = Field(default=None, ge=1, description="Page size (clamped).")
    offset: WholeNumber | None = Field(default=None, ge=0, description="Rows to skip.")

    def conditions(self) -> tuple[Condition, ...]:
        """The explicit fields as conditions (``source="tool"``), the filter keys first."""
        keyed = checked_filters({key: getattr(self, key) for key in FILTER_KEYS})
        extra = (
            ("status", Op.IEQ, self.status),  # 'Qualified' is 'qualified', as e-mail is
            ("title", Op.ICONTAINS, self.title),
            ("score", Op.GTE, self.score_min),
            ("score", Op.LTE, self.score_max),
            ("created_at", Op.GTE, self.created_after),
            ("created_at", Op.LT, self.created_before),
        )
        return key_conditions(keyed, "tool") + tuple(
            Condition(column, op, value, "tool") for column, op, value in extra if value is not None
        )


class RangeSpec(BaseModel):
    """Bounds on one column (dates as ISO 8601 text, numbers as numbers); any subset."""

    model_config = ConfigDict(extra="ignore")

    column: str = Field(description="Column name, e.g. created_at or score.")
    gte: _Scalar | None = Field(default=None, description="At least (inclusive).")
    gt: _Scalar | None = Field(default=None, description="More than.")
    lte: _Scalar | None = Field(default=None, description="At most (inclusive).")
    lt: _Scalar | None = Field(default=None, description="Less than (a range's usual end).")

    def specs(self) -> list[FilterSpec]:
        """The bounds as filter specs."""
        bounds = (("gte", self.gte), ("gt", self.gt), ("lte", self.lte), ("lt", self.lt))
        return [FilterSpec(column=self.column, op=op, value=v) for op, v in bounds if v is not None]


class QueryTableInput(_Args):
    """Read any allow-listed table with structured filters."""

    table: str = Field(description="An allow-listed table, e.g. 'leads' or 'campaigns'.")
    filters: list[FilterSpec] | dict[str, _Scalar] | None = Field(
        default=None,
        description="A list of {column, op, value} (ANDed) or a {column: value} mapping (eq).",
    )
    columns: list[str] | None = Field(default=None, description="Columns to return.")
    order: list[str | OrderSpec] | str | None = Field(
        default=None, description="Sort keys: 'column', '-column' (descending) or objects."
    )
    ranges: list[RangeSpec] | None = Field(
        default=None,
        description="Ranges, e.g. {column: created_at, gte: '2025-03-01', lt: '2025-04-01'}.",
    )
    count_only: bool = Field(default=False, description="Only count the matches.")
    limit: WholeNumber | None = Field(default=None, ge=1, description="Page size (clamped).")
    offset: WholeNumber = Field(default=0, ge=0, description="Rows to skip.")
    include: list[str] | None = Field(
        default=None,
        max_length=8,
        description="Relations whose rows each record carries under 'related' (see "
        "describe_table), e.g. ['conversations'] or ['conversations.messages'].",
    )
    include_limit: WholeNumber | None = Field(
        default=None,
        ge=1,
        le=MAX_RELATED_LIMIT,
        description=f"Related rows per record and relation (default {DEFAULT_RELATED_LIMIT}).",
    )

    def includes(self) -> list[Include]:
        """The relations to include, each with the per-record limit."""
        limit = self.include_limit or DEFAULT_RELATED_LIMIT
        return [Include(path, limit=limit) for path in self.include or ()]

    def filter_specs(self) -> list[FilterSpec]:
        """The filters and ranges as specs: a ``{column: value}`` mapping means ``eq``."""
        return _filter_specs(self.filters, self.ranges)


def _filter_specs(
    filters: list[FilterSpec] | dict[str, _Scalar] | None, ranges: list[RangeSpec] | None
) -> list[FilterSpec]:
    if isinstance(filters, dict):
        specs = [FilterSpec(column=c, op="eq", value=v) for c, v in filters.items()]
    else:
        specs = list(filters or [])
    return specs + [spec for bounds in ranges or () for spec in bounds.specs()]


class CountRowsInput(_Args):
    """Count the rows of an allow-listed table matching structured filters (no filter: all)."""

    table: str = Field(description="An allow-listed table, e.g. 'leads' or 'campaigns'.")
    filters: list[FilterSpec] | dict[str, _Scalar] | None = Field(
        default=None,
        description="A list of {column, op, value} (ANDed) or a {column: value} mapping (eq).",
    )
    ranges: list[RangeSpec] | None = Field(
        default=None,
        description="Ranges, e.g. {column: created_at, gte: '2025-03-01', lt: '2025-04-01'}.",
    )

    def filter_specs(self) -> list[FilterSpec]:
        """The filters and ranges as specs: a ``{column: value}`` mapping means ``eq``."""
        return _filter_specs(self.filters, self.ranges)


class AggregateTableInput(CountRowsInput):
    """Counts and metrics per group of an allow-listed table's matching rows."""

    group_by: list[str] = Field(
        default_factory=list, max_length=3, description="Up to 3 columns to group by."
    )
    metrics: list[str] = Field(
        default_factory=lambda: ["count"],
        min_length=1,
        max_length=8,
        description="'count' (rows), or '<function>:<column>' with function count_distinct, "
        "sum, avg (numeric columns), min or max (numbers, text, dates), e.g. 'avg:score'.",
    )
    limit: WholeNumber | None = Field(
        default=None, ge=1, le=1000, description="At most this many groups (default 100)."
    )


class SearchTableInput(_Args):
    """Rank an allow-listed table's rows by relevance to a text, inside structured filters."""

    table: str = Field(description="An allow-listed table, e.g. 'inquiries' or 'messages'.")
    text: str = Field(
        min_length=1,
        max_length=MAX_SEARCH_TEXT_LENGTH,
        description="What the rows should be about, e.g. 'customers who want to stop paying'.",
    )
    filters: list[FilterSpec] | dict[str, _Scalar] | None = Field(
        default=None,
        description="Hard constraints: a list of {column, op, value} (ANDed) or a "
        "{column: value} mapping (eq).",
    )
    ranges: list[RangeSpec] | None = Field(
        default=None,
        description="Ranges, e.g. {column: received_at, gte: '2025-03-01', lt: '2025-04-01'}.",
    )
    k: WholeNumber = Field(default=DEFAULT_K, ge=1, le=MAX_K, description="Rows to return.")
    offset: WholeNumber = Field(default=0, ge=0, le=MAX_OFFSET, description="Ranked rows to skip.")
    mode: Literal["hybrid", "keyword", "semantic"] = Field(
        default="hybrid",
        description="hybrid (words and meaning), keyword (words, typos forgiven) or semantic.",
    )

    def filter_specs(self) -> list[FilterSpec]:
        """The filters and ranges as specs: a ``{column: value}`` mapping means ``eq``."""
        return _filter_specs(self.filters, self.ranges)


class RAGAgentInput(_Args):
    """Free text, or a partial envelope whose ``metadata`` names the filters to re-run."""

    query: str | None = Field(default=None, description="What to find, in free text.")
    table: str = Field(default="leads", description="The table to search.")
    limit: WholeNumber | None = Field(default=None, ge=1)
    offset: WholeNumber | None = Field(default=None, ge=0)
    metadata: dict[str, Any] | None = Field(
        default=None,
        description="A previous envelope's metadata: its filters, limit, offset are reused.",
    )
    conversation_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=128,
        pattern=r"^[A-Za-z0-9_.:/-]+$",
        description="Your id for a conversation: with it, a query is read as a follow-up of "
        "the earlier ones under the same id ('only the qualified ones', 'their conversations', "
        "'next page').",
    )


class DeliverDataInput(_Args):
    """Anything; delivery is disabled."""

    data: Any = Field(default=None, description="Ignored: delivery is disabled.")
    destination: str | None = Field(default=None, description="Ignored.")


class BoundedInputTool(BaseTool):
    """A tool that refuses, rather than raises on, input nested deeper than any argument schema.

    LangChain formats the input with ``str()`` for its callbacks before ``_run`` sees it, which
    raises ``RecursionError`` out of the tool for input nested past the interpreter's limit.
    """

    def run(self, tool_input: Any, *args: Any, **kwargs: Any) -> Any:
        """Run the tool; input nested deeper than any argument schema is refused, not raised."""
        return super().run(bounded(tool_input), *args, **kwargs)

    async def arun(self, tool_input: Any, *args: Any, **kwargs: Any) -> Any:
        """Async :meth:`run`, with the same refusal of overly nested input."""
        return await super().arun(bounded(tool_input), *args, **kwargs)
