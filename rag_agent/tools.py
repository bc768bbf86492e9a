"""LangChain tools over a ``RAGAgent``: ``query_leads``, ``query_table``, ``rag_agent``,
``deliver_data``.

::

    from rag_agent import build_tools, create_rag_agent

    tools = build_tools(create_rag_agent(kind="memory"))
    message = tools[0].invoke(
        {"name": "query_leads", "args": {"company": "Acme"}, "id": "1", "type": "tool_call"}
    )
    message.content      # the envelope as JSON text
    message.artifact     # the same envelope as an ``Envelope`` object

The three data tools answer with the envelope as JSON text, and the ``Envelope`` object as the
artifact (``response_format="content_and_artifact"``). They never raise: input is coerced
gracefully (see :func:`coerce_tool_input`) and anything malformed, refused or failing becomes an
envelope whose ``metadata.error`` says why. ``deliver_data`` is disabled: it always answers
``{"status": "DISABLED"}``. :func:`openai_tool_schemas` gives the four tools as OpenAI
function-calling schemas.

The tools only ever read through the agent's :class:`~persistence.ReadOnlyPersistenceFacade`;
values become bound ``eq``/``icontains``/comparison values, never a pattern or SQL (``ilike`` is
not offered).
"""

from __future__ import annotations

import ast
import datetime as dt
import json
from collections.abc import Mapping
from typing import Any, Literal

from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from persistence import Filter, Order
from persistence.query import is_identifier
from rag_agent.agent import RAGAgent
from rag_agent.envelope import Envelope, ErrorInfo, Metadata, build_records
from rag_agent.fallback import LLM_OPERATORS, FilterSpec
from rag_agent.filters import FILTER_KEYS, normalize_filters, parse_filters_from_text
from rag_agent.summary import summarize_if_truncated

__all__ = [
    "DeliverDataTool",
    "QueryLeadsTool",
    "QueryTableTool",
    "RAGAgentTool",
    "ToolInputError",
    "build_tools",
    "coerce_tool_input",
    "openai_tool_schemas",
]

#: Inputs longer than this are refused before any parsing: a tool call is not a document.
MAX_INPUT_CHARS = 100_000
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
    id: int | str | None = Field(default=None, description="The lead's id.")
    client_id: int | str | None = Field(default=None, description="The client account's id.")
    limit: int | None = Field(default=None, ge=1, description="Page size (clamped).")
    offset: int | None = Field(default=None, ge=0, description="Rows to skip.")


class OrderSpec(_Args):
    """A sort key."""

    column: str
    descending: bool = False


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
    limit: int | None = Field(default=None, ge=1, description="Page size (clamped).")
    offset: int = Field(default=0, ge=0, description="Rows to skip.")


class RAGAgentInput(_Args):
    """Free text, or a partial envelope whose ``metadata`` names the filters to re-run."""

    query: str | None = Field(default=None, description="What to find, in free text.")
    table: str = Field(default="leads", description="The table to search.")
    limit: int | None = Field(default=None, ge=1)
    offset: int | None = Field(default=None, ge=0)
    metadata: dict[str, Any] | None = Field(
        default=None,
        description="A previous envelope's metadata: its query_filters, limit, offset are reused.",
    )


class DeliverDataInput(_Args):
    """Anything; delivery is disabled."""

    data: Any = Field(default=None, description="Ignored: delivery is disabled.")
    destination: str | None = Field(default=None, description="Ignored.")


# -- the tools --------------------------------------------------------------------------------


class _EnvelopeTool(BaseTool):
    """Base of the data tools: coerce, validate, run, and answer with an envelope."""

    agent: Any = None
    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"
    text_field: str | None = None
    table_label: str = "leads"

    def _to_args_and_kwargs(
        self, tool_input: str | dict[str, Any], tool_call_id: str | None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        # Validation happens in _run, so malformed input becomes an envelope, not an exception.
        return (), {"tool_input": tool_input}

    def run(self, tool_input: Any, *args: Any, **kwargs: Any) -> Any:
        """Run the tool; input nested deeper than any argument schema is refused, not raised."""
        # LangChain formats the input with str() for its callbacks before ``_run`` sees it, which
        # raises RecursionError out of the tool for input nested past the interpreter's limit.
        return super().run(_bounded(tool_input), *args, **kwargs)

    async def arun(self, tool_input: Any, *args: Any, **kwargs: Any) -> Any:
        """Async :meth:`run`, with the same refusal of overly nested input."""
        return await super().arun(_bounded(tool_input), *args, **kwargs)

    def _run(self, tool_input: Any = None, **_: Any) -> tuple[str, Envelope]:
        label = self.table_label
        try:
            if isinstance(tool_input, _TooDeep):
                raise ToolInputError(f"input is nested deeper than {_MAX_DEPTH} levels")
            args = coerce_tool_input(tool_input, text_field=self.text_field)
            if is_identifier(args.get("table")):
                label = args["table"]  # errors name the table asked for, when it is a name
            schema = self.args_schema
            assert isinstance(schema, type) and issubclass(schema, BaseModel)
            envelope = self._answer(schema.model_validate(args))
        except ValidationError as exc:
            envelope = error_envelope(label, "ToolInputError", _brief(exc))
        except Exception as exc:  # the tool contract: report, never raise
            envelope = error_envelope(label, type(exc).__name__, str(exc))
        return json.dumps(envelope.to_json(), ensure_ascii=False), envelope

    def _answer(self, args: Any) -> Envelope:
        raise NotImplementedError

    @property
    def _agent(self) -> RAGAgent:
        if not isinstance(self.agent, RAGAgent):
            raise ToolInputError("this tool was built without a RAGAgent (schema only)")
        return self.agent


class QueryLeadsTool(_EnvelopeTool):
    """Deterministic leads lookup: rules and explicit filters, cache, pagination, reformulation."""

    name: str = "query_leads"
    description: str = (
        "Look up leads (CRM contacts) deterministically. Give free text in 'query' and/or "
        "explicit filters: email (exact), company (substring), id, client_id; plus limit and "
        "offset for paging. Returns a JSON envelope: metadata (total_count, filters, "
        "reformulations) and records, each with provenance."
    )
    args_schema: type[BaseModel] = QueryLeadsInput
    text_field: str | None = "query"

    def _answer(self, args: QueryLeadsInput) -> Envelope:
        explicit = {
            key: getattr(args, key) for key in FILTER_KEYS if getattr(args, key) is not None
        }
        filters = _checked_filters(explicit)
        merged = {**parse_filters_from_text(args.query or ""), **filters}
        if not merged:
            raise ToolInputError(
                "query_leads needs at least one filter: id, email, company or client_id "
                "(explicitly or in the query text); an unfiltered table is never returned"
            )
        return run_with_filters(self._agent, merged, "leads", args.limit, args.offset)


class QueryTableTool(_EnvelopeTool):
    """Structured read of any allow-listed table."""

    name: str = "query_table"
    description: str = (
        "Read rows of an allow-listed table with structured filters: a list of "
        "{column, op, value} (op: " + ", ".join(LLM_OPERATORS) + ") or a {column: value} "
        "mapping. Optional columns, order ('col' or '-col'), limit, offset. Returns a JSON "
        "envelope with total_count and records with provenance."
    )
    args_schema: type[BaseModel] = QueryTableInput
    table_label: str = "persistence"

    def _answer(self, args: QueryTableInput) -> Envelope:
        agent = self._agent
        filters, shown = _table_filters(args.filters)
        limit = min(args.limit or agent.settings.default_limit, agent.settings.max_limit)
        page = agent.facade.read(
            args.table,
            filters,
            columns=args.columns,
            order=_orders(args.order),
            limit=limit,
            offset=args.offset,
        )
        now = dt.datetime.now(dt.UTC)
        source = f"persistence.{args.table}"
        records = build_records(page.rows, source=source, retrieved_at=now)
        summary = summarize_if_truncated(
            records, page.total_count, agent.settings.summary_threshold
        )
        metadata = Metadata(
            source=source,
            query_filters=shown or None,
            retrieved_at=now,
            total_count=page.total_count,
            limit=limit,
            offset=args.offset,
            truncated=True if summary is not None else None,
            summary=summary,
        )
        return Envelope(metadata=metadata, records=records)


class RAGAgentTool(_EnvelopeTool):
    """The full adaptive pipeline: free text (or a partial envelope) in, an envelope out."""

    name: str = "rag_agent"
    description: str = (
        "Answer a free-text request for business data (e.g. 'leads at Acme Corp') with the "
        "adaptive retrieval agent: rules and LLM filter extraction, reformulations, a "
        "rate-limited agent fallback. Or pass a previous envelope's 'metadata' to re-run its "
        "filters (e.g. with a new offset). Returns a JSON envelope with provenance."
    )
    args_schema: type[BaseModel] = RAGAgentInput
    text_field: str | None = "query"

    def _answer(self, args: RAGAgentInput) -> Envelope:
        agent = self._agent
        metadata = args.metadata or {}
        limit = args.limit if args.limit is not None else _int_or_none(metadata.get("limit"))
        offset = args.offset if args.offset is not None else _int_or_none(metadata.get("offset"))
        table = _table_of(metadata) or args.table
        if args.query and args.query.strip():
            return agent.run(args.query, table=table, limit=limit, offset=offset)
        query_filters = metadata.get("query_filters")
        filters = _checked_filters(query_filters if isinstance(query_filters, Mapping) else {})
        if not filters:
            raise ToolInputError(
                "rag_agent needs free text in 'query' or a 'metadata' with query_filters"
            )
        return run_with_filters(agent, filters, table, limit, offset)


class DeliverDataTool(BaseTool):
    """Delivery of data to third parties is disabled: always ``{"status": "DISABLED"}``."""

    name: str = "deliver_data"
    description: str = (
        "Deliver data to an external destination. DISABLED in this deployment: always answers "
        '{"status": "DISABLED"} and sends nothing.'
    )
    args_schema: type[BaseModel] = DeliverDataInput

    def run(self, tool_input: Any, *args: Any, **kwargs: Any) -> Any:
        """Answer DISABLED; like the data tools, never formats overly nested input."""
        return super().run(_bounded(tool_input), *args, **kwargs)

    async def arun(self, tool_input: Any, *args: Any, **kwargs: Any) -> Any:
        """Async :meth:`run`."""
        return await super().arun(_bounded(tool_input), *args, **kwargs)

    def _to_args_and_kwargs(
        self, tool_input: str | dict[str, Any], tool_call_id: str | None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (), {}  # whatever was sent is ignored, so nothing can fail

    def _run(self, **_: Any) -> dict[str, str]:
        return {"status": "DISABLED"}


# -- helpers -----------------------------------------------------------------------------------

#: Tool arguments nest a few levels at most; deeper input is refused before anything formats it.
_MAX_DEPTH = 32


class _TooDeep:
    """Stands in for input nested deeper than ``_MAX_DEPTH``: cheap to format, refused by _run."""

    def __repr__(self) -> str:
        return "<input nested too deeply>"


def _bounded(value: Any) -> Any:
    """``value``, or a :class:`_TooDeep` when its containers nest deeper than ``_MAX_DEPTH``.

    Iterative, and each container is visited once, so cyclic or shared structures cost linear
    time (a cycle itself is left to argument validation, which refuses it).
    """
    seen: set[int] = set()
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, Mapping | list | tuple | set | frozenset) or id(item) in seen:
            continue
        if depth >= _MAX_DEPTH:
            return _TooDeep()
        seen.add(id(item))
        children = item.values() if isinstance(item, Mapping) else item
        stack.extend((child, depth + 1) for child in children)
    return value


def error_envelope(table: str, error_type: str, message: str) -> Envelope:
    """An envelope with no records and ``metadata.error``."""
    source = table if table.startswith("persistence") else f"persistence.{table}"
    metadata = Metadata(
        source=source,
        query_filters=None,
        retrieved_at=dt.datetime.now(dt.UTC),
        total_count=0,
        error=ErrorInfo(type=error_type, message=message[:500]),
    )
    return Envelope(metadata=metadata, records=[])


def run_with_filters(
    agent: RAGAgent, filters: Mapping[str, Any], table: str, limit: int | None, offset: int | None
) -> Envelope:
    """The deterministic part of ``agent``'s pipeline with explicit ``filters`` (no LLM step)."""
    return agent.run("", table=table, limit=limit, offset=offset, filters=filters)


def _checked_filters(raw: Mapping[str, Any]) -> dict[str, Any]:
    given = {k: v for k, v in raw.items() if k in FILTER_KEYS and v is not None}
    clean = normalize_filters(given)
    bad = sorted(set(given) - set(clean))
    if bad:
        raise ToolInputError(f"invalid filter value(s) for {', '.join(bad)}")
    return clean


def _table_filters(
    raw: list[FilterSpec] | dict[str, Any] | None,
) -> tuple[list[Filter], dict[str, Any]]:
    if raw is None:
        return [], {}
    if isinstance(raw, dict):
        specs = [FilterSpec(column=column, op="eq", value=value) for column, value in raw.items()]
    else:
        specs = raw
    filters: list[Filter] = []
    shown: dict[str, dict[str, Any]] = {}
    for spec in specs:
        filters.append(spec.to_filter())
        ops = shown.setdefault(spec.column, {})
        if spec.op in ops:
            raise ToolInputError(f"two {spec.op!r} filters on {spec.column!r}")
        ops[spec.op] = spec.value
    return filters, shown


def _orders(raw: list[str | OrderSpec] | str | None) -> list[Order]:
    if raw is None:
        return []
    items = [raw] if isinstance(raw, str) else raw
    orders = []
    for item in items:
        if isinstance(item, OrderSpec):
            orders.append(Order(item.column, item.descending))
        else:
            name = item.strip()
            orders.append(Order(name[1:], True) if name.startswith("-") else Order(name))
    return orders


def _table_of(metadata: Mapping[str, Any]) -> str | None:
    source = metadata.get("source")
    if isinstance(source, str) and source.startswith("persistence."):
        return source.removeprefix("persistence.")
    return None


def _int_or_none(value: object) -> int | None:
    return value if type(value) is int else None


def _brief(exc: ValidationError) -> str:
    problems = [
        f"{'.'.join(str(p) for p in error['loc']) or 'input'}: {error['msg']}"
        for error in exc.errors()[:5]
    ]
    return "invalid arguments: " + "; ".join(problems)


def build_tools(agent: RAGAgent) -> list[BaseTool]:
    """The four tools bound to ``agent``: query_leads, query_table, rag_agent, deliver_data."""
    if not isinstance(agent, RAGAgent):
        raise TypeError(f"build_tools needs a RAGAgent, not {type(agent).__name__}")
    return [
        QueryLeadsTool(agent=agent),
        QueryTableTool(agent=agent),
        RAGAgentTool(agent=agent),
        DeliverDataTool(),
    ]


def openai_tool_schemas() -> list[dict[str, Any]]:
    """The four tools as OpenAI function-calling schemas (``{"type": "function", ...}``)."""
    tools: list[BaseTool] = [QueryLeadsTool(), QueryTableTool(), RAGAgentTool(), DeliverDataTool()]
    return [convert_to_openai_tool(tool) for tool in tools]
