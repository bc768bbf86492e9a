"""Records built from rows: canonical fields, ``row_hash`` and provenance, on the hot path."""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
import json
import math
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from persistence import RelatedRows, canonical_value, non_finite_text
from rag_agent.envelope_models import Provenance, Record, RedactedField

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


# What a record's JSON form may hold as it is: the values ``model_dump(mode="json")`` passes
# through unchanged (a finite float too: pydantic writes a non-finite one as null).
_JSON_AS_IS = frozenset({str, int, bool, type(None), float})
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
