"""Envelope models built from values checked here, without pydantic's validation pass.

Every run builds one :class:`~rag_agent.envelope.Metadata` and an
:class:`~rag_agent.envelope.AppliedFilter` per applied condition; pydantic's validation of them
is a few microseconds a run, a tenth of a plain lookup's Python (and ``model_construct`` is
slower still: it loops over every field in Python). The values a run gives them are almost
always of the exact types the fields declare: a ``str`` source, a non-negative ``int`` count,
a ``datetime``, a ``list`` of ``AppliedFilter`` models, ... For those, :func:`metadata_of` and
:func:`applied_filter_of` check each value's *exact* type and bounds here (what validation
would accept unchanged) and store them as validation would; any other value (a subclass, a
string for a date, an unknown key, a negative count, a nested model of another field) takes
pydantic's validation, which coerces it or raises as before. A property test holds both paths
to the same model, fields set and JSON, and to the same error.

Validation would copy a ``dict`` or ``list`` value into a new one; here the run's own container
is kept. The pipeline builds those containers for the envelope alone (the cache holds records
and totals, never metadata), so no caller can reach them through another object.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, get_args

from pydantic import BaseModel

from rag_agent.envelope import Envelope
from rag_agent.envelope.models import AppliedFilter, BackendInfo, Metadata, Record
from rag_agent.envelope.records import _SLOT_SETTERS

__all__ = ["applied_filter_of", "envelope_of", "metadata_of"]

# The setters of a model's four slots, as build_records uses them: a model made by __new__ and
# these four stores is the model validation makes from the same, already valid, values.
_SET_DICT, _SET_FIELDS_SET, _SET_EXTRA, _SET_PRIVATE = _SLOT_SETTERS

_OPS = frozenset(get_args(AppliedFilter.model_fields["op"].annotation))
_SOURCES = frozenset(get_args(AppliedFilter.model_fields["source"].annotation))
_APPLIED_FIELDS = frozenset(AppliedFilter.model_fields)
_NEW_APPLIED = AppliedFilter.__new__


def _literal(field: str) -> frozenset[str]:
    """The values of ``Metadata``'s ``Literal[...] | None`` field ``field``."""
    (literal,) = (
        arg for arg in get_args(Metadata.model_fields[field].annotation) if arg is not type(None)
    )
    return frozenset(get_args(literal))


def _count(least: int) -> Callable[[Any], bool]:
    return lambda value: type(value) is int and value >= least


# The types of a container's items as a set made in C: cheaper than a generator over them.
_STR_ONLY = frozenset({str})
_APPLIED_ONLY = frozenset({AppliedFilter})


def _str_keys(value: Any) -> bool:
    return type(value) is dict and set(map(type, value)) <= _STR_ONLY


def _applied_list(value: Any) -> bool:
    return type(value) is list and set(map(type, value)) <= _APPLIED_ONLY


def _one_of(values: frozenset[str]) -> Callable[[Any], bool]:
    return lambda value: type(value) is str and value in values


#: The fields a run's metadata usually holds, and when a value of each is one validation keeps
#: as it is. ``None`` is checked apart: each of them may be ``None`` but those required.
_CHECKS: Mapping[str, Callable[[Any], bool]] = {
    "source": lambda value: type(value) is str,
    "query_filters": _str_keys,  # dict[str, Any]: the values are kept whatever they are
    "retrieved_at": lambda value: type(value) is dt.datetime,
    "total_count": _count(0),
    "fallback": _one_of(_literal("fallback")),
    "has_more": lambda value: type(value) is bool,
    "next_offset": _count(0),
    "count_only": lambda value: type(value) is bool,
    "related_capped": lambda value: type(value) is bool,
    "total_exact": lambda value: type(value) is bool,
    "cache": _one_of(_literal("cache")),
    "limit": _count(1),
    "offset": _count(0),
    "filters": _applied_list,
    "backend": lambda value: type(value) is BackendInfo,
}
#: Required fields: ``None`` is valid only for ``query_filters`` among them.
_REQUIRED = frozenset(name for name, info in Metadata.model_fields.items() if info.is_required())
_NULLABLE_REQUIRED = frozenset({"query_filters"})
#: Every field, in the model's order: a fast-built model's state starts as each of them ``None``
#: (every optional field's default; a test keeps it so, since a default made by a factory would
#: be one object shared by every model) and takes the values in place, so its fields keep the
#: order validation gives them (the order ``model_dump`` and the JSON follow).
_FIELD_NAMES = tuple(Metadata.model_fields)
_NEW_METADATA = Metadata.__new__
_NEW_ENVELOPE = Envelope.__new__
_Model = TypeVar("_Model", bound=BaseModel)


def _checked(values: Mapping[str, Any]) -> bool:
    """Whether ``values`` are keyword arguments validation would store as they are."""
    if not values.keys() >= _REQUIRED:
        return False
    for name, value in values.items():
        check = _CHECKS.get(name)
        if check is None:
            return False
        if value is None:
            if name in _REQUIRED and name not in _NULLABLE_REQUIRED:
                return False
        elif not check(value):
            return False
    return True


def metadata_of(values: dict[str, Any]) -> Metadata:
    """``Metadata(**values)``: built directly when :func:`_checked`, else validated."""
    if not _checked(values):
        return Metadata(**values)
    state = dict.fromkeys(_FIELD_NAMES)
    state.update(values)
    return _assembled(_NEW_METADATA(Metadata), state, set(values))


def applied_filter_of(column: Any, op: Any, value: Any, source: Any) -> AppliedFilter:
    """``AppliedFilter(column=..., op=..., value=..., source=...)``: built directly when the
    column is a ``str`` and ``op`` and ``source`` are among the field's literals (``value`` is
    ``Any``: validation keeps it as it is), else validated."""
    fields = {"column": column, "op": op, "value": value, "source": source}
    if type(column) is not str or type(op) is not str or type(source) is not str:
        return AppliedFilter.model_validate(fields)
    if op not in _OPS or source not in _SOURCES:
        return AppliedFilter.model_validate(fields)
    return _assembled(_NEW_APPLIED(AppliedFilter), fields, set(_APPLIED_FIELDS))


def envelope_of(metadata: Metadata, records: list[Record]) -> Envelope:
    """``Envelope.model_construct(metadata=metadata, records=records)`` (no validation: the
    metadata was checked and the records built by build_records), without its loop over the
    fields: the same model, with both fields set."""
    state = {"metadata": metadata, "records": records}
    return _assembled(_NEW_ENVELOPE(Envelope), state, {"metadata", "records"})


def _assembled(model: _Model, state: dict[str, Any], fields_set: set[str]) -> _Model:
    """``model``, made by ``__new__``, given the slots validation would give it: ``state`` as
    its fields (in the model's order), ``fields_set``, and no extra or private values."""
    _SET_DICT(model, state)
    _SET_FIELDS_SET(model, fields_set)
    _SET_EXTRA(model, None)
    _SET_PRIVATE(model, None)
    return model
