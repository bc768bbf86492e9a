"""The row-reading tools ``query_leads``, ``query_table``, ``rag_agent``; and ``deliver_data``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field

from rag_agent.conversation.store import ConversationStore
from rag_agent.specs import LLM_OPERATORS, Condition, FilterSpec, to_filters
from rag_agent.tools.base import _AgentCall, _data_tool, _EnvelopeTool, _FreeTextTool
from rag_agent.tools.input import (
    BoundedInputTool,
    DeliverDataInput,
    QueryLeadsInput,
    QueryTableInput,
    RAGAgentInput,
    orders,
)


class QueryLeadsTool(_FreeTextTool):
    """Deterministic leads lookup: rules and explicit filters, cache, pagination, reformulation."""

    name: str = "query_leads"
    description: str = _data_tool(
        """Look up leads (CRM contacts) deterministically. Give free text in 'query' and/or
        explicit filters: email (exact, case-insensitive), company (substring), id, client_id,
        status, title (substring), score_min/score_max, created_after/created_before (ISO 8601);
        count_only to count; limit and offset for paging. Returns JSON: total_count, the rows,
        has_more and next_offset, the applied filters and their source, what was ignored."""
    )
    args_schema: type[BaseModel] = QueryLeadsInput
    missing_filters: str = (
        "query_leads needs at least one filter (explicitly or in the query text); "
        "an unfiltered table is never returned"
    )

    def _answer(self, args: QueryLeadsInput) -> _AgentCall:
        return self._run_conditions(
            args.query or "",
            args.conditions(),
            "leads",
            (args.limit, args.offset),
            count_only=args.count_only or None,
        )


class QueryTableTool(_EnvelopeTool):
    """Structured read of any allow-listed table."""

    name: str = "query_table"
    description: str = _data_tool(
        f"""Read rows of an allow-listed table with structured filters: a list of
        {{column, op, value}} (op: {", ".join(LLM_OPERATORS)}; ieq is case-insensitive
        equality) or a {{column: value}} mapping, and ranges ({{column, gte, gt, lte, lt}};
        dates as ISO 8601). Values are read as the column's type (uuid, integer, numeric,
        boolean, date, timestamp). Optional columns, order ('col' or '-col'), limit, offset,
        count_only, include (relations from describe_table, e.g. ['conversations']: each record
        then carries its related rows). Returns JSON with total_count, has_more, next_offset
        and the rows."""
    )
    args_schema: type[BaseModel] = QueryTableInput
    table_label: str | None = None

    def _answer(self, args: QueryTableInput) -> _AgentCall:
        return _AgentCall(
            self._agent.read,
            self._agent.aread,
            (args.table, to_filters(args.filter_specs())),
            {
                "columns": args.columns,
                "order": orders(args.order),
                "limit": args.limit,
                "offset": args.offset,
                "count_only": args.count_only,
                "include": args.includes(),
            },
        )


class RAGAgentTool(_FreeTextTool):
    """The full adaptive pipeline: free text (or a partial envelope) in, an envelope out."""

    name: str = "rag_agent"
    description: str = _data_tool(
        """Answer a free-text request for business data (e.g. 'leads at Acme Corp') with the
        adaptive retrieval agent: rules and LLM filter extraction, reformulations, a rate-limited
        agent fallback. For the next page, ask again with the same query and offset set to
        next_offset (or pass a previous envelope's 'metadata' with a new offset). Returns the
        rows, total_count, has_more and next_offset, and the filters applied and ignored."""
    )
    args_schema: type[BaseModel] = RAGAgentInput
    missing_filters: str = "rag_agent needs free text in 'query' or a 'metadata' with filters"
    #: The conversations callers name by ``conversation_id`` (in memory, bounded).
    conversations: ConversationStore = Field(default_factory=ConversationStore, exclude=True)

    def _answer(self, args: RAGAgentInput) -> _AgentCall:
        metadata = args.metadata or {}
        limit = args.limit if args.limit is not None else _int_or_none(metadata.get("limit"))
        offset = args.offset if args.offset is not None else _int_or_none(metadata.get("offset"))
        table = _table_of(metadata) or args.table
        if args.query and args.query.strip() and args.conversation_id:
            # A follow-up reads its table and page from the conversation unless given.
            conversation = self.conversations.get(
                args.conversation_id, lambda id: self._agent.conversation(id=id)
            )
            fields = args.model_fields_set
            page = {
                "table": args.table if "table" in fields else None,
                "limit": limit,
                "offset": offset,
                "conversation": conversation,
            }
            return _AgentCall(self._agent.run, self._agent.arun, (args.query,), page)
        if args.query and args.query.strip():
            page = {"table": table, "limit": limit, "offset": offset}
            return _AgentCall(self._agent.run, self._agent.arun, (args.query,), page)
        count_only = metadata.get("count_only") is True or None
        conditions = _metadata_conditions(metadata)
        topic = _ranking_query(metadata)  # a ranked envelope's next page is ranked the same
        if topic and not conditions:
            page = {"table": table, "limit": limit, "offset": offset}
            return _AgentCall(self._agent.run, self._agent.arun, (topic,), page)
        return self._run_conditions(topic, conditions, table, (limit, offset), count_only)


class DeliverDataTool(BoundedInputTool):
    """Delivery of data to third parties is disabled: always ``{"status": "DISABLED"}``."""

    name: str = "deliver_data"
    description: str = (
        "Deliver data to an external destination. DISABLED in this deployment: always answers "
        '{"status": "DISABLED"} and sends nothing.'
    )
    args_schema: type[BaseModel] = DeliverDataInput

    def _to_args_and_kwargs(
        self, tool_input: str | dict[str, Any], tool_call_id: str | None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (), {}  # whatever was sent is ignored, so nothing can fail

    def _run(self, **_: Any) -> dict[str, str]:
        return {"status": "DISABLED"}


def _table_of(metadata: Mapping[str, Any]) -> str | None:
    source = metadata.get("source")
    if isinstance(source, str) and source.startswith("persistence."):
        return source.removeprefix("persistence.")
    return None


def _metadata_conditions(metadata: Mapping[str, Any]) -> tuple[Condition, ...]:
    # A previous envelope's applied filters (each {column, op, value}): every condition it
    # applied, whoever understood it. query_filters is only their display.
    applied = metadata.get("filters")
    if not isinstance(applied, list):
        return ()
    specs = [FilterSpec.model_validate(item) for item in applied]
    return tuple(Condition(f.column, f.op, f.value, "tool") for f in to_filters(specs))


def _ranking_query(metadata: Mapping[str, Any]) -> str:
    ranking = metadata.get("ranking")
    query = ranking.get("query") if isinstance(ranking, Mapping) else None
    return query if isinstance(query, str) else ""


def _int_or_none(value: object) -> int | None:
    return value if type(value) is int else None
