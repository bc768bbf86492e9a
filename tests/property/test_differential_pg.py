"""Differential test: random tables and queries give identical pages on memory and PostgreSQL.

Where the two cannot agree, the strategies are constrained, and this is why:

* Text ordering and ``gt``/``lt`` on text follow the database's collation; the test database uses
  ``C.UTF-8`` (code-point order, as Python compares ``str``). Under a linguistic collation
  (``en_US``...) order on text columns differs from the memory backend; docs say so.
* ``icontains``/``ilike`` fold case per character on PostgreSQL, per string in Python. The two
  disagree only on characters whose lower case is context-dependent or longer than one
  character (Greek final sigma, dotted capital I ``İ``), which the alphabet leaves out.
* Values always have the column's type: a wrong-typed value is a typed error on PostgreSQL
  (tested elsewhere) and simply matches nothing in memory.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from persistence import (
    Filter,
    MemoryStore,
    Op,
    Order,
    PersistenceAgent,
    ReadOnlyPersistenceFacade,
    create_persistence_agent,
    create_read_only_facade,
)
from tests.conftest import PostgresDatabase

pytestmark = pytest.mark.postgres

# Mixed case, unicode that folds one-to-one, and every character with a meaning somewhere:
# LIKE wildcards and escape, PostgREST's wildcard, quotes, separators.
ALPHABET = "aAbBzZ09 éÉüÜñÑжЖωΩ中😀%_\\*'\".,:()-"
TEXT_COLUMNS = ("email", "company_name", "status")
TIME_BASE = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)

texts = st.text(alphabet=ALPHABET, max_size=6)
scores = st.integers(min_value=-3, max_value=3)
times = st.integers(min_value=0, max_value=5).map(lambda h: TIME_BASE + dt.timedelta(hours=h))
ROW = st.fixed_dictionaries(
    {
        "email": st.none() | texts,
        "company_name": st.none() | texts,
        "status": st.none() | st.sampled_from(["new", "New", "won", "ÉTÉ", "été", ""]),
        "score": st.none() | scores,
        "created_at": st.none() | times,
    }
)
COLUMN_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "email": texts,
    "company_name": texts,
    "status": texts,
    "score": scores,
    "created_at": times,
    "id": st.integers(min_value=0, max_value=12),
}
COMPARISONS = (Op.EQ, Op.NEQ, Op.GT, Op.GTE, Op.LT, Op.LTE)


@st.composite
def filters(draw: st.DrawFn) -> Filter:
    column = draw(st.sampled_from(sorted(COLUMN_VALUES)))
    ops = [*COMPARISONS, Op.IN, Op.IS_NULL]
    if column in TEXT_COLUMNS:
        ops += [Op.ICONTAINS, Op.ILIKE]
    op = draw(st.sampled_from(ops))
    values = COLUMN_VALUES[column]
    if op is Op.IS_NULL:
        return Filter(column, op, draw(st.booleans()))
    if op is Op.IN:
        return Filter(column, op, draw(st.lists(values, min_size=1, max_size=4)))
    if op is Op.ILIKE:
        pattern = draw(st.text(alphabet=ALPHABET + "%%__", max_size=6))
        if (len(pattern) - len(pattern.rstrip("\\"))) % 2:
            pattern += "\\"  # a lone trailing escape is refused by Filter; escape it
        return Filter(column, op, pattern)
    return Filter(column, op, draw(values))


QUERY = st.fixed_dictionaries(
    {
        "filters": st.lists(filters(), max_size=3),
        "order": st.lists(
            st.builds(Order, st.sampled_from(sorted(COLUMN_VALUES)), st.booleans()), max_size=2
        ),
        "limit": st.none() | st.integers(min_value=0, max_value=8),
        "offset": st.integers(min_value=0, max_value=8),
    }
)


@pytest.fixture(scope="module")
def pg(
    postgres_db: PostgresDatabase,
) -> Iterator[tuple[PostgresDatabase, PersistenceAgent, ReadOnlyPersistenceFacade]]:
    """A writer (read-write role) and a reader (least-privilege role), kept for the module."""
    with (
        create_persistence_agent(kind="postgres", dsn=postgres_db.writer_dsn) as writer,
        create_read_only_facade(kind="postgres", dsn=postgres_db.reader_dsn) as reader,
    ):
        # Open both pools now: a pool connecting in the background draws from the global
        # ``random`` (jitter), which hypothesis rightly reports when it happens mid-example.
        writer.count("leads")
        reader.count("leads")
        yield postgres_db, writer, reader
    postgres_db.truncate()


class TestDifferentialMemoryVsPostgres:
    @given(rows=st.lists(ROW, max_size=12), queries=st.lists(QUERY, min_size=1, max_size=6))
    def test_same_pages_and_counts(
        self,
        pg: tuple[PostgresDatabase, PersistenceAgent, ReadOnlyPersistenceFacade],
        rows: list[dict[str, Any]],
        queries: list[dict[str, Any]],
    ) -> None:
        """Every query returns the same rows, in the same order, and the same total."""
        database, writer, reader = pg
        database.truncate()
        store = MemoryStore()
        memory = create_read_only_facade(kind="memory", store=store)
        create_persistence_agent(kind="memory", store=store).batch("leads", rows)
        if rows:
            writer.batch("leads", rows)
        for query in queries:
            note(repr(query))
            got = reader.read("leads", **query)
            want = memory.read("leads", **query)
            assert got.rows == want.rows
            assert got.total_count == want.total_count
            assert reader.count("leads", query["filters"]) == want.total_count
