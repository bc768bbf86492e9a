"""A misspelled company matched by trigram similarity, never when two names are about as close:
the choice itself (``closest_name``), and "inquiries from Globx" read through the most similar
client as a reformulation (memory backend)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from persistence import MemoryStore, create_persistence_agent, create_read_only_facade
from persistence.search.trigram import word_similarity
from persistence.steps import drive
from rag_agent import RAGAgent
from rag_agent.pipeline.similar import AMBIGUITY_MARGIN, SIMILARITY_THRESHOLD, Closest, closest_name
from rag_agent.settings import RAGSettings

SCHEMA = json.loads(
    (Path(__file__).parents[2] / "docs" / "envelope.schema.json").read_text(encoding="utf-8")
)
NOW = dt.datetime(2025, 6, 18, 12, tzinfo=dt.UTC)
NO_COMPANY = "no column of inquiries holds a company"


def _store(clients: list[str], inquiries: Sequence[tuple[int, str]] = ()) -> MemoryStore:
    store = MemoryStore()
    store.insert("clients", [{"id": i, "name": name} for i, name in enumerate(clients, 1)])
    writer = create_persistence_agent(kind="memory", store=store)
    for client, subject in inquiries:
        writer.write("inquiries", {"client_id": client, "subject": subject})
    return store


def _closest(store: MemoryStore, table: str, column: str, typed: str) -> Closest | None:
    facade = create_read_only_facade("memory", store=store)
    found: Closest | None = drive(
        closest_name(table, column, typed),
        lambda call: getattr(facade, call.port)(*call.args, **call.kwargs),
    )
    return found


def _agent(store: MemoryStore) -> RAGAgent:
    facade = create_read_only_facade("memory", store=store)
    return RAGAgent(facade, settings=RAGSettings(), now=lambda: NOW)


def _run(agent: RAGAgent, text: str, table: str = "inquiries") -> dict[str, Any]:
    data: dict[str, Any] = agent.run(text, table=table, return_json=True)
    jsonschema.validate(data, SCHEMA)
    assert "error" not in data["metadata"]
    return data


class TestClosestName:
    def test_the_one_similar_name(self) -> None:
        found = _closest(_store(["Globex", "Initech"]), "clients", "name", "Globx")
        assert found == Closest("Globex", word_similarity("Globx", "Globex"))

    def test_two_equally_close_names_are_not_chosen(self) -> None:
        """'Globx' is as close to 'Globex' as to 'Globex Europe': ambiguous, both named."""
        found = _closest(_store(["Globex", "Globex Europe"]), "clients", "name", "Globx")
        assert found is not None and found.ambiguous
        assert {found.name, *(name for name, _ in found.rivals)} == {"Globex", "Globex Europe"}

    def test_a_rival_behind_many_rows_of_the_best_name(self) -> None:
        """The search's first rows all hold 'Globex Corporation'; the second look, without
        it, still finds 'Globex Europe' as close: no choice."""
        store = MemoryStore()
        rows = [{"company_name": "Globex Corporation", "email": f"a{i}@x.io"} for i in range(25)]
        store.insert("leads", [*rows, {"company_name": "Globex Europe", "email": "z@x.io"}])
        found = _closest(store, "leads", "company_name", "Globx")
        assert found is not None and found.ambiguous

    def test_a_clearly_closer_name_is_chosen(self) -> None:
        """'Initek' is much closer to 'Initech' than to anything else."""
        found = _closest(_store(["Initech", "Intel", "Init Partners"]), "clients", "name", "Initek")
        assert found is not None and not found.ambiguous and found.name == "Initech"

    def test_nothing_similar(self) -> None:
        assert _closest(_store(["Globex", "Initech"]), "clients", "name", "Zyxwvut") is None

    @given(
        st.lists(
            st.sampled_from(
                [
                    "Globex",
                    "Globex Europe",
                    "Globe",
                    "Glob",
                    "Globex Corporation",
                    "Initech",
                    "Initek",
                    "Inittech",
                    "Acme",
                    "Acme Logistics",
                    "Acne",
                    "Hooli",
                    "Hoolie",
                    "Umbrella",
                    "Umbrela Health",
                    "Stark",
                    "Starks",
                    "Wayne Foods",
                ]
            ),
            unique=True,
            max_size=10,
        ),
        st.sampled_from(["Globx", "Initec", "Acme Logistic", "Hooly", "Umbrela", "Stak", "Wayn"]),
    )
    def test_never_a_guess(self, names: list[str], typed: str) -> None:
        """Whatever the names: the choice is the most similar one, at or above the threshold,
        and every other name at or above it is at least AMBIGUITY_MARGIN less similar; else
        the rivals are named (the choice is then ambiguous), or there is no similar name."""
        found = _closest(_store(names), "clients", "name", typed)
        scores = {name: word_similarity(typed, name) for name in names}
        similar = {n: s for n, s in scores.items() if s >= SIMILARITY_THRESHOLD}
        if found is None:
            assert similar == {}
            return
        assert found.similarity == max(scores.values()) == scores[found.name]
        others = {n: s for n, s in similar.items() if n != found.name}
        close = {n for n, s in others.items() if s > found.similarity - AMBIGUITY_MARGIN}
        # The closest rivals, at most three of them (they are named in a reason).
        assert {name for name, _ in found.rivals} <= close
        assert len(found.rivals) == min(3, len(close))
        assert found.ambiguous == bool(close)


INQUIRIES = [(1, "Refund please"), (1, "Refund again"), (2, "Refund for Europe"), (3, "Hello")]


@pytest.fixture(scope="module")
def agent() -> RAGAgent:
    return _agent(_store(["Globex", "Acme Logistics", "Initech"], INQUIRIES))


class TestMisspelledCompanyOnInquiries:
    def test_read_through_the_most_similar_client(self, agent: RAGAgent) -> None:
        """'Globx' names no client: Globex is the most similar one, read as a reformulation."""
        data = _run(agent, "inquiries from Globx about refund")
        assert sorted(r["provenance"]["row_id"] for r in data["records"]) == [1, 2]
        meta = data["metadata"]
        assert meta["filters"] == [
            {"column": "client_id", "op": "in", "value": [1], "source": "rules"}
        ]
        assert meta["reformulation_attempts"] == [
            {"reason": "similar_company", "filters": {"client_id": {"in": [1]}}, "result_count": 2}
        ]
        assert meta["fallback"] == "reformulation"
        [note] = meta["ignored"]
        assert note["text"] == "from Globx"
        assert note["reason"] == (
            f"{NO_COMPANY}; read through clients: client_id in (1), the clients whose name is "
            "'Globex', the most similar to 'Globx' (trigram word similarity 0.67)"
        )

    def test_a_count_is_reformulated_too(self, agent: RAGAgent) -> None:
        data = _run(agent, "how many inquiries from Globx")
        assert data["metadata"]["total_count"] == 2
        [attempt] = data["metadata"]["reformulation_attempts"]
        assert attempt["result_count"] == 2

    def test_an_exact_name_is_no_reformulation(self, agent: RAGAgent) -> None:
        data = _run(agent, "inquiries from Globex")
        assert "reformulation_attempts" not in data["metadata"]
        assert "fallback" not in data["metadata"] or data["metadata"]["fallback"] != "reformulation"

    def test_two_equally_close_clients_are_not_guessed(self) -> None:
        """Globex and Globex Europe are as close to 'Globx': nothing applied, both named."""
        agent = _agent(_store(["Globex", "Globex Europe"], INQUIRIES))
        data = _run(agent, "inquiries from Globx about refund")
        meta = data["metadata"]
        assert not [f for f in meta.get("filters") or [] if f["column"] == "client_id"]
        assert "reformulation_attempts" not in meta
        reason = meta["ignored"][0]["reason"]
        assert reason.startswith(f"{NO_COMPANY}; not applied: no clients name matches 'Globx'")
        assert "'Globex' (0.67)" in reason and "'Globex Europe' (0.67)" in reason


class TestMisspelledCompanyOnLeads:
    def test_two_equally_close_companies_are_not_guessed(self) -> None:
        """'leads at Globx' with leads at Globex Corporation and Globex Europe: no similar
        name replaces the company (it used to be the first by name)."""
        store = MemoryStore()
        store.insert(
            "leads",
            [
                {"company_name": "Globex Corporation", "email": "a@x.io"},
                {"company_name": "Globex Europe", "email": "b@x.io"},
            ],
        )
        data = _run(_agent(store), "leads at Globx", table="leads")
        assert data["records"] == []
        reasons = [a["reason"] for a in data["metadata"].get("reformulation_attempts") or []]
        assert "similar_company" not in reasons
