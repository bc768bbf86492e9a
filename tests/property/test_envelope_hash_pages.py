"""Envelope pages: every record's ``row_hash`` is the reference definition's digest of its row,
whatever mix of values the page holds, and building a page gives the records one row at a time
would; the JSON form of fixed pages stays byte for byte what it was."""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import json
import math
import uuid
from typing import Any
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from persistence import RelatedRows
from rag_agent.envelope import Envelope, Metadata, build_records, row_hash

NOW = dt.datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=dt.UTC)


def reference_value(value: Any) -> Any:
    """The canonical JSON form of one value as the design defines it, written out on its own."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, uuid.UUID | decimal.Decimal):
        return str(value)
    if isinstance(value, dict):
        return {k: reference_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [reference_value(v) for v in value]
    raise AssertionError(f"no reference form for {value!r}")


def reference_fields(row: dict[str, Any]) -> dict[str, Any]:
    return {k: reference_value(v) for k, v in row.items() if k != "provenance"}


def reference_hash(row: dict[str, Any]) -> str:
    """SHA-256 of ``json.dumps(fields, sort_keys, compact, ensure_ascii=False)`` in UTF-8."""
    text = json.dumps(
        reference_fields(row), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# Offsets with seconds (orjson would write them to the minute) next to ordinary ones.
fixed_zones = st.builds(
    dt.timezone, st.integers(-86399, 86399).map(lambda s: dt.timedelta(seconds=s))
)
zones = st.one_of(st.none(), st.just(dt.UTC), fixed_zones, st.timezones())
texts = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=12)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | texts,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(texts, children, max_size=3),
    max_leaves=8,
)
# What a database row holds: the values orjson writes exactly (the page's fast path) ...
exact_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    texts,
    st.dates(),
    st.uuids(),
    st.datetimes(timezones=st.one_of(st.none(), st.just(dt.UTC))),
)
# ... and everything else the canonical form covers.
any_values = st.one_of(
    exact_values,
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(),
    st.just(-0.0),
    st.decimals(allow_nan=False, allow_infinity=False),
    st.datetimes(timezones=zones),
    st.times(timezones=st.one_of(st.none(), fixed_zones)),
    json_values,
)
keys = st.text(max_size=6)


def pages(values: st.SearchStrategy[Any]) -> st.SearchStrategy[list[dict[str, Any]]]:
    return st.lists(st.dictionaries(keys, values, max_size=8), max_size=6)


some_pages = st.one_of(pages(exact_values), pages(any_values))


def _same_record(record: Any, alone: Any) -> bool:
    return (
        list((record.model_extra or {}).items()) == list((alone.model_extra or {}).items())
        and record.provenance == alone.provenance
        and type(record.model_extra) is type(alone.model_extra)
        and record.model_fields_set == alone.model_fields_set
    )


class TestPageHashes:
    """The page's fast path and the reference path give the reference digest."""

    @settings(max_examples=300, deadline=None)
    @given(some_pages)
    def test_every_record_carries_the_reference_hash(self, rows: list[dict[str, Any]]) -> None:
        """uuid, Decimal, datetimes in any zone, dates, times, None, nested JSON, unicode,
        floats (-0.0, non-finite, 1e16), big integers: the digest is the definition's."""
        records = build_records(rows, source="persistence.leads", retrieved_at=NOW)
        assert len(records) == len(rows)
        for row, record in zip(rows, records, strict=True):
            expected = reference_hash(row)
            assert record.provenance.row_hash == expected
            assert row_hash(row) == expected
            assert dict(record.model_extra or {}) == reference_fields(row)
            assert record.provenance.row_id == reference_fields(row).get("id")

    @settings(max_examples=200, deadline=None)
    @given(some_pages)
    def test_a_page_builds_as_its_rows_alone(self, rows: list[dict[str, Any]]) -> None:
        """Built as a page or one row at a time, a record is the same: fields in the same
        order, the same provenance and fields-set, and the same JSON form."""
        records = build_records(rows, source="persistence.leads", retrieved_at=NOW)
        for row, record in zip(rows, records, strict=True):
            (alone,) = build_records([row], source="persistence.leads", retrieved_at=NOW)
            assert _same_record(record, alone)
        metadata = Metadata(
            source="persistence.leads", query_filters=None, retrieved_at=NOW, total_count=0
        )
        page = Envelope(metadata=metadata, records=records).to_json()["records"]
        singles = [
            Envelope(metadata=metadata, records=[record]).to_json()["records"][0]
            for record in (
                build_records([row], source="persistence.leads", retrieved_at=NOW)[0]
                for row in rows
            )
        ]
        assert json.dumps(page) == json.dumps(singles)

    @settings(max_examples=100, deadline=None)
    @given(pages(exact_values), st.integers(0, 5), fixed_zones)
    def test_one_zone_with_seconds_takes_the_reference_path(
        self, rows: list[dict[str, Any]], where: int, zone: dt.tzinfo
    ) -> None:
        """One datetime whose offset has seconds, anywhere in an otherwise plain page, keeps
        its seconds in the fields and the hash."""
        rows = [*rows, {"id": 1}]
        stamp = dt.datetime(1900, 1, 1, tzinfo=zone)
        rows[where % len(rows)]["at"] = stamp
        records = build_records(rows, source="persistence.leads", retrieved_at=NOW)
        for row, record in zip(rows, records, strict=True):
            assert record.provenance.row_hash == reference_hash(row)
        assert (records[where % len(rows)].model_extra or {})["at"] == stamp.isoformat()


def _leads(count: int) -> list[dict[str, Any]]:
    """A page as a backend returns it: integers, text, nulls, UTC datetimes, dates, UUIDs."""
    names = ("Ada", "Grace", "Zoë", "Søren", "李", 'O"Brien')
    return [
        {
            "id": n,
            "client_id": n % 7,
            "email": f"{names[n % 6].lower()}.{n}@example.com",
            "first_name": names[n % 6],
            "phone": None if n % 3 else f"+1-555-{n:04d}",
            "active": n % 2 == 0,
            "score": n * 37 % 101,
            "created_at": NOW - dt.timedelta(minutes=n, microseconds=n * 11),
            "born": dt.date(1960 + n % 40, 1 + n % 12, 1 + n % 28),
            "key": uuid.UUID(int=n * 2**64 + n),
        }
        for n in range(1, count + 1)
    ]


def _fixed_pages() -> dict[str, list[dict[str, Any]]]:
    amsterdam = ZoneInfo("Europe/Amsterdam")
    return {
        "leads": _leads(40),
        "mixed": [
            {
                "id": 7,
                "email": "zoë@exämple.io",
                "score": 3.5,
                "price": decimal.Decimal("10.50"),
                "created_at": NOW,
                "birthday": dt.date(1990, 5, 17),
                "key": uuid.UUID("3f2a1b4c-1234-4abc-8def-0123456789ab"),
                "phone": None,
            },
            {"z": 1, "a": "x", "m": None, "t": dt.time(12, 30), "n": -0.0},
            {"z": 1, "a": "x", "when": dt.datetime(1850, 1, 1, tzinfo=amsterdam)},
            {"big": 2**70, "b": True},
            {"nested": {"b": [1, 2, {"c": None}], "a": "é"}, "id": "k"},
            {"id": 3, "provenance": {"x": 1}, "b": "c"},
            {"id": 9, "when": dt.datetime(2020, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=-3)))},
            {"id": 10, "f": float("inf"), "g": float("nan"), "by": b"\x00\xff"},
            {},
        ],
        "related": [
            {
                "id": 1,
                "name": "A",
                "leads": RelatedRows(
                    [{"id": 5, "email": "e", "at": NOW}, {"id": 6, "score": 1.5}],
                    table="leads",
                    cut=True,
                ),
            },
            {"id": 2, "name": "B", "leads": RelatedRows([], table="leads")},
        ],
    }


# SHA-256 of json.dumps(envelope.to_json(), ensure_ascii=False) for each fixed page, as written
# before the page fast path (records built one row at a time): the JSON form, key order
# included, must not change.
GOLDEN = {
    "leads": "3eec4c0237fe9c1fadb1ff0dfa16b78a31f2eeb0834eca092fc3dffe2398b232",
    "mixed": "f737a588e2e586765d3300470b3cb573f3bffc3e157c91ead855386e45a79c0f",
    "related": "ff27245d05675af1e5ac76d7929f6ae805a4e006f280a8100beee1454fbf6eb5",
    "leads+raw": "bcd452242ac6c43617c371a0e031c6985e3e528a8059f14f64776d9705ffb5ef",
    "mixed+raw": "b6acc1ea1ac9d19e89f4d392991ef3cb72d582b727376881f30727896242aa15",
    "related+raw": "934067f397f360ce58e308dbf1f0c0b36f30c832b9cf7a7ba210758cc1161c0c",
}


def _written(rows: list[dict[str, Any]], include_raw: bool) -> str:
    records = build_records(
        rows, source="persistence.leads", retrieved_at=NOW, include_raw=include_raw
    )
    metadata = Metadata(
        source="persistence.leads", query_filters=None, retrieved_at=NOW, total_count=len(rows)
    )
    text = json.dumps(Envelope(metadata=metadata, records=records).to_json(), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_fixed_pages_write_the_same_json() -> None:
    """Fixed pages (generated leads; a mix of every kind of value; related rows), with and
    without raw rows, are written exactly as before."""
    written = {
        name + ("+raw" if raw else ""): _written(rows, raw)
        for raw in (False, True)
        for name, rows in _fixed_pages().items()
    }
    assert written == GOLDEN
