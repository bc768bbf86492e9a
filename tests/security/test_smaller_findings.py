"""The smaller findings of the third review: booleans are no numbers, a password on the command
line is warned about. (The PostgreSQL role, the Supabase key and the fallback's bounds are
tested with their modules: test_postgres_backend, test_supabase_config, test_fallback.)"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from persistence import MemoryStore
from rag_agent import RAGAgent, RAGSettings, create_rag_agent
from rag_agent.cli.connect import dsn_password_warning
from rag_agent.ops.sample import SAMPLE_TABLES, sample_rows
from rag_agent.tools import build_tools
from tests.support.cli import run


@pytest.fixture(scope="module")
def agent() -> RAGAgent:
    store = MemoryStore()
    for table in SAMPLE_TABLES:
        store.insert(table, sample_rows(table))
    settings = RAGSettings(cache_disabled=True)
    return create_rag_agent(kind="memory", store=store, llm=False, settings=settings)


#: Every integer argument of the tools, with the rest of a valid call.
NUMBER_ARGUMENTS = [
    ("query_table", {"table": "leads", "filters": {"status": "new"}}, "limit"),
    ("query_table", {"table": "leads", "filters": {"status": "new"}}, "offset"),
    (
        "query_table",
        {"table": "leads", "filters": {"id": 1}, "include": ["conversations"]},
        "include_limit",
    ),
    ("query_leads", {"company": "acme"}, "limit"),
    ("query_leads", {"company": "acme"}, "offset"),
    ("query_leads", {}, "id"),
    ("query_leads", {}, "client_id"),
    ("query_leads", {}, "score_min"),
    ("search_table", {"table": "inquiries", "text": "refund"}, "k"),
    ("search_table", {"table": "inquiries", "text": "refund"}, "offset"),
    ("aggregate_table", {"table": "leads", "group_by": ["status"]}, "limit"),
    ("rag_agent", {"query": "leads at acme"}, "limit"),
]


class TestBooleansAreNoNumbers:
    @pytest.mark.parametrize(("name", "base", "argument"), NUMBER_ARGUMENTS)
    @given(flag=st.booleans())
    def test_refused(
        self, agent: RAGAgent, name: str, base: dict[str, Any], argument: str, flag: bool
    ) -> None:
        """``limit=True`` once meant one row: every integer argument refuses a boolean."""
        tool = next(t for t in build_tools(agent) if t.name == name)
        call = {"name": name, "args": {**base, argument: flag}, "id": "c", "type": "tool_call"}
        error = tool.invoke(call).artifact.to_json()["metadata"].get("error")
        assert error is not None and "a boolean is not a number" in error["message"]

    def test_agent_entry_points(self, agent: RAGAgent) -> None:
        """run, read and aggregate refuse a boolean page window too."""
        for envelope in (
            agent.run("leads at acme", limit=True, return_json=True),
            agent.run("leads at acme", offset=False, return_json=True),
            agent.aggregate("leads", limit=True, return_json=True),
        ):
            assert envelope["metadata"]["error"]["type"] == "InvalidQueryError"


class TestPasswordOnTheCommandLine:
    @pytest.mark.parametrize(
        ("dsn", "warned"),
        [
            ("postgresql://reader:s3cret@127.0.0.1:1/app", True),
            ("postgresql://reader@127.0.0.1:1/app?password=s3cret", True),
            ("host=127.0.0.1 port=1 user=reader password=s3cret", True),
            ("postgresql://reader@127.0.0.1:1/app", False),
            ("host=127.0.0.1 port=1 user=reader", False),
        ],
    )
    def test_warning(self, dsn: str, warned: bool) -> None:
        """--dsn with a password warns and says how to pass it by environment; the password
        itself is not repeated."""
        code, _, err = run("tables", "--dsn", dsn)
        assert code != 0  # nothing listens on port 1
        assert ("--dsn holds a password" in err) is warned
        if warned:
            assert "RAG_POSTGRES_DSN" in err and "PGPASSWORD" in err
        assert "s3cret" not in err
        assert (dsn_password_warning(dsn) is not None) is warned
