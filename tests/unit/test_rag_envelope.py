"""The envelope: ``row_hash`` as the design defines it, records, schema kept in sync."""

from __future__ import annotations

import copy
import datetime as dt
import decimal
import hashlib
import json
import pickle
import uuid
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import jsonschema
import pytest
from pydantic import ValidationError

from rag_agent.envelope import (
    Envelope,
    Metadata,
    Provenance,
    Record,
    build_records,
    canonical_value,
    envelope_json_schema,
    row_hash,
    schema_json,
)

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "docs" / "envelope.schema.json"
NOW = dt.datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=dt.UTC)


def reference_hash(row: dict[str, Any]) -> str:
    """The design's definition, written out independently (lone surrogates pass through)."""
    fields = {k: v for k, v in row.items() if k != "provenance"}

    def convert(value: Any) -> Any:
        if isinstance(value, dt.date | dt.time):
            return value.isoformat()
        if isinstance(value, uuid.UUID | decimal.Decimal):
            return str(value)
        return value

    canonical = {k: convert(v) for k, v in fields.items()}
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


ROW: dict[str, Any] = {
    "id": 7,
    "email": "zoë@exämple.io",
    "company_name": 'Acme "Quoted" \\ Inc',
    "score": 3.5,
    "price": decimal.Decimal("10.50"),
    "created_at": NOW,
    "birthday": dt.date(1990, 5, 17),
    "key": uuid.UUID("3f2a1b4c-1234-4abc-8def-0123456789ab"),
    "phone": None,
    "active": True,
}


class TestRowHash:
    """``row_hash`` matches the design's definition exactly."""

    def test_matches_reference(self) -> None:
        """Dates, UUIDs, Decimals, floats, unicode and escapes hash as specified."""
        assert row_hash(ROW) == reference_hash(ROW)

    def test_known_value(self) -> None:
        """A fixed row hashes to a fixed digest (guards against silent format changes)."""
        expected = hashlib.sha256(b'{"email":"a@x.io","id":1}').hexdigest()
        assert row_hash({"id": 1, "email": "a@x.io"}) == expected

    def test_provenance_is_left_out(self) -> None:
        """A ``provenance`` key does not change the hash."""
        assert row_hash({**ROW, "provenance": {"x": 1}}) == row_hash(ROW)

    def test_key_order_does_not_matter(self) -> None:
        """Keys are sorted before hashing."""
        assert row_hash({"b": 1, "a": 2}) == row_hash({"a": 2, "b": 1})

    def test_naive_and_offset_datetimes(self) -> None:
        """Naive and non-UTC datetimes hash by their isoformat."""
        for value in (
            dt.datetime(2020, 1, 1),
            dt.datetime(2020, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30))),
        ):
            assert row_hash({"t": value}) == reference_hash({"t": value})

    def test_big_ints_and_nested_values(self) -> None:
        """Ints beyond 64 bits and nested containers take the reference path."""
        row = {"n": 2**70, "tags": ["a", "b"], "meta": {"k": NOW}}
        expected_fields = {"meta": {"k": NOW.isoformat()}, "n": 2**70, "tags": ["a", "b"]}
        text = json.dumps(
            expected_fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
        assert row_hash(row) == hashlib.sha256(text.encode()).hexdigest()

    def test_canonical_value(self) -> None:
        """``canonical_value`` gives the JSON form the hash uses."""
        assert canonical_value(NOW) == NOW.isoformat()
        assert canonical_value(decimal.Decimal("1.0")) == "1.0"
        assert canonical_value(b"\x01\xff") == "01ff"
        assert canonical_value((1, 2)) == [1, 2]


class TestBuildRecords:
    """Records carry canonical fields and provenance that re-verifies."""

    def test_provenance(self) -> None:
        """Each record names its source, id, hash and time; raw_row only on request."""
        (record,) = build_records([ROW], source="persistence.leads", retrieved_at=NOW)
        assert record.provenance.source == "persistence.leads"
        assert record.provenance.row_id == 7
        assert record.provenance.row_hash == row_hash(ROW)
        assert record.provenance.retrieved_at == NOW
        assert record.provenance.raw_row is None
        (raw,) = build_records(
            [ROW], source="persistence.leads", retrieved_at=NOW, include_raw=True
        )
        assert raw.provenance.raw_row == ROW

    def test_record_fields_rehash_to_row_hash(self) -> None:
        """A record's own fields, as held and as JSON, hash to its row_hash."""
        (record,) = build_records([ROW], source="persistence.leads", retrieved_at=NOW)
        assert row_hash(record.model_extra or {}) == record.provenance.row_hash
        dumped = json.loads(json.dumps(record.model_dump(mode="json")))
        fields = {k: v for k, v in dumped.items() if k != "provenance"}
        assert row_hash(fields) == record.provenance.row_hash

    def test_fast_construction_equals_validation(self) -> None:
        """Records built without validation equal validated models of the same data."""
        (record,) = build_records(
            [ROW], source="persistence.leads", retrieved_at=NOW, include_raw=True
        )
        validated = Record.model_validate(record.model_dump())
        assert validated == record
        assert validated.model_dump(mode="json") == record.model_dump(mode="json")
        assert record.model_fields_set == validated.model_fields_set

    def test_records_are_frozen(self) -> None:
        """Assigning to a record or its provenance raises."""
        (record,) = build_records([ROW], source="persistence.leads", retrieved_at=NOW)
        with pytest.raises(ValidationError):
            record.provenance = None  # type: ignore[assignment,misc]
        with pytest.raises(ValidationError):
            record.provenance.row_hash = "0" * 64  # type: ignore[misc]

    def test_input_rows_are_not_changed(self) -> None:
        """Building records leaves the caller's rows untouched."""
        row = dict(ROW)
        build_records([row], source="persistence.leads", retrieved_at=NOW, include_raw=True)
        assert row == ROW


class TestEnvelopeModel:
    """The envelope model, its JSON form and its JSON Schema."""

    def _envelope(self) -> Envelope:
        records = build_records([ROW], source="persistence.leads", retrieved_at=NOW)
        metadata = Metadata(
            source="persistence.leads",
            query_filters={"company": "acme"},
            retrieved_at=NOW,
            total_count=1,
            cache="miss",
            limit=50,
            offset=0,
        )
        return Envelope(metadata=metadata, records=records)

    def test_to_json_omits_unset_metadata_but_keeps_row_nulls(self) -> None:
        """Optional metadata left unset is omitted; a row's null field stays."""
        data = self._envelope().to_json()
        assert "error" not in data["metadata"]
        assert "fallback" not in data["metadata"]
        assert data["records"][0]["phone"] is None
        assert "raw_row" not in data["records"][0]["provenance"]
        json.dumps(data)  # JSON-ready

    def test_schema_validates_output(self) -> None:
        """The JSON form validates against the published schema."""
        jsonschema.validate(self._envelope().to_json(), envelope_json_schema())

    def test_schema_rejects_bad_envelopes(self) -> None:
        """A missing total_count or a malformed row_hash is rejected by the schema."""
        data = self._envelope().to_json()
        del data["metadata"]["total_count"]
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(data, envelope_json_schema())
        data = self._envelope().to_json()
        data["records"][0]["provenance"]["row_hash"] = "nope"
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(data, envelope_json_schema())

    def test_docs_schema_is_in_sync(self) -> None:
        """docs/envelope.schema.json equals the schema generated from the models."""
        assert SCHEMA_PATH.read_text(encoding="utf-8") == schema_json(), (
            'regenerate: python -c "import rag_agent.envelope as e; print(e.schema_json(), '
            "end='')\" > docs/envelope.schema.json"
        )

    def test_provenance_model_validates_hash(self) -> None:
        """A validated Provenance refuses a hash that is not 64 hex characters."""
        with pytest.raises(ValidationError):
            Provenance(source="persistence.leads", row_id=1, row_hash="x", retrieved_at=NOW)


class TestOffsetsWithSeconds:
    """Datetimes whose UTC offset is not a whole number of minutes keep their exact value."""

    def test_second_resolution_offset_is_kept_and_hash_follows_design(self) -> None:
        """A +00:19:32 offset (Amsterdam mean time) is not rounded, and row_hash agrees."""
        value = dt.datetime(1850, 1, 1, tzinfo=ZoneInfo("Europe/Amsterdam"))
        row = {"id": 1, "created_at": value}
        [record] = build_records([row], source="persistence.leads", retrieved_at=NOW)
        assert record.model_extra == {"id": 1, "created_at": "1850-01-01T00:00:00+00:19:32"}
        assert record.provenance.row_hash == row_hash(row)

    def test_fixed_offset_with_seconds(self) -> None:
        """A fixed ``timezone`` offset of 30 seconds is written by isoformat, not rounded."""
        value = dt.datetime(2024, 1, 1, tzinfo=dt.timezone(dt.timedelta(seconds=30)))
        [record] = build_records([{"t": value}], source="persistence.leads", retrieved_at=NOW)
        assert record.model_extra == {"t": value.isoformat()}
        assert record.provenance.row_hash == row_hash({"t": value})


class TestRecordCopies:
    """Copies of a record (whose fields refuse changes) are plain, mutable records."""

    def test_copies_serialise_and_compare_like_plain_records(self) -> None:
        """Deep and shallow copies, pickling, JSON and equality work and give plain dicts."""
        [record] = build_records(
            [{"id": 1, "email": "a@x.io"}], source="persistence.leads", retrieved_at=NOW
        )
        validated = Record.model_validate(record.model_dump())
        assert record == validated
        for clone in (
            record.model_copy(deep=True),
            copy.deepcopy(record),
            pickle.loads(pickle.dumps(record)),
        ):
            assert clone == record
            assert type(clone.model_extra) is dict
        assert type(record.model_copy(update={"email": "b@x.io"}).model_extra) is dict
        assert json.loads(record.model_dump_json())["email"] == "a@x.io"
        assert record.model_dump()["email"] == "a@x.io"
