"""The page-and-total statement's probe on PostgreSQL: exact pages and totals on both sides of
the probe's bound, and one pass over the table for a selective filter no index serves.

Run on the uuid-keyed, Supabase-style schema: a random key is where walking the primary key
to find a page costs most, and where a plain btree on ``email`` cannot serve ``ieq``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from persistence import Filter, Op, Order, Query, create_read_only_facade
from persistence.backends.postgres import create_backend
from persistence.backends.postgres import sql as _pg_sql
from persistence.facade import ReadOnlyPersistenceFacade
from tests.conftest import PostgresDatabase
from tests.support.explain import executed_nodes

pytestmark = pytest.mark.postgres

#: Leads of company "Probe": enough for pages on both sides of the probe's bound.
MATCHES = 120
OTHERS = 2_000


@pytest.fixture(scope="module")
def db(postgres_supabase_db: PostgresDatabase) -> Iterator[PostgresDatabase]:
    """Leads with random uuid keys: ``MATCHES`` at company "Probe", ``OTHERS`` elsewhere, and
    one lead whose e-mail only matches ignoring case."""
    with postgres_supabase_db.leads(
        "INSERT INTO leads (email, company_name, score) "
        "SELECT 'user' || g || '@example.com', "
        "CASE WHEN g <= %s THEN 'Probe' ELSE 'Other ' || g END, g %% 7 "
        "FROM generate_series(1, %s) AS g "
        "UNION ALL SELECT 'Needle@Example.COM', 'Other', NULL",
        (MATCHES, MATCHES + OTHERS),
    ) as db:
        yield db


@pytest.fixture(scope="module")
def facade(db: PostgresDatabase) -> Iterator[ReadOnlyPersistenceFacade]:
    with create_read_only_facade(kind="postgres", dsn=db.reader_dsn) as reader:
        yield reader


def expected(db: PostgresDatabase, limit: int | None, offset: int) -> list[tuple[Any, ...]]:
    """The Probe leads' (score, id) in the facade's order, read by the admin role."""
    rows = db.execute(
        "SELECT score, id FROM leads WHERE company_name = 'Probe' "
        "ORDER BY score DESC, id LIMIT %s OFFSET %s",
        (limit, offset),
    )
    return [tuple(row) for row in rows]


class TestPagesAroundTheBound:
    """Whether the probe holds every match (``offset + limit`` ≥ matches) or not, the page and
    the total are those of a plain ``count(*)`` and ``ORDER BY ... LIMIT ... OFFSET``."""

    @settings(max_examples=40, deadline=None)
    @given(
        limit=st.one_of(st.none(), st.integers(1, 2 * MATCHES)),
        offset=st.integers(0, 2 * MATCHES),
    )
    def test_page_and_total(
        self,
        db: PostgresDatabase,
        facade: ReadOnlyPersistenceFacade,
        limit: int | None,
        offset: int,
    ) -> None:
        page = facade.read(
            "leads",
            [Filter("company_name", Op.EQ, "Probe")],
            columns=("id", "score"),
            order=(Order("score", descending=True),),
            limit=limit,
            offset=offset,
        )
        assert page.total_count == MATCHES
        assert [(row["score"], row["id"]) for row in page.rows] == expected(db, limit, offset)

    @pytest.mark.parametrize("company", ["Probe", "Nobody"])
    def test_agrees_with_the_plain_statement(self, db: PostgresDatabase, company: str) -> None:
        """Both forms give the same rows for every page, as the reader role."""
        for limit, offset in [(1, 0), (50, 0), (50, 100), (None, 7), (200, 0), (10, 500)]:
            query = Query(
                "leads",
                (Filter("company_name", Op.EQ, company),),
                order=(Order("score"),),
                limit=limit,
                offset=offset,
            )
            answers = []
            for probe in (False, True):
                statement = _pg_sql.build_read(query, "public", ("id", "score"), True, probe=probe)
                with psycopg.connect(db.reader_dsn) as conn:
                    answers.append(
                        conn.execute(
                            statement.as_bytes(None), _pg_sql.read_params(query, probe=probe)
                        ).fetchall()
                    )
            assert answers[0] == answers[1]

    @pytest.mark.parametrize("limit", [MATCHES - 1, MATCHES, MATCHES + 1])
    def test_the_bound_exactly(
        self, db: PostgresDatabase, facade: ReadOnlyPersistenceFacade, limit: int
    ) -> None:
        """One match fewer, exactly as many, one more than the page's end."""
        flt = [Filter("company_name", Op.EQ, "Probe")]
        page = facade.read("leads", flt, columns=("id", "score"), limit=limit)
        assert page.total_count == MATCHES
        assert len(page.rows) == min(limit, MATCHES)

    def test_no_match_is_one_empty_page(self, facade: ReadOnlyPersistenceFacade) -> None:
        page = facade.read("leads", [Filter("company_name", Op.EQ, "Nobody")], limit=10)
        assert (page.rows, page.total_count) == ([], 0)

    def test_unfiltered_table(self, facade: ReadOnlyPersistenceFacade) -> None:
        """No filter: more rows than any page, so the total is counted."""
        page = facade.read("leads", columns=("id",), limit=5, offset=3)
        assert page.total_count == MATCHES + OTHERS + 1
        assert len(page.rows) == 5


def executed_scans(dsn: str, query: Query, columns: tuple[str, ...]) -> list[dict[str, Any]]:
    """The plan nodes of the probing read statement that read ``leads`` and ran (as the reader)."""
    nodes = executed_nodes(dsn, query, columns, probe=True)
    return [node for node in nodes if node.get("Relation Name") == "leads"]


class TestWhenToProbe:
    """The backend probes only where no index serves any filter (the catalog's indexes)."""

    @pytest.mark.parametrize(
        ("filters", "probes"),
        [
            ((Filter("email", Op.IEQ, "a@b.c"),), True),  # a plain btree cannot serve lower()
            ((Filter("company_name", Op.EQ, "Probe"),), True),  # no index at all
            ((Filter("email", Op.EQ, "a@b.c"),), False),  # the plain btree on email
            ((Filter("id", Op.EQ, "6f1c8a52-9a43-4bde-9a0c-4d2b7d1e0f00"),), False),
            ((Filter("company_name", Op.EQ, "Probe"), Filter("email", Op.EQ, "a@b.c")), False),
            ((), False),
        ],
    )
    def test_probe_where_no_index_serves(
        self, db: PostgresDatabase, filters: tuple[Filter, ...], probes: bool
    ) -> None:
        with create_backend(dsn=db.reader_dsn) as backend:
            reader = backend.read_statement(Query("leads", filters, limit=10))
        assert reader.probe is probes
        assert (b"probe" in reader.statement) is probes


class TestOnePass:
    """A selective filter that no index serves reads the table once: the probe finds every
    match, and neither the count nor an ordered walk of the primary key runs."""

    def test_ieq_over_a_plain_btree(self, db: PostgresDatabase) -> None:
        query = Query("leads", (Filter("email", Op.IEQ, "needle@example.com"),), limit=50)
        scans = executed_scans(db.reader_dsn, query, ("id", "email"))
        assert len(scans) == 1, scans
        assert scans[0]["Actual Rows"] == 1

    def test_many_matches_count_once(self, db: PostgresDatabase) -> None:
        """More matches than the page's end: the probe stops at its bound, then the total is
        counted once and the page read in order."""
        query = Query("leads", (Filter("company_name", Op.EQ, "Probe"),), limit=10)
        scans = executed_scans(db.reader_dsn, query, ("id",))
        assert len(scans) == 3, scans  # the probe, the count, the ordered page
        rows = sorted(node["Actual Rows"] for node in scans)
        assert rows[-1] == MATCHES  # the count
        assert 11 in rows  # the probe, stopped at offset + limit + 1
