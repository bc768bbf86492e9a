"""The tools that rank or count: ``search_table``, ``count_rows``, ``aggregate_table``."""

from __future__ import annotations

from pydantic import BaseModel

from rag_agent.specs import LLM_OPERATORS, to_filters
from rag_agent.tools.base import _AgentCall, _data_tool, _EnvelopeTool, _prose
from rag_agent.tools.input import AggregateTableInput, CountRowsInput, SearchTableInput


class SearchTableTool(_EnvelopeTool):
    """Rows of an allow-listed table ranked by relevance to a text, inside structured filters."""

    name: str = "search_table"
    description: str = _data_tool(
        f"""Find the rows of an allow-listed table that are about something, best first:
        'text' says what (e.g. 'customers who want to stop paying', 'could not sign in',
        a misspelled company name); filters ({{column, op, value}} with op one of
        {", ".join(LLM_OPERATORS)}, or {{column: value}}) and ranges are hard constraints.
        mode: hybrid (words and meaning; the default), keyword (words, typos forgiven) or
        semantic. k rows (default 10, at most 100) from offset. Returns a JSON envelope:
        metadata.ranking {{mode, query, legs, degraded}}, total_count (rows matching the
        filters), has_more, next_offset, and records with provenance, each provenance with
        its relevance {{score, rank, ranks}}."""
    )
    args_schema: type[BaseModel] = SearchTableInput
    table_label: str | None = None

    def _answer(self, args: SearchTableInput) -> _AgentCall:
        agent = self._agent
        found = {"k": args.k, "offset": args.offset, "mode": args.mode}
        positional = (args.table, args.text, to_filters(args.filter_specs()))
        return _AgentCall(agent.search, agent.asearch, positional, found)


class CountRowsTool(_EnvelopeTool):
    """How many rows of an allow-listed table match structured filters."""

    name: str = "count_rows"
    description: str = _prose(
        f"""Count the rows of an allow-listed table that match structured filters (a list of
        {{column, op, value}} with op one of {", ".join(LLM_OPERATORS)}, a {{column: value}}
        mapping, and ranges), without reading them; no filter counts every row. Returns JSON
        whose total_count is the count."""
    )
    args_schema: type[BaseModel] = CountRowsInput
    table_label: str | None = None

    def _answer(self, args: CountRowsInput) -> _AgentCall:
        filters = to_filters(args.filter_specs())
        agent = self._agent
        return _AgentCall(
            agent.aggregate, agent.aaggregate, (args.table, filters), {"metrics": ["count"]}
        )


class AggregateTableTool(_EnvelopeTool):
    """Counts and metrics per group of an allow-listed table."""

    name: str = "aggregate_table"
    # Group keys are row text: the output is bounded like rows are, and says so.
    description: str = _data_tool(
        """Aggregate an allow-listed table instead of reading its rows: group_by up to 3
        columns, metrics 'count', 'count_distinct:<col>', 'sum:<col>', 'avg:<col>',
        'min:<col>', 'max:<col>', over rows matching structured filters (as count_rows).
        Answers 'how many ... by status/per campaign'. Returns JSON: total_count (rows
        matched) and aggregates {group_by, metrics, groups: [{keys, values}], capped} with
        groups in key order; exact numbers are decimal strings."""
    )
    args_schema: type[BaseModel] = AggregateTableInput
    table_label: str | None = None

    def _answer(self, args: AggregateTableInput) -> _AgentCall:
        agent = self._agent
        return _AgentCall(
            agent.aggregate,
            agent.aaggregate,
            (args.table, to_filters(args.filter_specs())),
            {"group_by": args.group_by, "metrics": args.metrics, "limit": args.limit},
        )
