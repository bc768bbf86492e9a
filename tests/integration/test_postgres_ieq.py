"""``ieq`` on PostgreSQL: the SQL it generates, its answers, and the index that serves it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from persistence import (
    Filter,
    InvalidQueryError,
    Op,
    Query,
    create_persistence_agent,
    create_read_only_facade,
)
from persistence.backends.postgres import sql as _pg_sql
from tests.conftest import PostgresDatabase

pytestmark = pytest.mark.postgres

INDEX = "leads_email_lower_ieq_test"


def plan_nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every node of an ``EXPLAIN (FORMAT JSON)`` plan, depth first."""
    yield plan
    for child in plan.get("Plans", ()):
        yield from plan_nodes(child)


def explain(dsn: str, statement: bytes, params: list[Any]) -> list[dict[str, Any]]:
    """The plan nodes of ``statement`` with sequential scans priced out, as the reader role."""
    with psycopg.connect(dsn) as conn:
        conn.execute("SET enable_seqscan = off")
        row = conn.execute(b"EXPLAIN (FORMAT JSON) " + statement, params).fetchone()
    assert row is not None
    document = row[0] if not isinstance(row[0], str) else json.loads(row[0])
    return list(plan_nodes(document[0]["Plan"]))


def index_lookups(nodes: list[dict[str, Any]]) -> dict[str, str]:
    """Index name -> the condition it is searched with, for every index a plan *searches*.

    An index read whole with a filter on top (what the planner may do with sequential scans
    off) has no ``Index Cond`` and does not count.
    """
    return {
        node["Index Name"]: node["Index Cond"]
        for node in nodes
        if "Index Name" in node and "Index Cond" in node
    }


@pytest.fixture
def db(postgres_clean: PostgresDatabase) -> Iterator[PostgresDatabase]:
    """The session database with a few leads; any index a test creates is dropped after it."""
    with create_persistence_agent(kind="postgres", dsn=postgres_clean.writer_dsn) as writer:
        writer.batch(
            "leads",
            [{"email": f"user{i}@Example.com"} for i in range(200)] + [{"email": "Ann@Acme.IO"}],
        )
    postgres_clean.execute("ANALYZE leads")
    yield postgres_clean
    postgres_clean.execute(f"DROP INDEX IF EXISTS {INDEX}")


class TestIeqSql:
    """The generated SQL is ``pg_catalog.lower(col) = pg_catalog.lower(%s)``, value bound."""

    def test_shape_and_parameters(self) -> None:
        """The column is a quoted identifier inside lower(); the value is a parameter, as given."""
        hostile = "A%_\\*' OR 1=1 --"
        query = Query("leads", (Filter("email", Op.IEQ, hostile),))
        text = _pg_sql.build_read(query, "public", ("id",), True).as_string(None)
        assert 'WHERE pg_catalog.lower("email") = pg_catalog.lower(%s)' in text
        assert "1=1" not in text
        assert _pg_sql.read_params(query)[:2] == [hostile, hostile]
        count = _pg_sql.build_count("leads", "public", query.filters).as_string(None)
        assert count.endswith('WHERE pg_catalog.lower("email") = pg_catalog.lower(%s)')

    def test_ieq_on_a_non_text_column_is_a_typed_error(self, db: PostgresDatabase) -> None:
        """lower() has no integer form: ieq on ``score`` is refused before the query."""
        with (
            create_read_only_facade(kind="postgres", dsn=db.reader_dsn) as facade,
            pytest.raises(InvalidQueryError) as info,
        ):
            facade.read("leads", [Filter("score", Op.IEQ, "10")])
        assert info.value.field == "op"


class TestIeqIndex:
    """A ``lower(email)`` expression index serves the backend's ``ieq`` statements."""

    def statements(self) -> list[tuple[bytes, list[Any]]]:
        query = Query("leads", (Filter("email", Op.IEQ, "ANN@acme.io"),), limit=10)
        read = _pg_sql.build_read(query, "public", ("id", "email"), True).as_bytes(None)
        count = _pg_sql.build_count("leads", "public", query.filters).as_bytes(None)
        return [(read, _pg_sql.read_params(query)), (count, _pg_sql.filter_params(query.filters))]

    def test_lower_index_is_used(self, db: PostgresDatabase) -> None:
        """With ``CREATE INDEX ... (lower(email))`` both the page and the count use it."""
        db.execute(f"CREATE INDEX {INDEX} ON leads (lower(email))")
        for statement, params in self.statements():
            lookups = index_lookups(explain(db.reader_dsn, statement, params))
            assert "lower(email)" in lookups[INDEX]

    def test_plain_email_index_is_not_used(self, db: PostgresDatabase) -> None:
        """A btree on ``email`` itself cannot serve ``lower(email)``: no index is searched."""
        db.execute(f"CREATE INDEX {INDEX} ON leads (email)")
        for statement, params in self.statements():
            assert index_lookups(explain(db.reader_dsn, statement, params)) == {}

    def test_answers_are_the_same_with_and_without_the_index(self, db: PostgresDatabase) -> None:
        """The index changes the plan, never the rows."""
        flt = Filter("email", Op.IEQ, "ann@ACME.io")
        with create_read_only_facade(kind="postgres", dsn=db.reader_dsn) as facade:
            before = facade.read("leads", [flt])
            db.execute(f"CREATE INDEX {INDEX} ON leads (lower(email))")
            after = facade.read("leads", [flt])
        assert [row["email"] for row in before.rows] == ["Ann@Acme.IO"]
        assert after == before
