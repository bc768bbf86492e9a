"""The envelope models built without a validation pass (rag_agent.envelope.checked_models) are
the models validation builds from the same values: equal, with the same fields set and the same
JSON; and values validation would change or refuse are still validated (coerced, or refused
with the same error)."""

from __future__ import annotations

import datetime as dt
import enum
import json
import uuid
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from rag_agent.envelope import AppliedFilter, BackendInfo, Envelope, ErrorInfo, Metadata
from rag_agent.envelope.checked_models import applied_filter_of, envelope_of, metadata_of


class _Text(enum.StrEnum):
    """A str subclass: validation turns it into a plain str; the direct path must not keep it."""

    LEADS = "persistence.leads"


class _Count(int):
    """An int subclass, as a numpy-like integer would be."""


_DATETIMES = st.datetimes(
    min_value=dt.datetime(2000, 1, 1),
    max_value=dt.datetime(2100, 1, 1),
    timezones=st.sampled_from([dt.UTC, ZoneInfo("Europe/Paris"), dt.timezone(dt.timedelta(0))]),
) | st.datetimes(min_value=dt.datetime(2000, 1, 1), max_value=dt.datetime(2100, 1, 1))
_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.text(max_size=8), st.uuids()
)
_OPS = st.sampled_from(["eq", "ieq", "in", "icontains", "EQ", "like", ""])
_SOURCES = st.sampled_from(["rules", "llm", "tool", "reformulation", "context", "model", ""])


def _counts(least: int) -> tuple[st.SearchStrategy[Any], st.SearchStrategy[Any]]:
    valid = st.integers(least, 10**6)
    odd = st.one_of(
        st.integers(least - 2, least - 1),
        st.booleans(),
        st.builds(_Count, st.integers(least, 9)),
        st.sampled_from(["3", 2.0, 2.5]),
    )
    return valid, odd


@st.composite
def applied(draw: st.DrawFn) -> tuple[Any, Any, Any, Any]:
    column = draw(st.sampled_from(["email", "id", "score"]))
    if draw(st.integers(0, 5)) == 0:
        column = draw(st.sampled_from([0, _Text.LEADS]))
    value = draw(st.one_of(_SCALARS, st.lists(_SCALARS, max_size=3)))
    return column, draw(_OPS), value, draw(_SOURCES)


def _filters() -> tuple[st.SearchStrategy[Any], st.SearchStrategy[Any]]:
    one = st.builds(
        lambda value: AppliedFilter(column="email", op="eq", value=value, source="rules"),
        _SCALARS,
    )
    odd = [{"column": "email", "op": "eq", "value": 1, "source": "rules"}]
    return st.lists(one, max_size=3), st.sampled_from([odd, (), [None]])


#: Per field of ``Metadata``: values of the exact types the field declares (the direct path),
#: and values validation changes or refuses (a subclass, a string, out of bounds, a dict for a
#: model, a value outside a literal).
_FIELDS: dict[str, tuple[st.SearchStrategy[Any], st.SearchStrategy[Any]]] = {
    "source": (st.sampled_from(["persistence.leads", "agent"]), st.sampled_from([_Text.LEADS, 1])),
    "query_filters": (
        st.dictionaries(st.sampled_from(["email", "id"]), _SCALARS, max_size=2),
        st.sampled_from([{1: "x"}, [("a", 1)]]),
    ),
    "retrieved_at": (_DATETIMES, st.sampled_from(["2026-01-02T03:04:05Z", dt.date(2026, 1, 2)])),
    "total_count": _counts(0),
    "limit": _counts(1),
    "offset": _counts(0),
    "next_offset": _counts(0),
    "has_more": (st.booleans(), st.sampled_from([1, 0, "true"])),
    "cache": (st.sampled_from(["hit", "miss"]), st.sampled_from(["warm", _Text.LEADS])),
    "fallback": (
        st.sampled_from(["reformulation", "agent", "disabled", "suppressed"]),
        st.just("x"),
    ),
    "count_only": (st.booleans(), st.sampled_from(["yes", 1])),
    "related_capped": (st.booleans(), st.just(0)),
    "total_exact": (st.booleans(), st.sampled_from(["no", 0])),
    "backend": (
        st.builds(BackendInfo, kind=st.just("memory"), database=st.none() | st.just("db")),
        st.just({"kind": "postgres"}),
    ),
    "filters": _filters(),
    # Fields the direct path does not check: always validated.
    "error": (st.nothing(), st.just(ErrorInfo(type="X", message="m"))),
    "count_basis": (st.nothing(), st.just("rows")),
    "unknown": (st.nothing(), st.just(1)),
}
_REQUIRED = ("source", "query_filters", "retrieved_at", "total_count")


@st.composite
def metadata_values(draw: st.DrawFn) -> dict[str, Any]:
    """Keyword arguments of ``Metadata``, each field's value of its exact type but at most one,
    which validation changes or refuses; now and then a required field left out."""
    checked = sorted(name for name, (valid, _) in _FIELDS.items() if not valid.is_empty)
    optional = sorted(set(checked) - set(_REQUIRED))
    names = [*_REQUIRED, *draw(st.sets(st.sampled_from(optional)))]
    unusual = draw(st.none() | st.sampled_from(checked) | st.sampled_from(sorted(_FIELDS)))
    values: dict[str, Any] = {}
    for name in names:
        nullable = name not in _REQUIRED or name == "query_filters"
        if nullable and draw(st.integers(0, 5)) == 0:
            values[name] = None
        elif name != unusual:
            values[name] = draw(_FIELDS[name][0])
    if unusual is not None:
        values[unusual] = draw(_FIELDS[unusual][1])
    if draw(st.integers(0, 15)) == 0:
        del values[draw(st.sampled_from(_REQUIRED))]
    elif draw(st.integers(0, 15)) == 0:  # a required field None (only query_filters may be)
        values[draw(st.sampled_from(_REQUIRED))] = None
    return values


def _same(direct: Any, validated: Any) -> None:
    assert type(direct) is type(validated)
    assert direct == validated
    assert direct.model_fields_set == validated.model_fields_set
    assert direct.model_dump(mode="json") == validated.model_dump(mode="json")
    assert direct.model_dump() == validated.model_dump()
    # The same order too: a caller's json.dumps of the dump writes the keys in it.
    assert list(direct.__dict__) == list(validated.__dict__)
    assert direct.model_dump_json() == validated.model_dump_json()
    for name in type(validated).model_fields:  # the same types, not just equal values
        assert type(getattr(direct, name)) is type(getattr(validated, name)), name


@settings(max_examples=1500, deadline=None)
@given(metadata_values())
def test_metadata_is_the_validated_model(values: dict[str, Any]) -> None:
    try:
        validated = Metadata(**values)
    except ValidationError as error:
        with pytest.raises(ValidationError) as raised:
            metadata_of(dict(values))
        assert raised.value.errors() == error.errors()
        return
    direct = metadata_of(dict(values))
    _same(direct, validated)
    envelope = envelope_of(direct, [])
    expected = Envelope.model_construct(metadata=validated, records=[])
    _same(envelope, expected)
    written = json.dumps(envelope.to_json(), default=str)
    assert written == json.dumps(expected.to_json(), default=str)
    with pytest.raises(ValidationError):  # frozen, as a validated model is
        direct.total_count = 1  # type: ignore[misc]


@settings(max_examples=300, deadline=None)
@given(applied())
def test_applied_filter_is_the_validated_model(fields: tuple[Any, Any, Any, Any]) -> None:
    column, op, value, source = fields
    asked = {"column": column, "op": op, "value": value, "source": source}
    try:
        validated = AppliedFilter.model_validate(asked)
    except ValidationError as error:
        with pytest.raises(ValidationError) as raised:
            applied_filter_of(column, op, value, source)
        assert raised.value.errors() == error.errors()
        return
    _same(applied_filter_of(column, op, value, source), validated)


def test_no_optional_metadata_default_is_shared_state() -> None:
    """The direct path starts every model from the same defaults: each must be ``None`` (a
    default made by a factory would be one object shared by every envelope)."""
    for name, info in Metadata.model_fields.items():
        if not info.is_required():
            assert info.default is None and info.default_factory is None, name


def test_a_lookup_metadata_takes_the_direct_path() -> None:
    """The values of a plain lookup's metadata are all of the checked kinds (else the direct
    path would never be taken and this module would buy nothing)."""
    values = {
        "source": "persistence.leads",
        "query_filters": {"id": uuid.UUID(int=7)},
        "retrieved_at": dt.datetime(2026, 1, 2, tzinfo=dt.UTC),
        "total_count": 1,
        "limit": 50,
        "offset": 0,
        "cache": "miss",
        "has_more": False,
        "filters": [applied_filter_of("id", "eq", uuid.UUID(int=7), "rules")],
        "backend": BackendInfo(kind="memory"),
    }
    direct = metadata_of(dict(values))
    assert type(direct.__dict__["query_filters"]) is dict
    assert direct.query_filters is values["query_filters"]  # kept, not copied: no validation ran
    _same(direct, Metadata(**values))
