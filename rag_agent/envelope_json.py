"""An envelope's records written to JSON: directly for plain records, else through pydantic."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from pydantic import TypeAdapter

from rag_agent.envelope_models import Provenance, Record
from rag_agent.envelope_records import _ScalarFields

_DATETIME_JSON = TypeAdapter(dt.datetime)


def _records_json(records: Iterable[Record]) -> list[dict[str, Any]]:
    """``records`` as ``model_dump(mode="json")`` writes them, unset ``raw_row`` left out.

    Records of :func:`build_records` hold their fields in canonical JSON form already, so the
    common record (no related rows, no raw row, no redaction) is written directly: one dict per
    record instead of a pydantic serialisation of each (a test holds both to the same output).
    Any other record takes pydantic's path.
    """
    stamps: dict[int, Any] = {}  # one retrieved_at per page: written once (by object, see below)
    out: list[dict[str, Any]] = []
    for record in records:
        data = _record_json(record, stamps)
        if data is None:
            data = record.model_dump(mode="json")
            _drop_unset_raw_rows([data])
        out.append(data)
    return out


def _record_json(record: Record, stamps: dict[int, Any]) -> dict[str, Any] | None:
    """``record``'s JSON form written directly, or ``None`` when it needs pydantic's path."""
    extra = record.__pydantic_extra__
    if type(extra) is not _ScalarFields or type(record) is not Record:
        return None
    state = record.__dict__
    provenance = state["provenance"]
    if (
        state["related"] is not None
        or state["related_truncated"] is not None
        or type(provenance) is not Provenance
    ):
        return None
    facts = provenance.__dict__
    stamp = facts["retrieved_at"]
    if (
        facts["raw_row"] is not None
        or facts.get("relevance") is not None
        or facts["redacted"] is not None
        or facts["source_hash"] is not None
        or type(stamp) is not dt.datetime
    ):
        return None
    # By identity, not equality: 12:00+00:00 equals 13:00+01:00 yet is written differently.
    written = stamps.get(id(stamp))
    if written is None:
        written = stamps[id(stamp)] = _DATETIME_JSON.dump_python(stamp, mode="json")
    # row_id is the fields' own "id" (a scalar), source and row_hash text, as build_records
    # made them (a validated model cannot carry _ScalarFields).
    return {
        "provenance": {
            "source": facts["source"],
            "row_id": facts["row_id"],
            "row_hash": facts["row_hash"],
            "retrieved_at": written,
        },
        **extra,
    }


def _drop_unset_raw_rows(records: list[dict[str, Any]]) -> None:
    for record in records:
        provenance = record["provenance"]
        if provenance["raw_row"] is None:
            del provenance["raw_row"]
        if provenance.get("relevance", 0) is None:
            del provenance["relevance"]
        for children in (record.get("related") or {}).values():
            _drop_unset_raw_rows(children)
