"""A company named on a table without a company column ("inquiries from Globex ...", "messages
from Globex ..."), read through the tables it refers to (memory backend, reference schema)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from persistence import (
    BUSINESS_TABLES,
    MemoryBackend,
    MemoryStore,
    ReadOnlyPersistenceFacade,
    create_persistence_agent,
)
from persistence.policy import AccessPolicy
from rag_agent import RAGAgent
from rag_agent.pipeline.company_link import MAX_LINKED_KEYS
from rag_agent.settings import RAGSettings

SCHEMA = json.loads(
    (Path(__file__).parents[2] / "docs" / "envelope.schema.json").read_text(encoding="utf-8")
)
NOW = dt.datetime(2025, 6, 18, 12, tzinfo=dt.UTC)
CLIENTS = ["Globex", "Globex Europe", "Acme Logistics", "Initech"]
# (client id, subject): client ids are 1-based positions in CLIENTS
INQUIRIES = [
    (1, "Shipping delay on order"),
    (2, "Shipping delay again"),
    (3, "Shipping delay, urgent"),
    (4, "Invoice copy"),
    (1, "Invoice copy"),
]


@pytest.fixture(scope="module")
def store() -> MemoryStore:
    store = MemoryStore()
    store.insert("clients", [{"id": i, "name": name} for i, name in enumerate(CLIENTS, 1)])
    writer = create_persistence_agent(kind="memory", store=store)
    for client, subject in INQUIRIES:
        writer.write("inquiries", {"client_id": client, "subject": subject})
    return store


def _agent(store: MemoryStore, tables: frozenset[str] = BUSINESS_TABLES, **policy: Any) -> RAGAgent:
    facade = ReadOnlyPersistenceFacade(
        MemoryBackend(store), AccessPolicy(read_tables=tables, write_tables=frozenset(), **policy)
    )
    return RAGAgent(facade, settings=RAGSettings(), now=lambda: NOW)


def _run(agent: RAGAgent, text: str, table: str = "inquiries") -> dict[str, Any]:
    data: dict[str, Any] = agent.run(text, table=table, return_json=True)
    jsonschema.validate(data, SCHEMA)
    return data


def _client_ids(data: dict[str, Any]) -> list[int]:
    return sorted(record["client_id"] for record in data["records"])


def test_exact_name_first(store: MemoryStore) -> None:
    """'Globex' is one client's whole name: that client alone, not 'Globex Europe'."""
    data = _run(_agent(store), "inquiries from Globex")
    assert _client_ids(data) == [1, 1]
    [condition] = data["metadata"]["filters"]
    assert condition == {"column": "client_id", "op": "in", "value": [1], "source": "rules"}
    [note] = data["metadata"]["ignored"]
    assert note["text"] == "from Globex"
    assert "read through clients" in note["reason"] and "is 'Globex'" in note["reason"]


def test_contained_name_when_no_exact_one(store: MemoryStore) -> None:
    """'Acme' is no client's whole name, but 'Acme Logistics' holds it."""
    data = _run(_agent(store), "inquiries at Acme")
    assert _client_ids(data) == [3]
    assert "contains 'Acme'" in data["metadata"]["ignored"][0]["reason"]


def test_case_insensitive(store: MemoryStore) -> None:
    data = _run(_agent(store), "inquiries from INITECH")
    assert _client_ids(data) == [4]


def test_topic_still_ranks_inside_the_company(store: MemoryStore) -> None:
    """The company is a hard condition; the topic words rank its rows: the one about the
    shipping delay first, the company's other inquiry after it, none of another company."""
    data = _run(_agent(store), "inquiries from Globex about shipping delay")
    assert _client_ids(data) == [1, 1]
    assert [r["subject"] for r in data["records"]] == ["Shipping delay on order", "Invoice copy"]
    assert data["metadata"]["total_count"] == 2


def test_unknown_company_stays_ignored(store: MemoryStore) -> None:
    data = _run(_agent(store), "inquiries from Zyxwvut")
    assert data["records"] == []
    [note] = data["metadata"]["ignored"]
    assert note["reason"] == "no column of inquiries holds a company"
    assert not data["metadata"].get("filters")


def test_clients_not_allowed_keeps_todays_behaviour(store: MemoryStore) -> None:
    """Without read access to clients, nothing is looked up there: the company is ignored."""
    agent = _agent(store, frozenset({"inquiries"}))
    data = _run(agent, "inquiries from Globex")
    assert data["records"] == []
    assert data["metadata"]["ignored"][0]["reason"] == "no column of inquiries holds a company"


def test_name_column_not_allowed_keeps_todays_behaviour(store: MemoryStore) -> None:
    """A column policy hiding clients.name: the name is never matched against it."""
    agent = _agent(store, columns={"clients": {"id"}})
    data = _run(agent, "inquiries from Globex")
    assert data["records"] == []
    assert data["metadata"]["ignored"][0]["reason"] == "no column of inquiries holds a company"


def test_a_named_client_wins(store: MemoryStore) -> None:
    """'client 4' already says which client: the company is not read on top of it."""
    data = _run(_agent(store), "inquiries of client 4 from Globex")
    assert _client_ids(data) == [4]
    assert any(f["column"] == "client_id" and f["op"] == "eq" for f in data["metadata"]["filters"])


def test_too_many_matching_clients_stay_ignored() -> None:
    """A name held by more than MAX_LINKED_KEYS clients is too vague to be one company."""
    store = MemoryStore()
    writer = create_persistence_agent(kind="memory", store=store)
    store.insert(
        "clients", [{"id": i + 1, "name": f"Umbrella {i}"} for i in range(MAX_LINKED_KEYS + 1)]
    )
    for i in range(MAX_LINKED_KEYS + 1):
        writer.write("inquiries", {"client_id": i + 1, "subject": "hello"})
    data = _run(_agent(store), "inquiries from Umbrella")
    assert data["records"] == []
    assert not data["metadata"].get("filters")
    assert data["metadata"]["ignored"][0]["reason"] == (
        "no column of inquiries holds a company; not applied: the clients whose name contains "
        f"'Umbrella' have more than {MAX_LINKED_KEYS} different names: too vague to be one company"
    )


def test_arun_reads_the_company_as_run_does(store: MemoryStore) -> None:
    """The lookup is a pipeline step: the async run answers what the blocking one does."""
    import asyncio

    agent = _agent(store)
    text = "inquiries from Globex about invoices"
    ran = asyncio.run(agent.arun(text, table="inquiries", return_json=True))
    jsonschema.validate(ran, SCHEMA)
    blocking = _run(agent, text)
    assert ran["records"] == blocking["records"]
    assert ran["metadata"]["filters"] == blocking["metadata"]["filters"]
    assert ran["metadata"]["ignored"] == blocking["metadata"]["ignored"]
