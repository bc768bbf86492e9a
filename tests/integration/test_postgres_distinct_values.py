"""``distinct_values`` on PostgreSQL: one statement whose probe of the table's first rows spares
the grouping of a column of many values, and stays exact when the first rows mislead it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from persistence import DistinctValues, create_persistence_agent, create_read_only_facade
from persistence.backends.postgres import sql as _pg_sql
from tests.conftest import PostgresDatabase
from tests.integration.test_postgres_ieq import plan_nodes

pytestmark = pytest.mark.postgres

#: The probe reads this many rows for a limit of one.
PROBE_ROWS = 2 * _pg_sql.DISTINCT_PROBE_ROWS_PER_VALUE


@pytest.fixture
def db(postgres_clean: PostgresDatabase) -> Iterator[PostgresDatabase]:
    """Unique e-mails, and a status that is ``new`` on every row the probe reads and ``won``
    on the last row only."""
    rows: list[dict[str, Any]] = [
        {"email": f"user{i}@x.io", "status": "new"} for i in range(PROBE_ROWS * 3)
    ]
    rows.append({"email": "last@x.io", "status": "won"})
    with create_persistence_agent(kind="postgres", dsn=postgres_clean.writer_dsn) as writer:
        writer.batch("leads", rows)
    postgres_clean.execute("ANALYZE leads")
    yield postgres_clean


def test_values_past_the_probe_are_found(db: PostgresDatabase) -> None:
    """The first rows show one status; the scan still finds the second, so a limit of one is
    capped and a limit of two lists both, blocking and awaited alike."""
    with create_read_only_facade(kind="postgres", dsn=db.reader_dsn) as facade:
        assert facade.distinct_values("leads", "status", limit=1) == DistinctValues(
            "status", (), True
        )
        assert facade.distinct_values("leads", "status", limit=2).values == ("new", "won")

        async def awaited() -> list[DistinctValues]:
            try:
                return [await facade.adistinct_values("leads", "status", limit=n) for n in (1, 2)]
            finally:
                await facade.aclose()

        assert [r.capped for r in asyncio.run(awaited())] == [True, False]


def _analyzed(dsn: str, column: str, limit: int) -> list[dict[str, Any]]:
    statement = _pg_sql.build_distinct("leads", "public", column, frozenset({column}))
    params = [limit, (limit + 1) * _pg_sql.DISTINCT_PROBE_ROWS_PER_VALUE, limit + 1]
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            b"EXPLAIN (ANALYZE, FORMAT JSON) " + statement.as_bytes(None), params
        ).fetchone()
    assert row is not None
    document = row[0] if not isinstance(row[0], str) else json.loads(row[0])
    return list(plan_nodes(document[0]["Plan"]))


def test_a_column_of_many_values_is_never_grouped(db: PostgresDatabase) -> None:
    """Unique e-mails: the probe's scan runs, the grouping's scan never does."""
    scans = [n for n in _analyzed(db.reader_dsn, "email", 1) if n["Node Type"] == "Seq Scan"]
    assert sorted(n["Actual Loops"] for n in scans) == [0, 1]
    with create_read_only_facade(kind="postgres", dsn=db.reader_dsn) as facade:
        assert facade.distinct_values("leads", "email", limit=1).capped


def test_a_column_of_few_values_is_grouped_whole(db: PostgresDatabase) -> None:
    """The probe finding few values proves nothing: the grouping reads every row."""
    nodes = _analyzed(db.reader_dsn, "status", 2)
    scanned = [n["Actual Rows"] for n in nodes if n["Node Type"] == "Seq Scan"]
    assert PROBE_ROWS * 3 + 1 in scanned


def test_the_column_is_an_identifier_and_the_limits_parameters() -> None:
    text = _pg_sql.build_distinct("leads", "public", 'a"b', frozenset()).as_string(None)
    assert '"a""b"' in text
    assert text.count("%s") == 3
