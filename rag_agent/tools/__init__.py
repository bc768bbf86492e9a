"""LangChain tools over a ``RAGAgent``: ``query_leads``, ``query_table``, ``rag_agent``,
``deliver_data``, ``count_rows``, ``aggregate_table``, ``search_table`` (rows ranked by relevance to
a text, :mod:`rag_agent.pipeline.ranking`), and the schema discovery tools ``list_tables`` and
``describe_table`` (:mod:`rag_agent.tools.discovery`).

::

    from rag_agent import build_tools, create_rag_agent

    tools = build_tools(create_rag_agent(kind="memory"))
    message = tools[0].invoke(
        {"name": "query_leads", "args": {"company": "Acme"}, "id": "1", "type": "tool_call"}
    )
    message.content      # the compact view: rows, counts, paging hints, as JSON text
    message.artifact     # the full envelope as an ``Envelope`` object

The data tools answer with the envelope's compact view
(:func:`rag_agent.envelope.compact.compact_view`: rows without provenance, counts, paging hints,
what was applied and ignored, errors) as JSON text, between untrusted-data markers with a fresh
random token per call when it carries row text (:func:`rag_agent.untrusted.boundary_block`; row text
is data, never instructions, and each description says so;
:func:`rag_agent.untrusted.unwrap_boundary` gives the JSON back), and the full ``Envelope`` object
as the artifact (``response_format="content_and_artifact"``), so a program keeps the provenance the
model does not pay for. ``build_tools(agent, content="full")`` gives the whole envelope as the
content instead, as before. They never raise: input is coerced gracefully (see
:func:`~rag_agent.tools.input.coerce_tool_input`) and anything malformed, refused or failing becomes
an envelope whose ``metadata.error`` says why. Every envelope comes from the agent
(:meth:`RAGAgent.run`, :meth:`RAGAgent.read`, :meth:`RAGAgent.error_envelope`): the tools never
build one themselves. ``deliver_data`` is disabled: it always answers ``{"status": "DISABLED"}``.
``count_rows`` and ``aggregate_table`` answer with numbers, never rows (:meth:`RAGAgent.aggregate`:
``records`` empty, ``metadata.aggregates``).
:func:`openai_tool_schemas` gives the tools as OpenAI function-calling schemas.

The tools only ever read through the agent's :class:`~persistence.ReadOnlyPersistenceFacade`;
values become bound ``eq``/``icontains``/comparison values, never a pattern or SQL (``ilike`` is
not offered).

This module is the tool set (``build_tools``, ``openai_tool_schemas``) and re-exports every
tool: their shared base is :mod:`rag_agent.tools.base`, the row-reading tools
:mod:`rag_agent.tools.data`, the ranking and counting ones :mod:`rag_agent.tools.search_aggregate`.
"""

from __future__ import annotations

from typing import Any

from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from rag_agent.agent import RAGAgent
from rag_agent.tools.base import ContentFormat
from rag_agent.tools.base import _EnvelopeTool as _EnvelopeTool
from rag_agent.tools.data import DeliverDataTool, QueryLeadsTool, QueryTableTool, RAGAgentTool
from rag_agent.tools.discovery import DescribeTableTool, ListTablesTool
from rag_agent.tools.input import ToolInputError, coerce_tool_input
from rag_agent.tools.search_aggregate import AggregateTableTool, CountRowsTool, SearchTableTool

__all__ = [
    "AggregateTableTool",
    "ContentFormat",
    "CountRowsTool",
    "DeliverDataTool",
    "DescribeTableTool",
    "ListTablesTool",
    "QueryLeadsTool",
    "QueryTableTool",
    "RAGAgentTool",
    "SearchTableTool",
    "ToolInputError",
    "build_tools",
    "coerce_tool_input",
    "openai_tool_schemas",
]


def build_tools(agent: RAGAgent, *, content: ContentFormat = "compact") -> list[BaseTool]:
    """The tools bound to ``agent``: query_leads, query_table, rag_agent, deliver_data, then
    count_rows, aggregate_table, list_tables, describe_table and search_table.

    ``content`` is what a tool's content (what the model reads) holds: ``"compact"`` (the
    default) the compact view of :mod:`rag_agent.envelope.compact`, ``"full"`` the whole envelope as
    JSON. The artifact always holds the whole answer.
    """
    if not isinstance(agent, RAGAgent):
        raise TypeError(f"build_tools needs a RAGAgent, not {type(agent).__name__}")
    if content not in ("compact", "full"):
        raise ValueError(f"content must be 'compact' or 'full', not {content!r}")
    return [
        QueryLeadsTool(agent=agent, content_format=content),
        QueryTableTool(agent=agent, content_format=content),
        RAGAgentTool(agent=agent, content_format=content),
        DeliverDataTool(),
        CountRowsTool(agent=agent, content_format=content),
        AggregateTableTool(agent=agent, content_format=content),
        ListTablesTool(agent=agent, content_format=content),
        DescribeTableTool(agent=agent, content_format=content),
        SearchTableTool(agent=agent, content_format=content),
    ]


def openai_tool_schemas() -> list[dict[str, Any]]:
    """The tools as OpenAI function-calling schemas (``{"type": "function", ...}``), in the
    order of :func:`build_tools`."""
    tools: list[BaseTool] = [
        QueryLeadsTool(),
        QueryTableTool(),
        RAGAgentTool(),
        DeliverDataTool(),
        CountRowsTool(),
        AggregateTableTool(),
        ListTablesTool(),
        DescribeTableTool(),
        SearchTableTool(),
    ]
    return [convert_to_openai_tool(tool) for tool in tools]
