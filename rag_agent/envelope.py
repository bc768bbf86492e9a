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
"""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
import json
import math
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from persistence import RelatedRows, canonical_value, non_finite_text

__all__ = [
    "OUTSIDE_ROW",
    "AggregateGroup",
    "Aggregates",
    "AppliedFilter",
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
    "build_records",
    "canonical_value",
    "envelope_json_schema",
    "row_hash",
    "schema_json",
]

Fallback = Literal["agent", "reformulation", "suppressed", "disabled"]
_SCALARS = (str, int, bool, type(None))


def _non_finite(value: float) -> str:
    return non_finite_text(value)


def _canonical_row(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        key: value if isinstance(value, _SCALARS) else canonical_value(value)
        for key, value in row.items()
        if key != "provenance"
    }


def _hash_canonical(fields: Mapping[str, Any]) -> str:
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def row_hash(row: Mapping[str, Any]) -> str:
    """SHA-256 hex of the row's canonical JSON (``provenance``, if present, is left out).

    >>> row_hash({"id": 1, "email": "a@x.io"})[:12]
    'd6e0e1e4d0d5'
    """
    return _hash_canonical(_canonical_row(row))


def _unset(value: object) -> bool:
    return value is None


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ErrorInfo(_Frozen):
    """Why a run produced no (or only partial) data: the error's type name and a message."""

    type: str = Field(description="The exception class name, e.g. 'TableNotAllowedError'.")
    message: str = Field(description="A human-readable explanation.")


class ReformulationAttempt(_Frozen):
    """One reformulated query: why it was tried, its filters and how many rows it matched."""

    reason: Literal["drop_email", "shorten_company_suffix", "similar_company", "drop_company"]
    filters: dict[str, Any]
    result_count: int = Field(ge=0)


class AppliedFilter(_Frozen):
    """One condition the query applied, with the value as the column's type read it."""

    column: str
    op: Literal["eq", "ieq", "neq", "gt", "gte", "lt", "lte", "in", "is_null", "icontains", "ilike"]
    value: Any = Field(description="The value after coercion to the column's type.")
    source: Literal["rules", "llm", "tool"] = Field(
        description="Who understood it: the rule parser, the LLM extraction, or a tool's arguments."
    )


class IgnoredPart(_Frozen):
    """A part of the request that was understood but not applied, and why."""

    text: str = Field(description="The words (or condition) not applied.")
    reason: str = Field(description="Why it was not applied.")


class AggregateGroup(_Frozen):
    """One group of an aggregate: its key values and its metric values, in canonical JSON form
    (``Decimal``/UUID as ``str``, dates and times ISO 8601)."""

    keys: dict[str, Any] = Field(description="The group-by columns' values ({} when ungrouped).")
    values: dict[str, Any] = Field(
        description="Each metric's value by its name ('count', 'sum:score', ...); exact numbers "
        "(numeric/bigint sums, averages) as decimal strings."
    )


class Aggregates(_Frozen):
    """What an aggregate run computed: the grouping, the metrics, the groups in key order."""

    group_by: list[str] = Field(description="The columns grouped by (empty: one group).")
    metrics: list[str] = Field(description="The metrics: 'count' or '<function>:<column>'.")
    groups: list[AggregateGroup]
    capped: bool = Field(description="True when more groups existed than were returned.")
    total_groups: int | None = Field(
        default=None, ge=0, description="How many groups there were in all, when known."
    )


class FallbackReadInfo(_Frozen):
    """One read the agent fallback made: the table, its filters and how many rows came back."""

    table: str
    filters: dict[str, Any] = Field(description="The read's filters as {column: {op: value}}.")
    rows: int = Field(ge=0, description="Rows that read returned.")


class RedactedField(_Frozen):
    """How one field of a record was redacted before it left the facade."""

    method: Literal["mask", "hash", "drop"] = Field(
        description="mask: shown partly or as '***'; hash: a keyed pseudonym; drop: left out."
    )
    style: str | None = Field(
        default=None, description="The mask's style: full, email, phone or initials."
    )
    commitment: str = Field(
        pattern=r"^[0-9a-f]{64}$",
        description='HMAC-SHA256 under the redaction key of ["field", table, original id, '
        "column, original value] in canonical JSON: checkable only with the original and the key.",
    )


class Relevance(_Frozen):
    """Where a ranked record stands: its fused score, its place and its rank in each leg.

    It sits in the record's ``provenance`` (how the record was found), outside the hashed
    fields, so every record verifies as before; not beside the row's fields, where a column
    called ``score`` (leads have one) would collide with it.
    """

    score: float = Field(description="The fused relevance score; higher is better.")
    rank: int = Field(ge=1, description="The record's 1-based place in the whole ranking.")
    ranks: dict[str, int | None] = Field(
        description="Its 1-based rank in each leg ('keyword', 'semantic'); null where that leg "
        "did not rank it."
    )


class Provenance(_Frozen):
    """Where a record came from, when, and the hash that lets anyone verify it."""

    source: str = Field(description="'persistence.<table>': the table the row was read from.")
    row_id: Any = Field(description="The row's primary key (its 'id' field), or null.")
    row_hash: str = Field(pattern=r"^[0-9a-f]{64}$", description="SHA-256 of the canonical row.")
    retrieved_at: dt.datetime = Field(description="When the row was read (UTC).")
    raw_row: dict[str, Any] | None = Field(
        default=None,
        description="The row exactly as read (after redaction); only with include_raw=True.",
    )
    # Left out when unset: records of unredacted rows serialise exactly as before.
    redacted: dict[str, RedactedField] | None = Field(
        default=None,
        exclude_if=_unset,
        description="The fields redacted before the row left the facade, by column; row_hash is "
        "over the fields as shown.",
    )
    source_hash: str | None = Field(
        default=None,
        exclude_if=_unset,
        pattern=r"^[0-9a-f]{64}$",
        description='With redaction: HMAC-SHA256 under the redaction key of ["row", table, '
        "original row] in canonical JSON, which a holder of the original row and the key can "
        "check (RedactionPolicy.verify).",
    )
    relevance: Relevance | None = Field(
        default=None,
        exclude_if=_unset,
        description="For a ranked record: its score, place and per-leg ranks.",
    )


_UNREDACTED = {"redacted": None, "source_hash": None}
# Without redaction its two fields stay unset, so they are left out of dumps; ``relevance`` is
# set only on ranked records, after they are built.
_PROVENANCE_FIELDS = frozenset(Provenance.model_fields) - frozenset(_UNREDACTED) - {"relevance"}
_REDACTED_PROVENANCE_FIELDS = _PROVENANCE_FIELDS | frozenset(_UNREDACTED)


def _redaction_fields(note: Any) -> dict[str, Any]:
    """A :class:`persistence.RowRedaction` as the provenance's ``redacted``/``source_hash``."""
    if note is None:
        return _UNREDACTED
    redacted = {
        column: RedactedField.model_construct(
            method=field.method, style=field.style, commitment=field.commitment
        )
        for column, field in note.fields.items()
    }
    return {"redacted": redacted, "source_hash": note.source_hash}


class _ReadOnlyFields(dict[str, Any]):
    """A record's fields: a ``dict`` that refuses changes.

    Freezing the model stops attribute assignment but not ``record.model_extra[...] = ...``;
    records are shared through the agent's cache, so their fields refuse changes too. Copies
    (``copy``, ``deepcopy``, pickling, ``model_copy``) are plain, mutable dicts.
    """

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("a record's fields are read-only; copy them to change them")

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return copy.deepcopy(dict(self), memo)

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self),))


class _ScalarFields(_ReadOnlyFields):
    """Read-only fields that :func:`build_records` made and knows to be JSON scalars (text,
    integers, booleans, null, finite floats) in canonical form: ``to_json()`` writes them as they
    are, without asking pydantic (or checking each value again)."""

    __slots__ = ()


#: The keys of a record that are not fields of its row (and so not hashed).
OUTSIDE_ROW = frozenset({"provenance", "related", "related_truncated"})


class RankingInfo(_Frozen):
    """How ranked records were ranked: the mode that ran, the words, the legs."""

    mode: Literal["hybrid", "keyword", "semantic"] = Field(description="The mode that ran.")
    query: str = Field(description="The text the legs ranked by (request framing removed).")
    legs: list[str] = Field(description="The legs that ranked, in fusion order.")
    degraded: str | None = Field(
        default=None,
        exclude_if=_unset,
        description="What could not run and what ran instead, when not all did.",
    )


class Record(BaseModel):
    """One row's fields (as read) plus its ``provenance``; with related rows, ``related``
    (relation name -> child records) and ``related_truncated``."""

    model_config = ConfigDict(frozen=True, extra="allow")

    provenance: Provenance
    # Left out when unset: records without related rows serialise exactly as before.
    related: dict[str, list[Record]] | None = Field(
        default=None,
        exclude_if=_unset,
        description="Related rows by relation name, each a record with its own provenance; "
        "outside the hashed fields.",
    )
    related_truncated: list[str] | None = Field(
        default=None,
        exclude_if=_unset,
        description="The relations whose lists hold fewer rows than match (a per-parent or "
        "total bound cut them).",
    )


class Metadata(_Frozen):
    """What was asked, what was found, and how the answer was produced."""

    source: str = Field(description="'persistence.<table>', or 'agent' for fallback records.")
    query_filters: dict[str, Any] | None = Field(
        description=(
            "The filters of the query that produced the records (null when none): the keys id, "
            "email, company, client_id as before, and {column: {op: value}} for other conditions."
        )
    )
    retrieved_at: dt.datetime = Field(description="When the records were read (UTC).")
    total_count: int = Field(ge=0, description="Rows matching the filters, not the page length.")
    error: ErrorInfo | None = None
    fallback: Fallback | None = None
    truncated: bool | None = Field(
        default=None, description="True when more rows match than the records hold."
    )
    has_more: bool | None = Field(
        default=None, description="Whether rows after this page match (false on the last page)."
    )
    next_offset: int | None = Field(
        default=None, ge=0, description="The offset of the next page, when has_more is true."
    )
    count_only: bool | None = Field(
        default=None, description="True when only the number of matches was asked for."
    )
    related_capped: bool | None = Field(
        default=None,
        description="True when the bound on related rows in all cut at least one related list.",
    )
    summary: dict[str, Any] | None = Field(
        default=None,
        description="Per-column statistics of the returned page, when many rows match.",
    )
    cache: Literal["hit", "miss"] | None = None
    limit: int | None = Field(default=None, ge=1, description="Effective limit after clamping.")
    offset: int | None = Field(default=None, ge=0)
    filters: list[AppliedFilter] | None = Field(
        default=None, description="Each condition the query applied, and who understood it."
    )
    ignored: list[IgnoredPart] | None = Field(
        default=None, description="Parts of the request that were not applied, and why."
    )
    reformulation_attempts: list[ReformulationAttempt] | None = None
    fallback_dropped_ids: int | None = Field(
        default=None,
        ge=0,
        description="Row ids the agent fallback cited without having read them (dropped).",
    )
    fallback_reads: list[FallbackReadInfo] | None = Field(
        default=None, description="The reads the agent fallback made, in order."
    )
    aggregates: Aggregates | None = Field(
        default=None,
        description="Counts and metrics per group, for an aggregate run (records are then empty).",
    )
    ranking: RankingInfo | None = Field(
        default=None,
        description="Set when the records come back ranked by relevance to the request's topic.",
    )


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


# What a record's JSON form may hold as it is: the values ``model_dump(mode="json")`` passes
# through unchanged (a finite float too: pydantic writes a non-finite one as null).
_JSON_AS_IS = frozenset({str, int, bool, type(None), float})
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


_set_attr = object.__setattr__
# orjson writes these exactly as the reference definition does (a property test holds it to
# that), datetimes included, and many times faster than isoformat(); floats, times, Decimals and
# nested values take the reference path.
_ORJSON_EXACT = frozenset({str, int, bool, type(None), dt.date, uuid.UUID})
_MINUTE = dt.timedelta(minutes=1)


def _orjson_writes_exactly(values: Iterable[Any], kinds: set[type]) -> bool:
    """True when orjson writes every value (of types ``kinds``) as the reference does."""
    if not kinds <= _ORJSON_EXACT_OR_DATETIME:
        return False
    if dt.datetime not in kinds:
        return True
    for value in values:
        if type(value) is not dt.datetime:
            continue
        tz = value.tzinfo
        if tz is not None and tz is not dt.UTC:
            # orjson writes a UTC offset to the minute; isoformat() keeps its seconds (zones with
            # local mean time have them for historic dates, e.g. +00:19:32).
            offset = value.utcoffset()
            if offset is not None and offset % _MINUTE:
                return False
    return True


_ORJSON_EXACT_OR_DATETIME = _ORJSON_EXACT | {dt.datetime}


def _canonical_and_hash(
    row: Mapping[str, Any], kinds: set[type] | None = None
) -> tuple[_ReadOnlyFields, str]:
    """The row's fields in canonical form, read-only, and their SHA-256 hex digest."""
    if "provenance" in row:
        row = {k: v for k, v in row.items() if k != "provenance"}
        kinds = None
    if kinds is None:
        kinds = set(map(type, row.values()))
    if _orjson_writes_exactly(row.values(), kinds):
        try:
            data = orjson.dumps(row, option=orjson.OPT_SORT_KEYS)
        except TypeError:  # an int beyond 64 bits, a str with a lone surrogate, a non-str key
            pass
        else:
            # What orjson wrote from these types reads back as text, integers, booleans, nulls.
            return _ScalarFields(orjson.loads(data)), hashlib.sha256(data).hexdigest()
    fields = _canonical_row(row)
    return _fields(fields), _hash_canonical(fields)


def _fields(fields: dict[str, Any]) -> _ReadOnlyFields:
    """A record's read-only fields; marked as scalars when they are (nested lists and dicts
    take pydantic's path in ``to_json()``, which copies them)."""
    if set(map(type, fields.values())) <= _JSON_AS_IS:
        return _ScalarFields(fields)
    return _ReadOnlyFields(fields)


def _raw_value(value: Any) -> Any:
    # JSON cannot hold bytes (a bytea column): they are written as PostgreSQL writes them.
    if isinstance(value, bytes | bytearray | memoryview):
        return "\\x" + bytes(value).hex()
    if isinstance(value, float) and not math.isfinite(value):
        return _non_finite(value)
    return value


def _raw_row(row: Mapping[str, Any]) -> dict[str, Any]:
    return {key: _raw_value(value) for key, value in row.items()}


def build_records(
    rows: Iterable[Mapping[str, Any]],
    *,
    source: str,
    retrieved_at: dt.datetime,
    include_raw: bool = False,
) -> list[Record]:
    """Records with provenance for ``rows`` read from ``source`` (``"persistence.<table>"``).

    Field values are stored in their canonical JSON form (datetimes as ISO strings), so a
    record hashes to its ``row_hash`` both as a model and once serialised. A row's related rows
    (a :class:`persistence.RelatedRows` value, as ``facade.read(..., include=...)`` returns)
    become child records under ``related``, built the same way from their own table.
    """
    records: list[Record] = []
    new_provenance = Provenance.__new__
    new_record = Record.__new__
    # Frozen models never add to their fields-set, so one set can serve every record.
    provenance_fields = set(_PROVENANCE_FIELDS)
    redacted_provenance_fields = set(_REDACTED_PROVENANCE_FIELDS)
    record_fields = {"provenance"}
    # What ``model_construct`` does for models without aliases, private attributes or
    # validators, minus its per-field loop (a fifth of the time; a test checks the result equals
    # a validated model): this loop is the envelope's hot path.
    for row in rows:
        related: dict[str, list[Record]] | None = None
        truncated: list[str] | None = None
        # The value types, once: they say whether related rows hang on the row and whether
        # orjson may write it (C-speed, where a generator per row cost a tenth of the loop).
        kinds: set[type] | None = set(map(type, row.values()))
        # A plain dict carries no redaction note (a failed getattr costs an exception).
        note = None if type(row) is dict else getattr(row, "redaction", None)
        if RelatedRows in kinds:  # type: ignore[operator]
            related, truncated = _related(row, retrieved_at, include_raw)
            row = {k: v for k, v in row.items() if type(v) is not RelatedRows}
            kinds = None
        fields, digest = _canonical_and_hash(row, kinds)
        facts = {
            "source": source,
            "row_id": fields.get("id"),
            "row_hash": digest,
            "retrieved_at": retrieved_at,
            "raw_row": _raw_row(row) if include_raw else None,
            "relevance": None,
            "redacted": None,
            "source_hash": None,
        }
        if note is not None:
            facts.update(_redaction_fields(note))
        provenance = new_provenance(Provenance)
        _set_attr(provenance, "__dict__", facts)
        _set_attr(
            provenance,
            "__pydantic_fields_set__",
            provenance_fields if note is None else redacted_provenance_fields,
        )
        _set_attr(provenance, "__pydantic_extra__", None)
        _set_attr(provenance, "__pydantic_private__", None)
        record = new_record(Record)
        _set_attr(
            record,
            "__dict__",
            {"provenance": provenance, "related": related, "related_truncated": truncated},
        )
        # As after validation, extra fields count as set (``exclude_unset`` keeps them).
        fields_set = record_fields.union(fields)
        if related is not None:
            fields_set.add("related")
            if truncated is not None:
                fields_set.add("related_truncated")
        _set_attr(record, "__pydantic_fields_set__", fields_set)
        _set_attr(record, "__pydantic_extra__", fields)
        _set_attr(record, "__pydantic_private__", None)
        records.append(record)
    return records


def _related(
    row: Mapping[str, Any], retrieved_at: dt.datetime, include_raw: bool
) -> tuple[dict[str, list[Record]], list[str] | None]:
    """The child records of each related list of ``row``, and the names of the cut lists."""
    related: dict[str, list[Record]] = {}
    truncated: list[str] = []
    for name, children in row.items():
        if type(children) is RelatedRows:
            related[name] = build_records(
                children,
                source=f"persistence.{children.table}",
                retrieved_at=retrieved_at,
                include_raw=include_raw,
            )
            if children.cut:
                truncated.append(name)
    return related, truncated or None


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
