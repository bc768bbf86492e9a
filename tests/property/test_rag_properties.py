"""Properties of the retrieval pipeline: run() never raises and always returns a valid envelope."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from persistence import MemoryStore, Op, create_persistence_agent
from rag_agent import (
    RAGAgent,
    RAGSettings,
    Understanding,
    create_rag_agent,
    envelope_json_schema,
    row_hash,
    understand,
)
from rag_agent.envelope import Envelope, Metadata, build_records
from tests.conftest import corpus_lines
from tests.unit.test_rag_envelope import reference_hash

SCHEMA = envelope_json_schema()
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
NOW = dt.datetime(2025, 6, 18, 12, tzinfo=dt.UTC)


def _leads(text: str) -> Understanding:
    return understand(text, table="leads", now=NOW)


def _agent() -> RAGAgent:
    store = MemoryStore()
    writer = create_persistence_agent(kind="memory", store=store)
    writer.batch(
        "leads",
        [
            {"email": "a@acme.io", "company_name": "Acme Inc", "client_id": 1, "score": 10},
            {"email": "b@globex.io", "company_name": "Globex", "client_id": 2, "score": 20},
            {"email": "o'brien@x.io", "company_name": "O'Brien; DROP TABLE", "client_id": 3},
        ],
    )
    return create_rag_agent(kind="memory", store=store, settings=RAGSettings(summary_threshold=1))


AGENT = _agent()


def _check(data: dict[str, Any]) -> None:
    VALIDATOR.validate(json.loads(json.dumps(data)))
    for record in data["records"]:
        fields = {k: v for k, v in record.items() if k != "provenance"}
        assert row_hash(fields) == record["provenance"]["row_hash"]
    if data["metadata"].get("query_filters") is None and data["records"]:
        # never an unfiltered table: without a filter, only rows a search leg ranked by the
        # request's topic
        assert "ranking" in data["metadata"]
        for record in data["records"]:
            ranks = record["provenance"]["relevance"]["ranks"]
            assert any(rank is not None for rank in ranks.values())


class TestRunNeverRaises:
    """``run`` answers any text with a schema-valid envelope."""

    @given(st.text(max_size=300))
    def test_any_text(self, text: str) -> None:
        """Arbitrary unicode text gives a schema-valid envelope."""
        _check(AGENT.run(text, return_json=True))

    @given(
        st.text(max_size=80),
        st.one_of(st.none(), st.integers(-5, 10**6), st.booleans(), st.text(max_size=3)),
        st.one_of(st.none(), st.integers(-5, 10**6)),
        st.sampled_from(["leads", "clients", "secrets", "LEADS", "leads;--", ""]),
        st.booleans(),
    )
    def test_any_arguments(
        self, text: str, limit: Any, offset: Any, table: str, include_raw: bool
    ) -> None:
        """Any mix of limit, offset, table and include_raw gives a schema-valid envelope."""
        _check(
            AGENT.run(
                text,
                table=table,
                limit=limit,
                offset=offset,
                include_raw=include_raw,
                return_json=True,
            )
        )

    def test_every_corpus_line(self) -> None:
        """Every payload of the SQL-injection corpus gives a schema-valid envelope."""
        lines = corpus_lines()
        assert lines
        for line in lines:
            _check(AGENT.run(line, return_json=True))
            for prefix in ("leads at ", "company: ", "lead #1 email a@acme.io company "):
                _check(AGENT.run(prefix + line, return_json=True))

    def test_corpus_values_stay_literal(self) -> None:
        """Corpus payloads only ever become literal filter values."""
        for line in corpus_lines():
            for condition in _leads("company: " + line).conditions:
                # Never ilike: no value is ever read as a pattern.
                assert condition.to_filter().op is not Op.ILIKE


class TestParserProperties:
    """The parser is deterministic and reads the filter keys' conditions with canonical values."""

    @given(st.text(max_size=400))
    def test_canonical_values(self, text: str) -> None:
        """Any text gives the same conditions every time; ids are ints or UUID text, e-mails
        lower-cased, and each condition is a valid query filter."""
        found = _leads(text)
        assert found == _leads(text)
        for condition in found.conditions:
            if (condition.column, condition.op) in (("id", Op.EQ), ("client_id", Op.EQ)):
                assert isinstance(condition.value, int | str)
            if (condition.column, condition.op) == ("email", Op.IEQ):
                assert condition.value == condition.value.lower()
            condition.to_filter()

    @given(st.emails())
    def test_emails_are_found(self, email: str) -> None:
        """A plain address after 'email ' is found, lower-cased."""
        found = {(c.column, c.op): c.value for c in _leads(f"email {email}").conditions}
        local = email.rpartition("@")[0]
        if email.isascii() and all(c.isalnum() or c in "._%+-" for c in local):
            assert found.get(("email", Op.IEQ)) == email.lower()

    @given(st.integers(0, 2**63 - 1))
    def test_ids_round_trip(self, number: int) -> None:
        """'lead #N' gives id N for any bigint."""
        found = _leads(f"lead #{number}").conditions
        assert [(c.column, c.op, c.value) for c in found] == [("id", Op.EQ, number)]


_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(alphabet=st.characters(blacklist_categories=["Cs"])),
    st.datetimes(timezones=st.one_of(st.none(), st.timezones())),
    st.dates(),
    st.uuids(),
    st.decimals(allow_nan=False, allow_infinity=False),
)


_NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


class TestRowHashProperty:
    """The fast hashing path agrees with the design's reference definition."""

    @given(st.dictionaries(st.text(max_size=10), _values, max_size=12))
    def test_matches_reference(self, row: dict[str, Any]) -> None:
        """For any flat row of supported values, row_hash equals the reference digest."""
        row.pop("provenance", None)
        assert row_hash(row) == reference_hash(row)

    @given(st.dictionaries(st.text(max_size=10), _values, max_size=12))
    def test_records_carry_the_reference_hash(self, row: dict[str, Any]) -> None:
        """build_records' fast path gives every record the reference digest of its row."""
        row.pop("provenance", None)
        (record,) = build_records([row], source="persistence.leads", retrieved_at=_NOW)
        assert record.provenance.row_hash == reference_hash(row)
        assert row_hash(record.model_extra or {}) == record.provenance.row_hash


@pytest.mark.parametrize("text", ["lead #1", "leads at acme", "email a@acme.io"])
def test_results_are_stable(text: str) -> None:
    """The same question twice gives the same records (the second from the cache)."""
    first = AGENT.run(text, return_json=True)
    second = AGENT.run(text, return_json=True)
    assert first["records"] == second["records"]


def _pydantic_json(envelope: Envelope) -> dict[str, Any]:
    """``to_json()`` as pydantic alone writes it: the reference the direct writer must equal."""
    data = envelope.model_dump(mode="json")
    data["metadata"] = {k: v for k, v in data["metadata"].items() if v is not None or k in _KEPT}
    stack = list(data["records"])
    while stack:
        record = stack.pop()
        if record["provenance"]["raw_row"] is None:
            del record["provenance"]["raw_row"]
        for children in (record.get("related") or {}).values():
            stack.extend(children)
    return data


# Required metadata fields stay even when null.
_KEPT = frozenset(n for n, f in Metadata.model_fields.items() if f.is_required())

_stamps = st.datetimes(timezones=st.one_of(st.none(), st.timezones()))


class TestToJsonProperty:
    """to_json() writes the records build_records made directly; pydantic is the reference."""

    @given(
        st.lists(
            st.dictionaries(
                st.text(max_size=10),
                st.one_of(_values, st.lists(st.integers(), max_size=3)),
                max_size=8,
            ),
            max_size=5,
        ),
        _stamps,
        st.booleans(),
    )
    def test_equals_pydantic(
        self, rows: list[dict[str, Any]], stamp: dt.datetime, raw: bool
    ) -> None:
        """For any rows and retrieval time, the JSON form is exactly pydantic's, key order
        included, and changing it leaves the records untouched."""
        for row in rows:
            row.pop("provenance", None)
        records = build_records(
            rows, source="persistence.leads", retrieved_at=stamp, include_raw=raw
        )
        metadata = Metadata(
            source="persistence.leads",
            query_filters=None,
            retrieved_at=stamp,
            total_count=len(rows),
        )
        envelope = Envelope(metadata=metadata, records=records)
        data = envelope.to_json()
        expected = _pydantic_json(envelope)
        assert json.dumps(data) == json.dumps(expected)
        for record in data["records"]:
            record["provenance"]["row_hash"] = "changed"
            record["extra"] = 1
        assert envelope.to_json() == expected
