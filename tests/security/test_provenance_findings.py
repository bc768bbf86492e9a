"""Provenance holds for awkward rows: non-finite floats, bytea, and the fallback's records."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage

from persistence import MemoryStore, create_read_only_facade
from rag_agent import RAGAgent, RAGSettings, row_hash
from rag_agent.specs import Understanding
from tests.unit.test_llm_scripted import ScriptedChatModel, call, calls, final

ODD_ROW = {
    "id": 1,
    "email": "odd@x.io",
    "company_name": "Odd Co",
    "score": float("nan"),
    "first_name": float("inf"),
    "last_name": float("-inf"),
    "title": b"\xff\x00binary",
}


def agent_over(row: dict[str, Any], **options: Any) -> RAGAgent:
    # Untyped columns: the store keeps the values as given, as a float8 or bytea column would
    # hand them over from PostgreSQL.
    store = MemoryStore({"leads": tuple(row)})
    store.insert("leads", [row])
    return RAGAgent(create_read_only_facade("memory", store=store), **options)


def documented_hash(record: dict[str, Any]) -> str:
    """docs/envelope.md's recipe, without the library."""
    fields = {k: v for k, v in record.items() if k != "provenance"}
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class TestNonFiniteFloats:
    def test_row_hash_verifies_for_nan_and_infinities(self) -> None:
        """A row holding NaN and ±Infinity shows them as strings and its hash verifies by the
        documented recipe, from the JSON envelope as received."""
        envelope = agent_over(ODD_ROW, settings=RAGSettings()).run(
            "x", filters={"id": 1}, return_json=True
        )
        [record] = json.loads(json.dumps(envelope))["records"]
        assert (record["score"], record["first_name"], record["last_name"]) == (
            "NaN",
            "Infinity",
            "-Infinity",
        )
        assert documented_hash(record) == record["provenance"]["row_hash"]
        fields = {k: v for k, v in record.items() if k != "provenance"}
        assert row_hash(fields) == record["provenance"]["row_hash"]

    def test_nan_and_null_hash_differently(self) -> None:
        """NaN is not NULL: the two rows have different hashes."""
        assert row_hash({"id": 1, "score": float("nan")}) != row_hash({"id": 1, "score": None})


class TestRawRows:
    def test_include_raw_over_bytes_keeps_the_page(self) -> None:
        """include_raw=True over a bytea value answers the page, bytes as '\\x…' hex text."""
        envelope = agent_over(ODD_ROW, settings=RAGSettings()).run(
            "x", filters={"id": 1}, include_raw=True, return_json=True
        )
        assert "error" not in envelope["metadata"]
        [record] = envelope["records"]
        raw = record["provenance"]["raw_row"]
        assert raw["title"] == "\\xff0062696e617279"
        assert raw["score"] == "NaN" and raw["email"] == "odd@x.io"
        json.dumps(envelope)  # JSON-ready as promised

    @pytest.mark.parametrize("include_raw", [True, False])
    def test_fallback_records_honour_include_raw(self, include_raw: bool) -> None:
        """The fallback's records carry raw_row exactly when the caller asked for it."""

        def read(messages: list[BaseMessage]) -> AIMessage:
            return calls(
                call(
                    "query_table", table="leads", filters=[{"column": "id", "op": "eq", "value": 1}]
                )
            )

        model = ScriptedChatModel(script=[read, final(("leads", 1))])
        agent = agent_over(
            {"id": 1, "email": "odd@x.io", "title": b"\x01"},
            settings=RAGSettings(),
            llm=model,
            extractor=lambda _request: Understanding(),
        )
        envelope = agent.run(
            "the odd one, whoever it is", include_raw=include_raw, return_json=True
        )
        assert envelope["metadata"]["fallback"] == "agent"
        [record] = envelope["records"]
        if include_raw:
            raw = record["provenance"]["raw_row"]
            assert (raw["id"], raw["email"], raw["title"]) == (1, "odd@x.io", "\\x01")
        else:
            assert "raw_row" not in record["provenance"]
