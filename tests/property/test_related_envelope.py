"""Property: records with related rows verify on their own, at every level, as models and as
JSON; a parent's hash is the hash of its own fields, whatever its children."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from persistence import RelatedRows
from rag_agent import row_hash
from rag_agent.envelope import OUTSIDE_ROW, Envelope, Metadata, Record, build_records

NOW = dt.datetime(2025, 6, 18, 12, tzinfo=dt.UTC)
VALUES = st.none() | st.integers(-(2**31), 2**31) | st.text(max_size=8) | st.booleans()
FIELDS = st.dictionaries(
    st.sampled_from(["email", "status", "score", "body", "channel"]), VALUES, max_size=4
)


@st.composite
def rows(draw: st.DrawFn, depth: int = 2) -> dict[str, Any]:
    row: dict[str, Any] = {"id": draw(st.integers(1, 10**6)), **draw(FIELDS)}
    if depth:
        for name in draw(st.lists(st.sampled_from(["conversations", "messages"]), unique=True)):
            children = draw(st.lists(rows(depth - 1), max_size=3))
            row[name] = RelatedRows(children, table=name, cut=draw(st.booleans()))
    return row


def _verify(record: dict[str, Any], source: str, row: dict[str, Any]) -> None:
    own = {k: v for k, v in row.items() if type(v) is not RelatedRows}
    fields = {k: v for k, v in record.items() if k not in OUTSIDE_ROW}
    assert row_hash(fields) == record["provenance"]["row_hash"] == row_hash(own)
    assert record["provenance"]["source"] == source
    related = {k: v for k, v in row.items() if type(v) is RelatedRows}
    assert set(record.get("related", {})) == set(related)
    assert sorted(record.get("related_truncated", [])) == sorted(
        name for name, children in related.items() if children.cut
    )
    for name, children in related.items():
        for child_record, child in zip(record["related"][name], children, strict=True):
            _verify(child_record, f"persistence.{name}", child)


class TestRelatedRecords:
    @given(parents=st.lists(rows(), max_size=4))
    def test_every_record_verifies_on_its_own(self, parents: list[dict[str, Any]]) -> None:
        """Every parent and child record hashes to its own provenance, through JSON; records
        built without validation equal validated ones."""
        records = build_records(parents, source="persistence.leads", retrieved_at=NOW)
        for record in records:
            assert Record.model_validate(record.model_dump()) == record
        envelope = Envelope(
            metadata=Metadata(
                source="persistence.leads", query_filters=None, retrieved_at=NOW, total_count=0
            ),
            records=records,
        )
        received = json.loads(json.dumps(envelope.to_json()))
        for record, row in zip(received["records"], parents, strict=True):
            _verify(record, "persistence.leads", row)
