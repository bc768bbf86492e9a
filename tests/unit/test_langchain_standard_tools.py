"""LangChain's standard tool suites (``langchain-tests``) run against every tool."""

from __future__ import annotations

from typing import Any, ClassVar

from langchain_core.tools import BaseTool
from langchain_tests.integration_tests import ToolsIntegrationTests
from langchain_tests.unit_tests import ToolsUnitTests

from persistence import MemoryStore, create_persistence_agent, create_read_only_facade
from rag_agent import RAGAgent, RAGSettings
from rag_agent.tools import (
    AggregateTableTool,
    CountRowsTool,
    DeliverDataTool,
    QueryLeadsTool,
    QueryTableTool,
    RAGAgentTool,
    SearchTableTool,
)


def _agent() -> RAGAgent:
    # A private store: the suites build tools outside the per-test fixtures.
    store = MemoryStore()
    create_persistence_agent(kind="memory", store=store).batch(
        "leads",
        [
            {"id": 1, "email": "ana@acme.example", "company_name": "Acme Inc."},
            {"id": 2, "email": "bo@globex.example", "company_name": "Globex"},
        ],
    )
    return RAGAgent(create_read_only_facade(kind="memory", store=store), settings=RAGSettings())


class _Suite:
    """What both standard suites ask of a tool, from two class attributes."""

    tool_class: ClassVar[type[BaseTool]]
    example: ClassVar[dict[str, Any]]

    @property
    def tool_constructor(self) -> BaseTool:
        if self.tool_class is DeliverDataTool:
            return DeliverDataTool()  # bound to no agent: it reads nothing
        return self.tool_class(agent=_agent())

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return dict(self.example)


class _QueryLeads(_Suite):
    tool_class = QueryLeadsTool
    example: ClassVar[dict[str, Any]] = {"query": "leads at acme", "limit": 5}


class _QueryTable(_Suite):
    tool_class = QueryTableTool
    example: ClassVar[dict[str, Any]] = {
        "table": "leads",
        "filters": [{"column": "company_name", "op": "icontains", "value": "acme"}],
        "order": "-id",
        "limit": 5,
    }


class _RAGAgent(_Suite):
    tool_class = RAGAgentTool
    example: ClassVar[dict[str, Any]] = {"query": "leads at globex", "limit": 5}


class _DeliverData(_Suite):
    tool_class = DeliverDataTool
    example: ClassVar[dict[str, Any]] = {"data": {"id": 1}, "destination": "crm"}


class TestQueryLeadsUnit(_QueryLeads, ToolsUnitTests):
    """Standard unit suite for query_leads."""


class TestQueryLeadsIntegration(_QueryLeads, ToolsIntegrationTests):
    """Standard integration suite for query_leads."""


class TestQueryTableUnit(_QueryTable, ToolsUnitTests):
    """Standard unit suite for query_table."""


class TestQueryTableIntegration(_QueryTable, ToolsIntegrationTests):
    """Standard integration suite for query_table."""


class TestRAGAgentUnit(_RAGAgent, ToolsUnitTests):
    """Standard unit suite for rag_agent."""


class TestRAGAgentIntegration(_RAGAgent, ToolsIntegrationTests):
    """Standard integration suite for rag_agent."""


class TestDeliverDataUnit(_DeliverData, ToolsUnitTests):
    """Standard unit suite for deliver_data."""


class TestDeliverDataIntegration(_DeliverData, ToolsIntegrationTests):
    """Standard integration suite for deliver_data."""


class _CountRows(_Suite):
    tool_class = CountRowsTool
    example: ClassVar[dict[str, Any]] = {"table": "leads", "filters": {"company_name": "Globex"}}


class _AggregateTable(_Suite):
    tool_class = AggregateTableTool
    example: ClassVar[dict[str, Any]] = {
        "table": "leads",
        "group_by": ["company_name"],
        "metrics": ["count", "max:id"],
    }


class TestCountRowsUnit(_CountRows, ToolsUnitTests):
    """Standard unit suite for count_rows."""


class TestCountRowsIntegration(_CountRows, ToolsIntegrationTests):
    """Standard integration suite for count_rows."""


class TestAggregateTableUnit(_AggregateTable, ToolsUnitTests):
    """Standard unit suite for aggregate_table."""


class TestAggregateTableIntegration(_AggregateTable, ToolsIntegrationTests):
    """Standard integration suite for aggregate_table."""


class _SearchTable(_Suite):
    tool_class = SearchTableTool
    example: ClassVar[dict[str, Any]] = {"table": "leads", "text": "Globx", "k": 1}


class TestSearchTableUnit(_SearchTable, ToolsUnitTests):
    """Standard unit suite for search_table."""


class TestSearchTableIntegration(_SearchTable, ToolsIntegrationTests):
    """Standard integration suite for search_table."""
