"""A company named on ``messages``, read down the relations: leads → conversations → messages
(or clients → leads → conversations → messages), every hop a bounded read through the facade
(memory backend, reference schema)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from persistence import (
    BUSINESS_TABLES,
    MemoryBackend,
    MemoryStore,
    Op,
    ReadOnlyPersistenceFacade,
    create_read_only_facade,
)
from persistence.policy import AccessPolicy
from persistence.steps import drive
from rag_agent import RAGAgent
from rag_agent.pipeline.company_link import MAX_HOP_KEYS, LinkedCondition, company_links
from rag_agent.runtime.effects import Call
from rag_agent.settings import RAGSettings
from rag_agent.specs import Ignored
from tests.support.postgrest import BASE_URL, PostgrestEmulator, fake_key

SCHEMA = json.loads(
    (Path(__file__).parents[2] / "docs" / "envelope.schema.json").read_text(encoding="utf-8")
)
NOW = dt.datetime(2025, 6, 18, 12, tzinfo=dt.UTC)
NO_COMPANY = "no column of messages holds a company"
CLIENTS = [(1, "Globex"), (2, "Globex Europe"), (3, "Acme Logistics"), (4, "Initech")]
# (lead id, client id, company_name): lead 5 works at Hooli for the client Acme Logistics;
# lead 6, at Umbrella, has no conversation.
LEADS = [
    (1, 1, "Globex"),
    (2, 1, "Globex"),
    (3, 2, "Globex Europe"),
    (4, 4, "Initech"),
    (5, 3, "Hooli"),
    (6, 4, "Umbrella"),
]
CONVERSATIONS = [(1, 1), (2, 2), (3, 3), (4, 4), (5, 5)]  # (conversation id, lead id)
MESSAGES = [  # (message id, conversation id, body)
    (1, 1, "Login broken since the update"),
    (2, 1, "Thanks, the password reset fixed it"),
    (3, 2, "Please send the March invoice"),
    (4, 3, "Login fails for our whole team"),
    (5, 4, "Login problems again this morning"),
    (6, 5, "A question about the invoice total"),
]


def _world(
    clients: list[tuple[int, str]],
    leads: list[tuple[int, int | None, str]],
    conversations: list[tuple[int, int]],
    messages: list[tuple[int, int, str]],
) -> MemoryStore:
    store = MemoryStore()
    store.insert("clients", [{"id": i, "name": name} for i, name in clients])
    store.insert("leads", [{"id": i, "client_id": c, "company_name": name} for i, c, name in leads])
    store.insert("conversations", [{"id": i, "lead_id": lead} for i, lead in conversations])
    store.insert(
        "messages",
        [
            {"id": i, "conversation_id": c, "body": body, "direction": "inbound"}
            for i, c, body in messages
        ],
    )
    return store


@pytest.fixture(scope="module")
def store() -> MemoryStore:
    return _world(CLIENTS, LEADS, CONVERSATIONS, MESSAGES)


def _facade(store: MemoryStore, tables: frozenset[str] = BUSINESS_TABLES, **policy: Any) -> Any:
    return ReadOnlyPersistenceFacade(
        MemoryBackend(store), AccessPolicy(read_tables=tables, write_tables=frozenset(), **policy)
    )


def _agent(store: MemoryStore, tables: frozenset[str] = BUSINESS_TABLES, **policy: Any) -> RAGAgent:
    return RAGAgent(_facade(store, tables, **policy), settings=RAGSettings(), now=lambda: NOW)


def _run(agent: RAGAgent, text: str, table: str = "messages") -> dict[str, Any]:
    data: dict[str, Any] = agent.run(text, table=table, limit=100, return_json=True)
    jsonschema.validate(data, SCHEMA)
    assert "error" not in data["metadata"]
    return data


def _ids(data: dict[str, Any]) -> list[int]:
    return sorted(record["provenance"]["row_id"] for record in data["records"])


def _linked(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in data["metadata"].get("filters") or [] if f["column"] == "conversation_id"]


class TestMessagesThroughConversations:
    def test_the_conversations_of_the_companys_leads(self, store: MemoryStore) -> None:
        """'messages from Globex': the messages of the conversations of the leads at Globex
        (not Globex Europe's), as a conversation_id condition said in ignored."""
        data = _run(_agent(store), "messages from Globex")
        assert _ids(data) == [1, 2, 3]
        assert _linked(data) == [
            {"column": "conversation_id", "op": "in", "value": [1, 2], "source": "rules"}
        ]
        [note] = data["metadata"]["ignored"]
        assert note["text"] == "from Globex"
        assert note["reason"] == (
            f"{NO_COMPANY}; read through leads and conversations: conversation_id in (1, 2), "
            "the conversations of the leads whose company_name is 'Globex'"
        )

    def test_the_topic_ranks_inside_the_company(self, store: MemoryStore) -> None:
        """'about login problems' ranks Globex's messages only: Globex Europe's and Initech's
        login messages stay out."""
        data = _run(_agent(store), "messages from Globex about login problems")
        assert set(_ids(data)) <= {1, 2, 3}
        assert data["records"][0]["provenance"]["row_id"] == 1
        assert data["metadata"]["ranking"]["query"]

    def test_contained_name_when_no_exact_one(self, store: MemoryStore) -> None:
        """'Initec' is no lead's whole company, but 'Initech' holds it."""
        data = _run(_agent(store), "messages at Initec")
        assert _ids(data) == [5]
        assert "company_name contains 'Initec'" in data["metadata"]["ignored"][0]["reason"]

    def test_clients_when_no_lead_names_the_company(self, store: MemoryStore) -> None:
        """No lead works at Acme Logistics, but the client Acme Logistics has a lead (at Hooli):
        three hops, from clients."""
        data = _run(_agent(store), "messages from Acme Logistics")
        assert _ids(data) == [6]
        reason = data["metadata"]["ignored"][0]["reason"]
        assert "read through clients, leads and conversations: conversation_id in (5)" in reason
        assert "the conversations of the leads of the clients whose name is" in reason

    def test_a_named_conversation_wins(self, store: MemoryStore) -> None:
        """'conversation 4' already says which conversation: the company is not read on top."""
        data = _run(_agent(store), "messages of conversation 4 from Globex")
        assert _ids(data) == [5]
        assert data["metadata"]["ignored"][0]["reason"] == NO_COMPANY

    def test_a_company_without_conversations_is_said(self, store: MemoryStore) -> None:
        """Umbrella's lead has no conversation: not applied, and the reason says so."""
        data = _run(_agent(store), "messages from Umbrella about invoices")
        assert _linked(data) == []
        assert data["metadata"]["ignored"][0]["reason"] == (
            f"{NO_COMPANY}; not applied: there are no conversations of the leads whose "
            "company_name is 'Umbrella'"
        )

    def test_unknown_company_stays_ignored(self, store: MemoryStore) -> None:
        data = _run(_agent(store), "messages from Zyxwvut")
        assert data["records"] == []
        assert data["metadata"]["ignored"][0]["reason"] == NO_COMPANY

    def test_conversations_not_allowed(self, store: MemoryStore) -> None:
        """Without conversations in the allow-list there is no route: the company is ignored."""
        agent = _agent(store, BUSINESS_TABLES - {"conversations"})
        data = _run(agent, "messages from Globex")
        assert data["records"] == []
        assert data["metadata"]["ignored"][0]["reason"] == NO_COMPANY

    def test_join_column_hidden(self, store: MemoryStore) -> None:
        """A column policy hiding conversations.lead_id closes that relation: no route."""
        agent = _agent(store, columns={"conversations": {"id", "channel"}})
        data = _run(agent, "messages from Globex")
        assert data["metadata"]["ignored"][0]["reason"] == NO_COMPANY

    def test_arun_reads_as_run_does(self, store: MemoryStore) -> None:
        """Every hop is a pipeline call: the async run answers what the blocking one does."""
        agent = _agent(store)
        text = "messages from Globex about invoices"
        ran = asyncio.run(agent.arun(text, table="messages", limit=100, return_json=True))
        jsonschema.validate(ran, SCHEMA)
        blocking = _run(agent, text)
        assert ran["records"] == blocking["records"]
        assert ran["metadata"]["filters"] == blocking["metadata"]["filters"]
        assert ran["metadata"]["ignored"] == blocking["metadata"]["ignored"]


def _calls(store: MemoryStore, company: str) -> tuple[Any, list[Call]]:
    facade = _facade(store)
    calls: list[Call] = []

    def perform(call: Call) -> Any:
        calls.append(call)
        return getattr(facade, call.port)(*call.args, **call.kwargs)

    found = drive(
        company_links(facade, "messages", [Ignored(f"from {company}", NO_COMPANY)], ()), perform
    )
    return found, calls


class TestEachHopIsAFacadeRead:
    def test_one_bounded_read_per_table(self, store: MemoryStore) -> None:
        """leads, then conversations: two reads, each asking one row past the bound."""
        (conditions, _), calls = _calls(store, "Globex")
        read = [(c.port, c.args[0]) for c in calls]
        assert read == [("read", "leads"), ("read", "conversations")]
        assert all(c.kwargs["limit"] == MAX_HOP_KEYS + 1 for c in calls)
        [condition] = conditions
        assert isinstance(condition, LinkedCondition) and condition.typed is None
        assert (condition.column, condition.op, condition.value) == (
            "conversation_id",
            Op.IN,
            (1, 2),
        )

    def test_the_name_is_a_filter_value(self, store: MemoryStore) -> None:
        """The company reaches the facade only as a filter value on the name column."""
        _, calls = _calls(store, "Globex")
        [where] = calls[0].args[1]
        assert (where.column, where.op, where.value) == ("company_name", Op.IEQ, "Globex")


class TestBounds:
    def test_exactly_the_bound_is_applied(self) -> None:
        """A company whose leads have MAX_HOP_KEYS conversations: all of them, none cut."""
        conversations = [(i, 1) for i in range(1, MAX_HOP_KEYS + 1)]
        store = _world([], [(1, None, "Cyberdyne")], conversations, [(1, 7, "hello")])
        data = _run(_agent(store), "messages from Cyberdyne")
        [condition] = _linked(data)
        assert len(condition["value"]) == MAX_HOP_KEYS
        assert _ids(data) == [1]
        assert f"… {MAX_HOP_KEYS} in all" in data["metadata"]["ignored"][0]["reason"]

    def test_one_conversation_past_the_bound_is_reported(self) -> None:
        """One more: the company is not applied (never a cut list), and the reason says why;
        the topic still ranks, over every company (the degraded answer, said)."""
        conversations = [(i, 1) for i in range(1, MAX_HOP_KEYS + 2)] + [(9_999, 2)]
        messages = [(1, 7, "invoice overdue"), (2, 9_999, "invoice copy")]
        leads: list[tuple[int, int | None, str]] = [(1, None, "Cyberdyne"), (2, None, "Hooli")]
        store = _world([], leads, conversations, messages)
        data = _run(_agent(store), "messages from Cyberdyne about invoice")
        assert _linked(data) == []
        assert data["metadata"]["ignored"][0]["reason"] == (
            f"{NO_COMPANY}; not applied: {MAX_HOP_KEYS + 1} conversations of the leads whose "
            f"company_name is 'Cyberdyne', more than the {MAX_HOP_KEYS} one condition may list "
            "(the answer is not narrowed to the company)"
        )
        assert _ids(data) == [1, 2]

    def test_leads_past_the_bound_are_reported(self) -> None:
        """More leads at the company than a hop may read: reported at the first table."""
        leads = [(i, None, "Massive Dynamic") for i in range(1, MAX_HOP_KEYS + 2)]
        store = _world([], leads, [(1, 1)], [(1, 1, "hello")])
        data = _run(_agent(store), "messages from Massive Dynamic")
        assert data["records"] == [] and _linked(data) == []
        assert (
            f"not applied: {MAX_HOP_KEYS + 1} leads whose company_name is 'Massive Dynamic'"
            in (data["metadata"]["ignored"][0]["reason"])
        )


_COMPANIES = ("Globex", "Initech", "Hooli", "Umbrella", "Vandelay")


@st.composite
def _worlds(draw: st.DrawFn) -> tuple[list[Any], list[Any], list[Any], str]:
    leads = draw(st.lists(st.sampled_from(_COMPANIES), min_size=1, max_size=8))
    conversations = draw(st.lists(st.integers(1, len(leads)), max_size=10))
    messages = (
        draw(st.lists(st.integers(1, len(conversations)), max_size=20)) if conversations else []
    )
    company = draw(st.sampled_from(leads))
    return (
        [(i, None, name) for i, name in enumerate(leads, 1)],
        list(enumerate(conversations, 1)),
        [(i, c, f"message {i}") for i, c in enumerate(messages, 1)],
        company,
    )


class TestRouteProperty:
    @given(_worlds())
    def test_exactly_the_companys_messages(self, world: tuple[Any, ...]) -> None:
        """For any leads, conversations and messages: 'messages from X' answers exactly the
        messages of the conversations of X's leads, or says there are none to read."""
        leads, conversations, messages, company = world
        store = _world([], leads, conversations, messages)
        company_of = {lead: name for lead, _, name in leads}
        lead_of = dict(conversations)
        wanted = [i for i, c, _ in messages if company_of[lead_of[c]] == company]
        data = _run(_agent(store), f"messages from {company}")
        assert _ids(data) == wanted
        if not any(company_of[lead] == company for lead in lead_of.values()):
            assert (
                "not applied: there are no conversations"
                in (data["metadata"]["ignored"][0]["reason"])
            )
        else:
            [condition] = _linked(data)
            assert condition["value"] == sorted(
                c for c, lead in conversations if company_of[lead] == company
            )


@pytest.fixture
def no_search(store: MemoryStore) -> Iterator[RAGAgent]:
    class NoSearch(MemoryBackend):
        search = None

    facade = ReadOnlyPersistenceFacade(NoSearch(store), AccessPolicy.read_only(BUSINESS_TABLES))
    yield RAGAgent(facade, settings=RAGSettings(), now=lambda: NOW)


class TestMisspelledOnMessages:
    def test_the_most_similar_lead_company(self, store: MemoryStore) -> None:
        """'Initek' names no lead: Initech's is the most similar name, read as a reformulation."""
        data = _run(_agent(store), "messages from Initek")
        assert _ids(data) == [5]
        [attempt] = data["metadata"]["reformulation_attempts"]
        assert attempt == {
            "reason": "similar_company",
            "filters": {"conversation_id": {"in": [4]}},
            "result_count": 1,
        }
        assert data["metadata"]["fallback"] == "reformulation"
        reason = data["metadata"]["ignored"][0]["reason"]
        assert "company_name is 'Initech', the most similar to 'Initek'" in reason

    def test_without_search_the_distinct_names(self, no_search: RAGAgent) -> None:
        """A backend that cannot search: the distinct names are the candidates, same choice."""
        data = _run(no_search, "messages from Initek")
        assert _ids(data) == [5]


class TestOnTheSupabaseAdapter:
    def test_same_routes_through_postgrest(self, store: MemoryStore) -> None:
        """The relations from the PostgREST description are the route: the same messages, the
        same condition, the same misspelled name read (the PostgREST emulator over the store)."""
        emulator = PostgrestEmulator(store)
        memory = _agent(store)
        with httpx.Client(transport=emulator.transport()) as http:
            facade = create_read_only_facade(
                kind="supabase", url=BASE_URL, key=fake_key(), http_client=http
            )
            agent = RAGAgent(facade, settings=RAGSettings(), now=lambda: NOW)
            for text in ("messages from Globex", "messages from Initek"):
                over_http, in_memory = _run(agent, text), _run(memory, text)
                assert _ids(over_http) == _ids(in_memory)
                assert over_http["metadata"]["filters"] == in_memory["metadata"]["filters"]
                assert over_http["metadata"]["ignored"] == in_memory["metadata"]["ignored"]
