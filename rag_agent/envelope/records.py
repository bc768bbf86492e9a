"""Records built from rows: canonical fields, ``row_hash`` and provenance, on the hot path."""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
import json
import math
import uuid
from collections.abc import Iterable, Iterator, Mapping
from itertools import chain, repeat
from typing import Any, cast

import orjson
from pydantic import BaseModel

from persistence import RelatedRows, canonical_value, non_finite_text
from rag_agent.envelope.models import Provenance, Record, RedactedField

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
# The setters of a model's four slots, called directly (cheaper than ``object.__setattr__`` by
# name, which looks each one up again).
_SLOTS = ("__dict__", "__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__")
_SLOT_SETTERS = tuple(BaseModel.__dict__[name].__set__ for name in _SLOTS)
# orjson writes these exactly as the reference definition does (a property test holds it to
# that), datetimes included, and many times faster than isoformat(); floats, times, Decimals and
# nested values take the reference path.
_ORJSON_EXACT = frozenset({str, int, bool, type(None), dt.date, uuid.UUID})
_MINUTE = dt.timedelta(minutes=1)


def _orjson_writes_exactly(values: Iterable[Any], kinds: set[type]) -> bool:
    """True when orjson writes every value (of types ``kinds``) as the reference does."""
    if not kinds <= _ORJSON_EXACT_OR_DATETIME:
        return False
    return dt.datetime not in kinds or _offsets_to_the_minute(values)


def _offsets_to_the_minute(values: Iterable[Any]) -> bool:
    """True unless a datetime among ``values`` has a UTC offset with seconds.

    orjson writes a UTC offset to the minute; isoformat() keeps its seconds (zones with local
    mean time have them for historic dates, e.g. +00:19:32).
    """
    utc = dt.UTC
    for value in values:
        if type(value) is dt.datetime:
            tz = value.tzinfo
            if tz is not None and tz is not utc:
                offset = value.utcoffset()
                if offset is not None and offset % _MINUTE:
                    return False
    return True


_ORJSON_EXACT_OR_DATETIME = _ORJSON_EXACT | {dt.datetime}
_SORTED = orjson.OPT_SORT_KEYS


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
            data = orjson.dumps(row, option=_SORTED)
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


def _encode_plain(rows: list[Mapping[str, Any]]) -> list[bytes | None]:
    """Each row's canonical JSON as orjson writes it (sorted keys), where that is exactly the
    reference definition's bytes; ``None`` for a row that takes the reference path (a float, a
    Decimal, nested values, related rows, a ``provenance`` key, an offset with seconds, ...)."""
    dumps = orjson.dumps
    if _page_is_exact(rows):  # the common page: no per-row checks of types and offsets
        encoded: list[bytes | None] = []
        append = encoded.append
        for row in rows:
            if "provenance" in row:
                append(None)
                continue
            try:
                data = dumps(row, option=_SORTED)
            except TypeError:  # an int beyond 64 bits, a lone surrogate, a non-str key
                data = None
            append(data)
        return encoded
    return [_encode_row(row) for row in rows]


def _page_is_exact(rows: list[Mapping[str, Any]]) -> bool:
    """True when orjson writes every value of the page exactly: a type set over the whole page
    (in C), and the UTC offsets of its datetimes, which must be whole minutes (what
    :func:`_encode_row` asks of each row, asked once of the page: a driver's own UTC zone, as
    PostgreSQL's ``Etc/UTC``, is not ``dt.UTC`` and is written as exactly)."""
    if not all(map(isinstance, rows, repeat(dict))):
        return False
    page = cast(list[dict[str, Any]], rows)
    kinds = set(map(type, chain.from_iterable(map(dict.values, page))))
    if not kinds <= _ORJSON_EXACT_OR_DATETIME:
        return False
    if dt.datetime not in kinds:
        return True
    return _offsets_to_the_minute(chain.from_iterable(map(dict.values, page)))


def _encode_row(row: Mapping[str, Any]) -> bytes | None:
    """One row as :func:`_encode_plain` writes it, its types and offsets checked on their own."""
    if "provenance" in row or not _orjson_writes_exactly(
        row.values(), set(map(type, row.values()))
    ):
        return None
    try:
        return orjson.dumps(row, option=_SORTED)
    except TypeError:  # an int beyond 64 bits, a str with a lone surrogate, a non-str key
        return None


def _decode_plain(encoded: list[bytes | None]) -> Iterator[dict[str, Any]]:
    """The rows ``encoded`` holds read back, in order: one parse of the page, not one per row.

    What orjson wrote from the exact types reads back as text, integers, booleans and nulls in
    sorted key order: the rows' canonical fields.
    """
    page = b",".join([data for data in encoded if data is not None])
    return iter(orjson.loads(b"[" + page + b"]"))


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
    rows = rows if type(rows) is list else list(rows)
    # The common row (text, integers, booleans, nulls, dates, datetimes, UUIDs) is written once
    # by orjson: those bytes are hashed as they are, and the page is parsed back in one call
    # for the canonical fields (no per-row re-encoding, no per-row parse).
    encoded = _encode_plain(rows)
    plain = _decode_plain(encoded)
    records: list[Record] = []
    append = records.append
    sha256 = hashlib.sha256
    new_provenance = Provenance.__new__
    new_record = Record.__new__
    set_dict, set_fields_set, set_extra, set_private = _SLOT_SETTERS
    # Frozen models never add to their fields-set, so one set can serve every record.
    provenance_fields = set(_PROVENANCE_FIELDS)
    redacted_provenance_fields = set(_REDACTED_PROVENANCE_FIELDS)
    record_fields = {"provenance"}
    # A provenance's facts before its row's: every record's start as a copy of these.
    unset: dict[str, Any] = {
        "source": source,
        "row_id": None,
        "row_hash": None,
        "retrieved_at": retrieved_at,
        "raw_row": None,
        "relevance": None,
        "redacted": None,
        "source_hash": None,
    }
    # What ``model_construct`` does for models without aliases, private attributes or
    # validators, minus its per-field loop (a fifth of the time; a test checks the result equals
    # a validated model): this loop is the envelope's hot path.
    for row, data in zip(rows, encoded, strict=True):
        related: dict[str, list[Record]] | None = None
        truncated: list[str] | None = None
        if data is not None:
            fields: _ReadOnlyFields = _ScalarFields(next(plain))
            digest = sha256(data).hexdigest()
        else:
            kinds: set[type] | None = set(map(type, row.values()))
            if RelatedRows in kinds:  # type: ignore[operator]
                related, truncated = _related(row, retrieved_at, include_raw)
                row = {k: v for k, v in row.items() if type(v) is not RelatedRows}
                kinds = None
            fields, digest = _canonical_and_hash(row, kinds)
        # A plain dict carries no redaction note (a failed getattr costs an exception).
        note = None if type(row) is dict else getattr(row, "redaction", None)
        facts = unset.copy()  # a copy and two stores: half the cost of a dict display
        facts["row_id"] = fields.get("id")
        facts["row_hash"] = digest
        if include_raw:
            facts["raw_row"] = _raw_row(row)
        if note is not None:
            facts.update(_redaction_fields(note))
        provenance = new_provenance(Provenance)
        set_dict(provenance, facts)
        set_fields_set(
            provenance, provenance_fields if note is None else redacted_provenance_fields
        )
        set_extra(provenance, None)
        set_private(provenance, None)
        record = new_record(Record)
        set_dict(
            record, {"provenance": provenance, "related": related, "related_truncated": truncated}
        )
        # As after validation, extra fields count as set (``exclude_unset`` keeps them).
        fields_set = record_fields.union(fields)
        if related is not None:
            fields_set.add("related")
            if truncated is not None:
                fields_set.add("related_truncated")
        set_fields_set(record, fields_set)
        set_extra(record, fields)
        set_private(record, None)
        append(record)
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
