"""Ranked runs on a real PostgreSQL database: the same rows, the same order as in memory.

PostgreSQL 15 here has pg_trgm but no pgvector and no embeddings are configured: the keyword and
trigram legs rank, and the envelope says the semantic leg did not run.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from persistence import MemoryStore, create_persistence_agent, create_read_only_facade
from persistence.backends.postgres import PostgresBackend
from rag_agent import RAGAgent, build_tools
from rag_agent.settings import RAGSettings
from tests.conftest import PostgresDatabase
from tests.unit.test_rag_ranking import INQUIRIES, LEADS, NOW, _envelope, ids, valid

pytestmark = pytest.mark.postgres

if not callable(getattr(PostgresBackend, "search", None)):  # until the backend can search
    pytest.skip("the PostgreSQL backend has no search", allow_module_level=True)

_RUNS = (
    "inquiries from customers who want to stop paying",
    "inquiries of client 7 from customers who want to stop paying",
    "inquiries where someone could not sign in",
    "leads at Globx",
    "qualified leads at Globx",
    "inquiries about the password reset",
)


def _rows() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    inquiries = [
        {"id": i, "client_id": client, "subject": subject, "body": body}
        for i, (client, subject, body) in enumerate(INQUIRIES, start=1)
    ]
    leads = [
        {"id": i, "email": email, "company_name": company, "status": status}
        for i, (email, company, status) in enumerate(LEADS, start=1)
    ]
    return inquiries, leads


@pytest.fixture
def postgres_agent(postgres_clean: PostgresDatabase) -> Iterator[RAGAgent]:
    """An agent over the reader role, on a database holding the test's inquiries and leads."""
    postgres_clean.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    inquiries, leads = _rows()
    postgres_clean.add_clients(row["client_id"] for row in inquiries)
    with create_persistence_agent(kind="postgres", dsn=postgres_clean.writer_dsn) as writer:
        writer.batch("inquiries", inquiries)
        writer.batch("leads", leads)
    with create_read_only_facade("postgres", dsn=postgres_clean.reader_dsn) as facade:
        yield RAGAgent(facade, settings=RAGSettings(), now=lambda: NOW)


def _memory_agent() -> RAGAgent:
    store = MemoryStore()
    inquiries, leads = _rows()
    writer = create_persistence_agent(kind="memory", store=store)
    writer.batch("inquiries", inquiries)
    writer.batch("leads", leads)
    facade = create_read_only_facade("memory", store=store)
    return RAGAgent(facade, settings=RAGSettings(), now=lambda: NOW)


class TestRankedRunsOnPostgres:
    @pytest.mark.parametrize("text", _RUNS)
    def test_same_answer_as_memory(self, postgres_agent: RAGAgent, text: str) -> None:
        """Filters, ranking mode, reformulations and the first ranked row agree with memory."""
        on_pg = valid(postgres_agent.run(text, return_json=True))
        in_memory = valid(_memory_agent().run(text, return_json=True))
        assert on_pg["metadata"].get("filters") == in_memory["metadata"].get("filters")
        assert on_pg["metadata"].get("reformulation_attempts") == (
            in_memory["metadata"].get("reformulation_attempts")
        )
        if "ranking" not in in_memory["metadata"]:
            assert "ranking" not in on_pg["metadata"]
            assert sorted(ids(on_pg)) == sorted(ids(in_memory))
            return
        # The keyword rankers differ (ts_rank over stemmed words; BM25), and PostgreSQL's
        # keyword-only ranking leaves out rows sharing no word: its rows are memory's, and its
        # first is among memory's first.
        ranking = on_pg["metadata"]["ranking"]
        assert ranking["query"] == in_memory["metadata"]["ranking"]["query"]
        assert ranking["mode"] == "keyword" and "semantic" not in ranking["legs"]
        assert set(ids(on_pg)) <= set(ids(in_memory))
        assert ids(on_pg)[0] in ids(in_memory)[:3]
        assert on_pg["metadata"]["has_more"] is False

    def test_search_table_over_postgres(self, postgres_agent: RAGAgent) -> None:
        """The tool ranks on PostgreSQL inside its filters; hostile text is only words."""
        tool = {t.name: t for t in build_tools(postgres_agent, content="full")}["search_table"]
        data = _envelope(
            tool.invoke(
                {
                    "table": "inquiries",
                    "text": "want to stop paying",
                    "filters": {"client_id": 8},
                    "k": 1,
                }
            )
        )
        assert ids(data) == [4] and data["metadata"]["total_count"] == 2
        hostile = _envelope(
            tool.invoke({"table": "inquiries", "text": "'); DROP TABLE inquiries; -- & !x:*"})
        )
        assert "error" not in hostile["metadata"]
        assert postgres_agent.facade.count("inquiries") == len(INQUIRIES)
