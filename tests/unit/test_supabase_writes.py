"""Writes of the ``PersistenceAgent`` over PostgREST: insert, upsert, batch, delete."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid

import httpx
import pytest

from persistence import (
    Filter,
    InvalidQueryError,
    MemoryStore,
    Op,
    PersistenceAgent,
    PersistencePermissionError,
    create_persistence_agent,
)
from tests.support.http import ScriptedServer, backend_over
from tests.support.ids import stable_id
from tests.support.postgrest import BASE_URL, PostgrestEmulator, decode_query, fake_key


def created(rows: list[dict[str, object]]) -> httpx.Response:
    return httpx.Response(201, json=rows)


class TestInsert:
    def test_batch_is_one_post_with_columns_and_defaults(self) -> None:
        """Rows go in one POST naming the union of columns; absent keys take defaults."""
        server = ScriptedServer([created([{"id": 1}, {"id": 2}])])
        stored = backend_over(server, read_only=False).insert(
            "leads", [{"email": "a@x.io"}, {"email": "b@x.io", "score": 3}]
        )
        request = server.requests[0]
        assert request.method == "POST"
        assert request.url.path == "/rest/v1/leads"
        assert server.params() == [("columns", "email,score")]
        assert request.headers["Prefer"] == "return=representation,missing=default"
        assert request.headers["Content-Type"] == "application/json"
        assert json.loads(request.content) == [
            {"email": "a@x.io"},
            {"email": "b@x.io", "score": 3},
        ]
        assert stored == [{"id": 1}, {"id": 2}]

    def test_values_are_serialised_as_json(self) -> None:
        """Dates, decimals and UUIDs are sent as ISO text and strings."""
        server = ScriptedServer([created([{"id": 1}])])
        backend_over(server, read_only=False).insert(
            "leads",
            [
                {
                    "created_at": dt.datetime(2024, 5, 6, 7, 8, tzinfo=dt.UTC),
                    "score": decimal.Decimal("1.50"),
                    "campaign_id": uuid.UUID(int=2),
                }
            ],
        )
        assert json.loads(server.requests[0].content) == [
            {
                "created_at": "2024-05-06T07:08:00+00:00",
                "score": "1.50",
                "campaign_id": "00000000-0000-0000-0000-000000000002",
            }
        ]

    def test_empty_batch_sends_nothing(self) -> None:
        """No rows, no request."""
        server = ScriptedServer([created([])])
        assert backend_over(server, read_only=False).insert("leads", []) == []
        assert server.requests == []


class TestUpsert:
    def test_upsert_merges_on_the_conflict_column(self) -> None:
        """An upsert is a POST with ``on_conflict`` and ``resolution=merge-duplicates``."""
        server = ScriptedServer([created([{"id": 1, "status": "won"}])])
        backend_over(server, read_only=False).upsert(
            "leads", [{"email": "a@x.io", "status": "won"}], on_conflict="email"
        )
        assert server.params() == [("on_conflict", "email"), ("columns", "email,status")]
        prefer = server.requests[0].headers["Prefer"]
        assert prefer == "resolution=merge-duplicates,return=representation"

    def test_rows_naming_different_columns_go_separately(self) -> None:
        """Rows with different keys are sent apart, so none has another row's columns reset."""
        server = ScriptedServer([created([{"id": 1}])])
        backend_over(server, read_only=False).upsert(
            "leads", [{"id": 1, "status": "won"}, {"id": 2, "score": 5}, {"id": 3, "status": "x"}]
        )
        assert len(server.requests) == 2
        assert [json.loads(r.content) for r in server.requests] == [
            [{"id": 1, "status": "won"}, {"id": 3, "status": "x"}],
            [{"id": 2, "score": 5}],
        ]


class TestDelete:
    def test_delete_sends_filters_and_counts_returned_ids(self) -> None:
        """A delete is one DELETE with the filters, returning the deleted ids to count them."""
        server = ScriptedServer([httpx.Response(200, json=[{"id": 4}, {"id": 9}])])
        deleted = backend_over(server, read_only=False).delete(
            "leads", [Filter("status", Op.EQ, "lost")]
        )
        request = server.requests[0]
        assert request.method == "DELETE"
        assert decode_query(request.url.query) == [("status", "eq.lost"), ("select", "id")]
        assert request.headers["Prefer"] == "return=representation"
        assert deleted == 2

    def test_delete_with_literal_star_deletes_only_exact_matches(self) -> None:
        """A ``*`` filter selects ids with the exact check first, then deletes those ids."""
        store = MemoryStore()
        store.insert("leads", [{"company_name": n} for n in ["a*b", "axb", "A*B", "ab"]])
        emulator = PostgrestEmulator(store)
        backend = backend_over(emulator, read_only=False)
        assert backend.delete("leads", [Filter("company_name", Op.ICONTAINS, "a*b")]) == 2
        assert [r["company_name"] for r in store.rows("leads")] == ["axb", "ab"]
        assert decode_query(emulator.requests[-1].url.query) == [
            ("id", 'in.("1","3")'),
            ("select", "id"),
        ]


class TestRefusals:
    def test_read_only_backend_refuses_writes_without_a_request(self) -> None:
        """A backend built read-only refuses insert, upsert and delete itself."""
        server = ScriptedServer([created([])])
        backend = backend_over(server)
        with pytest.raises(PersistencePermissionError):
            backend.insert("leads", [{"email": "a@x.io"}])
        with pytest.raises(PersistencePermissionError):
            backend.upsert("leads", [{"id": 1}])
        with pytest.raises(PersistencePermissionError) as info:
            backend.delete("leads", [Filter("company_name", Op.ICONTAINS, "a*b")])
        assert info.value.operation == "delete"
        assert server.requests == []

    @pytest.mark.parametrize("value", [float("nan"), float("inf"), object()], ids=stable_id)
    def test_unserialisable_values_are_refused_before_sending(self, value: object) -> None:
        """NaN, infinities and arbitrary objects never reach the wire."""
        server = ScriptedServer([created([])])
        with pytest.raises(InvalidQueryError):
            backend_over(server, read_only=False).insert("leads", [{"score": value}])
        assert server.requests == []


class TestAgentOverEmulator:
    @pytest.fixture
    def agent_store(self) -> tuple[PersistenceAgent, MemoryStore]:
        store = MemoryStore()
        http = httpx.Client(transport=PostgrestEmulator(store).transport())
        agent = create_persistence_agent(
            kind="supabase", url=BASE_URL, key=fake_key("service_role"), http_client=http
        )
        return agent, store

    def test_write_upsert_delete_round_trip(
        self, agent_store: tuple[PersistenceAgent, MemoryStore]
    ) -> None:
        """The agent's write, upsert, batch and delete change the store as memory would."""
        agent, store = agent_store
        row = agent.write("leads", {"email": "a@x.io", "status": "new"})
        assert row["id"] == 1
        agent.batch("leads", [{"email": "b@x.io"}, {"email": "c@x.io"}])
        agent.upsert("leads", {"id": 1, "status": "won"})
        assert store.rows("leads")[0]["status"] == "won"
        assert store.rows("leads")[0]["email"] == "a@x.io"
        assert agent.delete("leads", [Filter("email", Op.IN, ["b@x.io", "c@x.io"])]) == 2
        assert [r["id"] for r in store.rows("leads")] == [1]
