"""Related rows through the agent: the rule that reads them, ``run``/``read`` with ``include``,
child records with their own provenance, the cache key, and the envelope's flags."""

from __future__ import annotations

from typing import Any

import pytest

from persistence import Filter, Include, MemoryStore, Op, create_persistence_agent
from persistence import create_read_only_facade as facade_of
from rag_agent import RAGAgent, row_hash
from rag_agent.envelope import OUTSIDE_ROW, build_records
from rag_agent.understanding.filters import understand
from tests.data.accuracy import NOW


def _store() -> MemoryStore:
    store = MemoryStore()
    writer = create_persistence_agent(kind="memory", store=store)
    writer.batch("leads", [{"email": "ann@acme.io"}, {"email": "bob@acme.io"}])
    writer.batch("conversations", [{"lead_id": 1, "channel": "email"}] * 3)
    writer.batch("messages", [{"conversation_id": 1, "body": "hello"}])
    return store


def _verify(record: dict[str, Any], source: str) -> int:
    """Check ``record`` and its children hash to their own provenance; count them all."""
    fields = {k: v for k, v in record.items() if k not in OUTSIDE_ROW}
    assert row_hash(fields) == record["provenance"]["row_hash"]
    assert record["provenance"]["source"] == source
    checked = 1
    for name, children in record.get("related", {}).items():
        checked += sum(_verify(child, f"persistence.{name}") for child in children)
    return checked


class TestRelatedRule:
    def test_with_its_children_is_an_include_not_a_table(self) -> None:
        """'… with her conversations' asks for related rows; the words name no table."""
        found = understand("ann@acme.io with her conversations", now=NOW)
        assert found.include == ("conversations",)
        assert found.table is None

    def test_a_bare_the_is_not_an_include(self) -> None:
        """'march on with the leads' reads leads, with nothing included."""
        found = understand("march on with the leads", now=NOW)
        assert found.include == ()
        assert found.table == "leads"


class TestRunWithRelatedRows:
    def test_text_asks_for_two_levels(self) -> None:
        """'lead 1 with its conversations and messages' nests messages under conversations,
        and every record, child and grandchild, verifies on its own."""
        rag = RAGAgent(facade_of(kind="memory", store=_store()))
        envelope = rag.run("lead 1 with its conversations and messages", return_json=True)
        (lead,) = envelope["records"]
        conversations = lead["related"]["conversations"]
        assert [c["id"] for c in conversations] == [1, 2, 3]
        assert conversations[0]["related"]["messages"][0]["body"] == "hello"
        assert _verify(lead, "persistence.leads") == 5
        assert "related_truncated" not in lead

    def test_a_parent_hash_is_the_hash_of_its_own_fields(self) -> None:
        """Including children changes no parent's row_hash."""
        rag = RAGAgent(facade_of(kind="memory", store=_store()))
        plain = rag.read("leads", [Filter("id", Op.EQ, 1)], return_json=True)
        rich = rag.read(
            "leads", [Filter("id", Op.EQ, 1)], include=["conversations"], return_json=True
        )
        assert rich["records"][0]["provenance"] == plain["records"][0]["provenance"] | {
            "retrieved_at": rich["records"][0]["provenance"]["retrieved_at"]
        }

    def test_a_word_naming_no_relation_is_ignored(self) -> None:
        """A table that is no relation of the table read is reported, not guessed."""
        rag = RAGAgent(facade_of(kind="memory", store=_store()))
        envelope = rag.run("lead 1 with its campaigns", return_json=True)
        assert envelope["metadata"]["ignored"] == [
            {"text": "with campaigns", "reason": "leads have no related campaigns"}
        ]
        assert "related" not in envelope["records"][0]

    def test_the_cache_key_follows_the_children(self) -> None:
        """A new child row is a cache miss for the parent's page, and shows."""
        store = _store()
        rag = RAGAgent(facade_of(kind="memory", store=store))
        text = "lead 1 with its conversations and messages"
        assert rag.run(text, return_json=True)["metadata"]["cache"] == "miss"
        assert rag.run(text, return_json=True)["metadata"]["cache"] == "hit"
        create_persistence_agent(kind="memory", store=store).write(
            "messages", {"conversation_id": 1, "body": "again"}
        )
        again = rag.run(text, return_json=True)
        assert again["metadata"]["cache"] == "miss"
        assert len(again["records"][0]["related"]["conversations"][0]["related"]["messages"]) == 2
        assert rag.run(text, include=[], return_json=True)["records"][0].get("related") is None

    def test_cut_lists_and_the_total_cap_are_flagged(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A list cut per parent is named in related_truncated; the total cap in metadata."""
        rag = RAGAgent(facade_of(kind="memory", store=_store()))
        envelope = rag.read("leads", include=[Include("conversations", limit=2)], return_json=True)
        assert envelope["records"][0]["related_truncated"] == ["conversations"]
        assert "related_capped" not in envelope["metadata"]
        monkeypatch.setattr("persistence.relations.RELATED_TOTAL_LIMIT", 1)
        capped = rag.read("leads", include=["conversations"], return_json=True)
        assert capped["metadata"]["related_capped"] is True

    def test_bad_includes_are_error_envelopes(self) -> None:
        """A malformed or unknown include is a typed error in the envelope, never raised."""
        rag = RAGAgent(facade_of(kind="memory", store=_store()))
        for include in ("conversations", [7], ["nope"], ["x; drop table leads"]):
            envelope = rag.read("leads", include=include, return_json=True)  # type: ignore[arg-type]
            assert envelope["metadata"]["error"]["type"] == "InvalidQueryError"
            envelope = rag.run("lead 1", include=include, return_json=True)  # type: ignore[arg-type]
            assert envelope["metadata"]["error"]["type"] == "InvalidQueryError"


class TestChildRecords:
    def test_children_carry_their_table_and_raw_rows(self) -> None:
        """build_records gives each child its table's source, and raw rows when asked."""
        facade = facade_of(kind="memory", store=_store())
        page = facade.read("leads", include=["conversations"], limit=1)
        (record,) = build_records(
            page.rows, source="persistence.leads", retrieved_at=NOW, include_raw=True
        )
        assert record.related is not None
        child = record.related["conversations"][0]
        assert child.provenance.source == "persistence.conversations"
        assert child.provenance.raw_row == {
            "id": 1,
            "lead_id": 1,
            "channel": "email",
            "status": None,
            "started_at": None,
        }
        assert "conversations" not in (record.provenance.raw_row or {})
        assert "conversations" not in (record.model_extra or {})
