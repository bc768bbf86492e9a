"""A company read through the tables it refers to, on a real PostgreSQL database: the relations
are the catalog's foreign keys, every lookup a read through the reader role; a misspelled
company read as the most similar name by pg_trgm's word similarity."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from persistence import create_persistence_agent, create_read_only_facade
from rag_agent import RAGAgent
from rag_agent.settings import RAGSettings
from tests.conftest import PostgresDatabase
from tests.unit.test_rag_ranking import NOW, valid

pytestmark = pytest.mark.postgres


@pytest.fixture
def agent(postgres_clean: PostgresDatabase) -> Iterator[RAGAgent]:
    postgres_clean.execute(
        "INSERT INTO clients (id, name) VALUES (1, 'Globex'), (2, 'Globex Europe'), "
        "(3, 'Acme Logistics')"
    )
    rows = [
        {"id": 1, "client_id": 1, "subject": "Shipping delay", "body": "late parcel"},
        {"id": 2, "client_id": 2, "subject": "Shipping delay", "body": "late again"},
        {"id": 3, "client_id": 3, "subject": "Invoice copy", "body": "send it"},
        {"id": 4, "client_id": 1, "subject": "Invoice copy", "body": "send it"},
    ]
    with create_persistence_agent(kind="postgres", dsn=postgres_clean.writer_dsn) as writer:
        writer.batch("inquiries", rows)
    with create_read_only_facade("postgres", dsn=postgres_clean.reader_dsn) as facade:
        yield RAGAgent(facade, settings=RAGSettings(), now=lambda: NOW)


def test_exact_name_through_the_foreign_key(agent: RAGAgent) -> None:
    data = valid(agent.run("inquiries from Globex", table="inquiries", return_json=True))
    assert sorted(record["id"] for record in data["records"]) == [1, 4]
    assert data["metadata"]["filters"] == [
        {"column": "client_id", "op": "in", "value": [1], "source": "rules"}
    ]
    assert "read through clients" in data["metadata"]["ignored"][0]["reason"]


def test_contained_name(agent: RAGAgent) -> None:
    data = valid(agent.run("inquiries at acme", table="inquiries", return_json=True))
    assert [record["id"] for record in data["records"]] == [3]


@pytest.fixture
def messages_agent(postgres_clean: PostgresDatabase) -> Iterator[RAGAgent]:
    """Leads at Globex, Globex Europe and Initech, a conversation each (two for Globex's first
    lead), messages in them; clients as in the memory tests."""
    postgres_clean.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    postgres_clean.execute(
        "INSERT INTO clients (id, name) VALUES (1, 'Globex'), (2, 'Globex Europe'), "
        "(3, 'Acme Logistics'), (4, 'Initech')"
    )
    with create_persistence_agent(kind="postgres", dsn=postgres_clean.writer_dsn) as writer:
        writer.batch("leads", [{"id": i, "client_id": c, "company_name": n} for i, c, n in LEADS])
        writer.batch("conversations", [{"id": i, "lead_id": lead} for i, lead in CONVERSATIONS])
        writer.batch(
            "messages",
            [{"id": i, "conversation_id": c, "body": body} for i, c, body in MESSAGES],
        )
    with create_read_only_facade("postgres", dsn=postgres_clean.reader_dsn) as facade:
        yield RAGAgent(facade, settings=RAGSettings(), now=lambda: NOW)


LEADS = [(1, 1, "Globex"), (2, 1, "Globex"), (3, 2, "Globex Europe"), (4, 4, "Initech")]
CONVERSATIONS = [(1, 1), (2, 1), (3, 2), (4, 3), (5, 4)]
MESSAGES = [
    (1, 1, "Login broken since the update"),
    (2, 2, "Invoice copy please"),
    (3, 3, "Login problems on two laptops"),
    (4, 4, "Login fails for our team"),
    (5, 5, "Login problems again"),
]


def _rows(data: dict[str, Any]) -> list[int]:
    return sorted(record["provenance"]["row_id"] for record in data["records"])


class TestMessagesOnPostgres:
    def test_through_leads_and_conversations(self, messages_agent: RAGAgent) -> None:
        """The catalog's foreign keys are the route; each hop a read through the reader role."""
        data = valid(
            messages_agent.run("messages from Globex", table="messages", limit=50, return_json=True)
        )
        assert _rows(data) == [1, 2, 3]
        assert data["metadata"]["filters"] == [
            {"column": "conversation_id", "op": "in", "value": [1, 2, 3], "source": "rules"}
        ]
        assert "read through leads and conversations" in data["metadata"]["ignored"][0]["reason"]

    def test_ranked_inside_the_company(self, messages_agent: RAGAgent) -> None:
        """The topic ranks Globex's messages only (Globex Europe's and Initech's stay out)."""
        text = "messages from Globex about login problems"
        data = valid(messages_agent.run(text, table="messages", limit=50, return_json=True))
        assert data["metadata"]["ranking"]["mode"] == "keyword"
        assert set(_rows(data)) <= {1, 2, 3} and 3 in _rows(data)

    def test_misspelled_company_on_messages(self, messages_agent: RAGAgent) -> None:
        """'Initek' is read as Initech (the leads' company), as a reformulation."""
        data = valid(messages_agent.run("messages from Initek", table="messages", return_json=True))
        assert _rows(data) == [5]
        assert data["metadata"]["reformulation_attempts"][0]["reason"] == "similar_company"


class TestMisspelledClientOnPostgres:
    def test_the_most_similar_client(self, agent: RAGAgent) -> None:
        """'Acme Logistcs' names no client: Acme Logistics, by pg_trgm's word similarity."""
        data = valid(agent.run("inquiries from Acme Logistcs", table="inquiries", return_json=True))
        assert [record["id"] for record in data["records"]] == [3]
        [attempt] = data["metadata"]["reformulation_attempts"]
        assert attempt == {
            "reason": "similar_company",
            "filters": {"client_id": {"in": [3]}},
            "result_count": 1,
        }

    def test_two_equally_close_clients(self, agent: RAGAgent) -> None:
        """'Globx': Globex and Globex Europe are as close; nothing is guessed."""
        data = valid(agent.run("inquiries from Globx", table="inquiries", return_json=True))
        assert data["records"] == [] and not data["metadata"].get("filters")
        assert "about equally close" in data["metadata"]["ignored"][0]["reason"]
