"""Differential test: random data, filters, groupings and metrics give the same aggregates on
memory, PostgreSQL and the PostgREST emulator.

The constraints of ``test_differential_pg`` hold here too (text order is the code-point order the
test database's ``C.UTF-8`` collation and ``COLLATE "C"`` give; ``numeric(12, 2)`` values have
two decimals; uuid keys are written explicitly). ``count_distinct``, which PostgREST has no
function for, is counted from its grouped pairs over PostgREST and compared like the rest. Floats
would be compared approximately, but neither schema has a float column.
"""

from __future__ import annotations

import decimal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from persistence import (
    AggregateResult,
    MemoryStore,
    PersistenceAgent,
    ReadOnlyPersistenceFacade,
    create_persistence_agent,
    create_read_only_facade,
)
from persistence.aggregate import DEFAULT_GROUP_LIMIT, numeric_quotient
from persistence.schema import SUPABASE_STYLE
from tests.conftest import PostgresDatabase
from tests.property.test_differential_pg import (
    ROW,
    TYPED_ROW,
    filters,
    typed_filters,
)
from tests.support.postgrest import BASE_URL, PostgrestEmulator, fake_key

pytestmark = pytest.mark.postgres

REFERENCE_GROUPS = ("status", "score", "created_at", "email")
REFERENCE_METRICS = (
    "count",
    "count_distinct:email",
    "count_distinct:score",
    "sum:score",
    "avg:score",
    "min:score",
    "max:score",
    "min:status",
    "max:email",
    "min:created_at",
    "max:id",
    "avg:id",
    "sum:id",
)
TYPED_GROUPS = ("status", "is_qualified", "client_id", "next_follow_up", "score", "deal_value")
TYPED_METRICS = (
    "count",
    "count_distinct:client_id",
    "count_distinct:is_qualified",
    "sum:score",
    "sum:employee_count",
    "sum:deal_value",
    "avg:score",
    "avg:employee_count",
    "avg:deal_value",
    "min:deal_value",
    "max:next_follow_up",
    "min:last_contacted_at",
    "max:created_at",
    "min:email",
)


def aggregates(groups: tuple[str, ...], metrics: tuple[str, ...], flt: Any) -> Any:
    return st.fixed_dictionaries(
        {
            "filters": st.lists(flt, max_size=2),
            "group_by": st.lists(st.sampled_from(groups), max_size=3, unique=True),
            "metrics": st.lists(st.sampled_from(metrics), min_size=1, max_size=4, unique=True),
            "limit": st.none() | st.integers(min_value=1, max_value=4),
        }
    )


def _emulated(store: MemoryStore) -> tuple[ReadOnlyPersistenceFacade, httpx.Client]:
    http = httpx.Client(transport=PostgrestEmulator(store, aggregates=True).transport())
    facade = create_read_only_facade(
        kind="supabase", url=BASE_URL, key=fake_key(), http_client=http, sleep=lambda _: None
    )
    return facade, http


@contextmanager
def _loaded(
    pg: tuple[PostgresDatabase, PersistenceAgent, ReadOnlyPersistenceFacade],
    store: MemoryStore,
    rows: list[dict[str, Any]],
) -> Iterator[tuple[ReadOnlyPersistenceFacade, ReadOnlyPersistenceFacade]]:
    """``rows`` alone in PostgreSQL's ``leads`` and in ``store``; memory's reader and PostgREST's
    over ``store``."""
    database, writer, _ = pg
    database.truncate()
    create_persistence_agent(kind="memory", store=store).batch("leads", rows)
    if rows:
        # A lead's client must exist (leads.client_id is a foreign key).
        database.add_clients(row.get("client_id") for row in rows)
        writer.batch("leads", rows)
    emulated, http = _emulated(store)
    with http:
        yield create_read_only_facade(kind="memory", store=store), emulated


def _groups(result: AggregateResult) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [(dict(g.keys), dict(g.metrics)) for g in result.groups]


def _same_exactly(got: AggregateResult, want: AggregateResult) -> None:
    """Equal groups, and every Decimal with the same digits (its canonical text)."""
    assert got.groups == want.groups
    assert got.capped == want.capped
    assert got.matched == want.matched
    for mine, theirs in zip(got.groups, want.groups, strict=True):
        for key, value in mine.metrics.items():
            other = theirs.metrics[key]
            assert type(value) is type(other), key
            if isinstance(value, decimal.Decimal):
                assert str(value) == str(other), key


def _compare(
    reader: ReadOnlyPersistenceFacade,
    memory: ReadOnlyPersistenceFacade,
    emulated: ReadOnlyPersistenceFacade,
    query: dict[str, Any],
) -> None:
    note(repr(query))
    want = memory.aggregate("leads", **query)
    got = reader.aggregate("leads", **query)
    _same_exactly(got, want)
    assert got.total_groups == want.total_groups
    over_http = emulated.aggregate("leads", **query)
    assert _groups(over_http) == _groups(want)
    assert (over_http.capped, over_http.matched) == (want.capped, want.matched)
    assert over_http.total_groups in (None, want.total_groups)


class TestAggregateDifferential:
    @given(
        rows=st.lists(ROW, max_size=14),
        queries=st.lists(
            aggregates(REFERENCE_GROUPS, REFERENCE_METRICS, filters()), min_size=1, max_size=5
        ),
    )
    def test_reference_schema(
        self,
        pg: tuple[PostgresDatabase, PersistenceAgent, ReadOnlyPersistenceFacade],
        rows: list[dict[str, Any]],
        queries: list[dict[str, Any]],
    ) -> None:
        """Every aggregate has the same groups, in the same order, with values of the same type
        and digits, the same cap and the same row count on all three backends."""
        reader = pg[2]
        with _loaded(pg, MemoryStore(), rows) as (memory, emulated):
            for query in queries:
                _compare(reader, memory, emulated, query)

    @given(
        rows=st.lists(TYPED_ROW, max_size=12, unique_by=lambda row: row["id"]),
        queries=st.lists(
            aggregates(TYPED_GROUPS, TYPED_METRICS, typed_filters()), min_size=1, max_size=5
        ),
    )
    def test_every_column_kind(
        self,
        pg_typed: tuple[PostgresDatabase, PersistenceAgent, ReadOnlyPersistenceFacade],
        rows: list[dict[str, Any]],
        queries: list[dict[str, Any]],
    ) -> None:
        """On the uuid-keyed schema (bigint, numeric, boolean, date, timestamps, uuid) too."""
        reader = pg_typed[2]
        with _loaded(pg_typed, MemoryStore(schema=SUPABASE_STYLE.types), rows) as (
            memory,
            emulated,
        ):
            for query in queries:
                _compare(reader, memory, emulated, query)


def _distinct_everywhere(
    reader: ReadOnlyPersistenceFacade,
    memory: ReadOnlyPersistenceFacade,
    emulated: ReadOnlyPersistenceFacade,
    rows: list[dict[str, Any]],
    asked: list[tuple[str, int | None]],
) -> None:
    """PostgreSQL's own statement, memory's and PostgREST's grouping give one answer, and it is
    the data's: its distinct non-NULL values, or capped. (The awaited twin runs the same
    statement: tests/integration/test_postgres_distinct_values.py.)"""
    for column, limit in asked:
        note(f"{column=} {limit=}")
        want = memory.distinct_values("leads", column, limit=limit)
        present = {(type(v) is bool, v) for row in rows if (v := row.get(column)) is not None}
        assert want.capped == (len(present) > (limit or DEFAULT_GROUP_LIMIT))
        if not want.capped:
            assert sorted(map(repr, want.values)) == sorted(repr(v) for _, v in present)
        assert reader.distinct_values("leads", column, limit=limit) == want
        assert emulated.distinct_values("leads", column, limit=limit) == want


def distinct_asks(groups: tuple[str, ...]) -> Any:
    limits = st.none() | st.integers(min_value=1, max_value=4)
    return st.lists(st.tuples(st.sampled_from(groups), limits), min_size=1, max_size=4)


class TestDistinctValuesDifferential:
    @given(rows=st.lists(ROW, max_size=14), asked=distinct_asks(REFERENCE_GROUPS))
    def test_reference_schema(
        self,
        pg: tuple[PostgresDatabase, PersistenceAgent, ReadOnlyPersistenceFacade],
        rows: list[dict[str, Any]],
        asked: list[tuple[str, int | None]],
    ) -> None:
        with _loaded(pg, MemoryStore(), rows) as (memory, emulated):
            _distinct_everywhere(pg[2], memory, emulated, rows, asked)

    @given(
        rows=st.lists(TYPED_ROW, max_size=12, unique_by=lambda row: row["id"]),
        asked=distinct_asks(TYPED_GROUPS),
    )
    def test_every_column_kind(
        self,
        pg_typed: tuple[PostgresDatabase, PersistenceAgent, ReadOnlyPersistenceFacade],
        rows: list[dict[str, Any]],
        asked: list[tuple[str, int | None]],
    ) -> None:
        """Booleans, uuids, dates, numerics and the enum-typed status, in key order."""
        with _loaded(pg_typed, MemoryStore(schema=SUPABASE_STYLE.types), rows) as (
            memory,
            emulated,
        ):
            _distinct_everywhere(pg_typed[2], memory, emulated, rows, asked)


class TestNumericQuotient:
    @given(
        values=st.lists(
            st.integers(min_value=-(10**20), max_value=10**20)
            | st.decimals(min_value=-(10**9), max_value=10**9, places=3, allow_nan=False),
            min_size=1,
            max_size=30,
        )
    )
    def test_avg_digits_match_postgresql(
        self, postgres_db: PostgresDatabase, values: list[int | decimal.Decimal]
    ) -> None:
        """avg over numeric values has PostgreSQL's exact digits (scale and rounding)."""
        total = sum((decimal.Decimal(v) for v in values), decimal.Decimal(0))
        (server,) = postgres_db.execute(
            "SELECT avg(v) FROM unnest(%s::numeric[]) AS u(v)", ([str(v) for v in values],)
        )[0]
        assert isinstance(server, decimal.Decimal)
        assert str(numeric_quotient(total, len(values))) == str(server)
