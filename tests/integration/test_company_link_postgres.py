"""A company read through the clients it refers to, on a real PostgreSQL database: the relation
is the catalog's foreign key, the lookup a read through the reader role."""

from __future__ import annotations

from collections.abc import Iterator

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
