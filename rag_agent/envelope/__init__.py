"""The envelope: what ``RAGAgent.run`` returns, and the provenance every record carries.

``row_hash`` is the SHA-256 hex digest of a row's canonical JSON: the record's fields without
``provenance``, ``json.dumps(fields, sort_keys=True, separators=(",", ":"),
ensure_ascii=False)`` encoded as UTF-8, where dates, datetimes and times are ``isoformat()``,
UUIDs and Decimals are ``str``, bytes are hex, and the non-finite floats are the strings
``"NaN"``, ``"Infinity"`` and ``"-Infinity"`` (as ``str(Decimal)`` and PostgreSQL write them;
JSON has no number for them). The record shows each field in exactly that form. Anyone holding
an envelope can re-verify every record::

    for record in envelope["records"]:
        fields = {k: v for k, v in record.items() if k != "provenance"}
        assert row_hash(fields) == record["provenance"]["row_hash"]

(in JSON form, values are already the canonical strings, so the check works on a parsed
envelope as it is).

With a redaction policy on the facade (:mod:`persistence.redaction`) rows arrive redacted: the
record shows the redacted values and ``row_hash`` is over them, so the check above is unchanged;
``provenance.redacted`` says which fields were redacted and how, and ``provenance.source_hash``
(keyed, over the original row) is for a holder of the data and the key to check.

Related rows (``include``) sit under their parent record in ``related`` (relation name -> child
records), each child a record of its own with its own ``provenance`` (its table as ``source``,
its ``id``, the hash of its own fields) and possibly its own ``related``. ``related`` and
``related_truncated`` (the names of the lists that hold fewer children than match) are, like
``provenance``, outside a record's hashed fields: a parent's ``row_hash`` is the hash of its own
columns only, and every child verifies on its own::

    def verify(record):
        fields = {k: v for k, v in record.items() if k not in OUTSIDE_ROW}
        assert row_hash(fields) == record["provenance"]["row_hash"]
        for children in record.get("related", {}).values():
            for child in children:
                verify(child)

The JSON Schema of the envelope lives in ``docs/envelope.schema.json``; regenerate it with::

    python -c "import rag_agent.envelope as e; print(e.schema_json(), end='')" \\
        > docs/envelope.schema.json

Models are frozen: a record shared through the agent's cache cannot be changed by attribute
assignment, and every envelope gets its own ``records`` list and ``metadata``.

This module is the public surface and ``Envelope``; the models live in
:mod:`rag_agent.envelope.models`, record building and hashing in :mod:`rag_agent.envelope.records`,
and the direct JSON writer of ``to_json()`` in :mod:`rag_agent.envelope.encoding`.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from persistence import canonical_value
from rag_agent.envelope.encoding import _records_json
from rag_agent.envelope.models import (
    OUTSIDE_ROW,
    AggregateGroup,
    Aggregates,
    AnswerInfo,
    AppliedFilter,
    BackendInfo,
    Citation,
    ContextInfo,
    ErrorInfo,
    FallbackReadInfo,
    IgnoredPart,
    Metadata,
    Provenance,
    RankingInfo,
    Record,
    RedactedField,
    ReformulationAttempt,
    Relevance,
    TraceInfo,
    TraceStep,
)
from rag_agent.envelope.models import Fallback as Fallback
from rag_agent.envelope.records import build_records, row_hash

__all__ = [
    "OUTSIDE_ROW",
    "AggregateGroup",
    "Aggregates",
    "AnswerInfo",
    "AppliedFilter",
    "BackendInfo",
    "Citation",
    "ContextInfo",
    "Envelope",
    "ErrorInfo",
    "FallbackReadInfo",
    "IgnoredPart",
    "Metadata",
    "Provenance",
    "RankingInfo",
    "Record",
    "RedactedField",
    "ReformulationAttempt",
    "Relevance",
    "TraceInfo",
    "TraceStep",
    "build_records",
    "canonical_value",
    "envelope_json_schema",
    "row_hash",
    "schema_json",
]

_OPTIONAL_METADATA = tuple(
    name for name, info in Metadata.model_fields.items() if not info.is_required()
)


class Envelope(BaseModel):
    """The result of ``RAGAgent.run``: ``metadata`` and ``records`` with provenance.

    ``to_json()`` gives the plain, JSON-ready ``dict`` (optional metadata left out when unset).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    metadata: Metadata
    records: list[Record]

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready ``dict``: datetimes as ISO 8601 strings, unset optional fields omitted.

        Row fields that are ``None`` stay (as ``null``): they are part of the hashed row.
        """
        metadata = self.metadata.model_dump(mode="json")
        for key in _OPTIONAL_METADATA:
            if metadata[key] is None:
                del metadata[key]
        return {"metadata": metadata, "records": _records_json(self.records)}


def envelope_json_schema() -> dict[str, Any]:
    """The envelope's JSON Schema (draft 2020-12), as written to ``docs/envelope.schema.json``."""
    schema = Envelope.model_json_schema(mode="serialization")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://readonly-rag.invalid/envelope.schema.json",
        "title": "RAG envelope",
        **{k: v for k, v in schema.items() if k != "title"},
    }


def schema_json() -> str:
    """The schema as the text of ``docs/envelope.schema.json`` (sorted keys, two-space indent)."""
    return json.dumps(envelope_json_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
