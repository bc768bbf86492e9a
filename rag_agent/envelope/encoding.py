"""An envelope's records written to JSON: directly for plain records, else through pydantic."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from pydantic import TypeAdapter

from rag_agent.envelope.models import Provenance, Record
from rag_agent.envelope.records import _ScalarFields

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
    append = out.append
    for record in records:
        # A record of build_records' own (a validated model cannot carry _ScalarFields, and a
        # model_copy turns them into a plain dict): row_id is the fields' own "id" (a scalar),
        # source and row_hash text, as build_records made them. Checked inline: this loop runs
        # once per record of the page.
        extra = record.__pydantic_extra__
        if type(extra) is _ScalarFields and type(record) is Record:
            state = record.__dict__
            provenance = state["provenance"]
            if (
                state["related"] is None
                and state["related_truncated"] is None
                and type(provenance) is Provenance
            ):
                facts = provenance.__dict__
                stamp = facts["retrieved_at"]
                if (
                    facts["raw_row"] is None
                    and facts["redacted"] is None
                    and facts["source_hash"] is None
                    and facts.get("relevance") is None
                    and type(stamp) is dt.datetime
                ):
                    # By identity, not equality: 12:00+00:00 equals 13:00+01:00 yet is written
                    # differently.
                    written = stamps.get(id(stamp))
                    if written is None:
                        written = stamps[id(stamp)] = _stamp_json(stamp)
                    append(
                        {
                            "provenance": {
                                "source": facts["source"],
                                "row_id": facts["row_id"],
                                "row_hash": facts["row_hash"],
                                "retrieved_at": written,
                            },
                            **extra,
                        }
                    )
                    continue
        data = record.model_dump(mode="json")
        _drop_unset_raw_rows([data])
        append(data)
    return out


def _stamp_json(stamp: dt.datetime) -> Any:
    return _DATETIME_JSON.dump_python(stamp, mode="json")


def _drop_unset_raw_rows(records: list[dict[str, Any]]) -> None:
    for record in records:
        provenance = record["provenance"]
        if provenance["raw_row"] is None:
            del provenance["raw_row"]
        if provenance.get("relevance", 0) is None:
            del provenance["relevance"]
        for children in (record.get("related") or {}).values():
            _drop_unset_raw_rows(children)
