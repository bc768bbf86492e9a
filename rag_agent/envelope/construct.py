"""The envelope's ``Metadata`` and ``Envelope`` built from values a run made, without pydantic
validating them again: :func:`metadata_of` and :func:`envelope_of`.

Validating a model of values that are already of the field's exact type changes nothing but
copies the top-level dicts and lists; it costs two validations per answer, about a tenth of a
lookup's Python. Here the values are checked for exactly the types and bounds validation would
accept without conversion, and the model is made as validation makes it: every field in
declaration order, top-level dicts and lists copied, the given fields as the fields set. Any
other value (a dict for a nested model, a key this module does not know) takes the validated
constructor, so no value skips a check it needs. A test runs both on the labelled questions,
fallback and error envelopes, on memory and PostgreSQL, and holds them to the same JSON bytes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from rag_agent.envelope import Envelope
from rag_agent.envelope.models import AppliedFilter, BackendInfo, ErrorInfo, Metadata, Record

__all__ = ["envelope_of", "metadata_of", "plain_metadata"]

# The slots pydantic's own construction sets (as ``model_construct`` does).
_SETTERS = tuple(
    BaseModel.__dict__[name].__set__
    for name in (
        "__dict__",
        "__pydantic_fields_set__",
        "__pydantic_extra__",
        "__pydantic_private__",
    )
)


def _count(least: int) -> Callable[[Any], bool]:
    return lambda value: type(value) is int and value >= least


def _optional(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: value is None or check(value)


def _of_type(kind: type) -> Callable[[Any], bool]:
    return lambda value: type(value) is kind


def _filters_shown(value: Any) -> bool:
    return type(value) is dict and all(type(key) is str for key in value)


def _applied(value: Any) -> bool:
    return type(value) is list and all(type(item) is AppliedFilter for item in value)


#: The metadata fields taken without validation, and what their values must be for validation
#: to return them unchanged (bar the copy of a top-level dict or list).
_PLAIN: dict[str, Callable[[Any], bool]] = {
    "source": _of_type(str),
    "query_filters": _optional(_filters_shown),
    "retrieved_at": _of_type(dt.datetime),
    "total_count": _count(0),
    "limit": _optional(_count(1)),
    "offset": _optional(_count(0)),
    "next_offset": _optional(_count(0)),
    "has_more": _of_type(bool),
    "count_only": _of_type(bool),
    "related_capped": _of_type(bool),
    "total_exact": _of_type(bool),
    "cache": lambda value: value in ("hit", "miss") and type(value) is str,
    "filters": _applied,
    "error": _of_type(ErrorInfo),
    "backend": _of_type(BackendInfo),
}
#: Every field in declaration order, at its default: a new model's ``__dict__`` starts as a copy
#: (updating a key keeps its place, so the JSON's key order is validation's).
_TEMPLATE: dict[str, Any] = {}
for _name, _info in Metadata.model_fields.items():
    if not _info.is_required() and (_info.default is not None or _info.default_factory):
        raise TypeError(f"Metadata.{_name} defaults to something other than None")
    _TEMPLATE[_name] = None
_COPIED = ("query_filters", "filters")


def plain_metadata(values: dict[str, Any]) -> bool:
    """Whether :func:`metadata_of` takes ``values`` as they are (else it validates them)."""
    for key, value in values.items():
        check = _PLAIN.get(key)
        if check is None or not check(value):
            return False
    return True


def metadata_of(values: dict[str, Any]) -> Metadata:
    """``Metadata(**values)``, without validating again values of the exact types it takes
    unchanged (see the module docstring); anything else is validated."""
    if not plain_metadata(values):
        return Metadata(**values)
    fields = _TEMPLATE.copy()
    fields.update(values)
    for key in _COPIED:
        value = fields[key]
        if value is not None:
            fields[key] = value.copy()
    set_dict, set_fields_set, set_extra, set_private = _SETTERS
    metadata = Metadata.__new__(Metadata)
    set_dict(metadata, fields)
    set_fields_set(metadata, set(values))
    set_extra(metadata, None)
    set_private(metadata, None)
    return metadata


def envelope_of(metadata: Metadata, records: list[Record]) -> Envelope:
    """``Envelope(metadata=metadata, records=records)``, without validating again a
    ``Metadata`` and a list of ``Record`` s (the list copied, as validation copies it)."""
    if type(metadata) is not Metadata or type(records) is not list:
        return Envelope(metadata=metadata, records=records)
    for record in records:
        if type(record) is not Record:
            return Envelope(metadata=metadata, records=records)
    set_dict, set_fields_set, set_extra, set_private = _SETTERS
    envelope = Envelope.__new__(Envelope)
    set_dict(envelope, {"metadata": metadata, "records": records.copy()})
    set_fields_set(envelope, {"metadata", "records"})
    set_extra(envelope, None)
    set_private(envelope, None)
    return envelope
