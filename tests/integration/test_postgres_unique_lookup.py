"""Reads by a unique key on PostgreSQL: the one-row statement (no count beside it) gives the page
and the total a plain ``count(*)`` and ``LIMIT ... OFFSET`` give, for every window, and only an
equality on a column a unique index keys alone takes it.

Run on the uuid-keyed, Supabase-style schema, where the primary key is the lookup agents make.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from persistence import Filter, Op, Query, create_read_only_facade
from persistence.backends.postgres import create_backend
from persistence.backends.postgres.indexes import IndexFacts, IndexKey, unique_columns
from persistence.facade import ReadOnlyPersistenceFacade
from tests.conftest import PostgresDatabase

pytestmark = pytest.mark.postgres

LEADS = 50


@pytest.fixture(scope="module")
def db(postgres_supabase_db: PostgresDatabase) -> Iterator[PostgresDatabase]:
    with postgres_supabase_db.leads(
        "INSERT INTO leads (email, company_name) "
        "SELECT 'user' || g || '@example.com', 'Co ' || (g %% 5) FROM generate_series(1, %s) AS g",
        (LEADS,),
    ) as db:
        yield db


@pytest.fixture(scope="module")
def facade(db: PostgresDatabase) -> Iterator[ReadOnlyPersistenceFacade]:
    with create_read_only_facade(kind="postgres", dsn=db.reader_dsn) as reader:
        yield reader


@pytest.fixture(scope="module")
def lead(db: PostgresDatabase) -> tuple[uuid.UUID, str]:
    row = db.execute("SELECT id, email FROM leads ORDER BY email LIMIT 1")[0]
    return row[0], str(row[1])  # type: ignore[return-value]


def expected(db: PostgresDatabase, where: str, params: tuple[Any, ...], window: Any) -> Any:
    """The matching rows' ids in the facade's order and their count, read by the admin role."""
    limit, offset = window
    ids = db.execute(
        f"SELECT id FROM leads WHERE {where} ORDER BY id LIMIT %s OFFSET %s",
        (*params, limit, offset),
    )
    total = db.execute(f"SELECT count(*) FROM leads WHERE {where}", params)[0][0]
    return [row[0] for row in ids], total


class TestPagesAndTotals:
    @settings(max_examples=30, deadline=None)
    @given(
        limit=st.one_of(st.none(), st.integers(1, 3)),
        offset=st.integers(0, 3),
        exact=st.booleans(),
        found=st.booleans(),
        as_text=st.booleans(),
    )
    def test_by_id(
        self,
        db: PostgresDatabase,
        facade: ReadOnlyPersistenceFacade,
        lead: tuple[uuid.UUID, str],
        limit: int | None,
        offset: int,
        exact: bool,
        found: bool,
        as_text: bool,
    ) -> None:
        key = lead[0] if found else uuid.UUID(int=0)
        # Twice: the first read plans the shape, the second runs the facade's stored reader.
        for _ in range(2):
            page = facade.read(
                "leads",
                [Filter("id", Op.EQ, str(key) if as_text else key)],
                limit=limit,
                offset=offset,
                exact_total=exact,
            )
            ids, total = expected(db, "id = %s", (key,), (limit, offset))
            assert [row["id"] for row in page.rows] == ids
            assert page.total_count == total
            assert page.total_exact is True

    def test_with_another_filter(
        self, db: PostgresDatabase, facade: ReadOnlyPersistenceFacade, lead: tuple[uuid.UUID, str]
    ) -> None:
        for email, matches in ((lead[1], 1), ("someone@else.io", 0)):
            filters = [Filter("email", Op.EQ, email), Filter("id", Op.EQ, lead[0])]
            page = facade.read("leads", filters, limit=10)
            assert page.total_count == matches
            assert [row["email"] for row in page.rows] == [email] * matches

    def test_whole_rows(
        self, db: PostgresDatabase, facade: ReadOnlyPersistenceFacade, lead: tuple[uuid.UUID, str]
    ) -> None:
        page = facade.read("leads", [Filter("id", Op.EQ, lead[0])], limit=5)
        columns = [row[0] for row in db.execute(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = 'public' AND table_name = 'leads' ORDER BY ordinal_position"
        )]  # fmt: skip
        assert list(page.rows[0]) == columns
        assert page.rows[0]["email"] == lead[1]


class TestWhichReadsTakeIt:
    @pytest.mark.parametrize(
        ("filters", "unique"),
        [
            ((Filter("id", Op.EQ, "6f1c8a52-9a43-4bde-9a0c-4d2b7d1e0f00"),), True),
            ((Filter("email", Op.EQ, "a@b.c"), Filter("id", Op.EQ, str(uuid.UUID(int=1)))), True),
            ((Filter("email", Op.EQ, "a@b.c"),), False),  # a plain, non-unique btree
            ((Filter("id", Op.NEQ, str(uuid.UUID(int=1))),), False),
            ((Filter("id", Op.IN, [str(uuid.UUID(int=1))]),), False),
            ((), False),
        ],
    )
    def test_only_an_equality_on_a_unique_key(
        self, db: PostgresDatabase, filters: tuple[Filter, ...], unique: bool
    ) -> None:
        with create_backend(dsn=db.reader_dsn) as backend:
            reader = backend.read_statement(Query("leads", filters, limit=10))
        assert reader.unique is unique
        assert (b"count(*)" not in reader.statement) is unique


def _index(keys: list[str | None], *, unique: bool, **facts: Any) -> IndexFacts:
    options: dict[str, Any] = {"method": "btree", "valid": True, "partial": False, **facts}
    return IndexFacts(
        "leads",
        "ix",
        options["method"],
        tuple(IndexKey(k, k or "lower(email)", "") for k in keys),
        options["valid"],
        options["partial"],
        unique,
    )


@pytest.mark.parametrize(
    ("index", "columns"),
    [
        (_index(["id"], unique=True), {"id"}),
        (_index(["id"], unique=False), set()),
        (_index(["client_id", "email"], unique=True), set()),  # a pair is unique, not each
        (_index([None], unique=True), set()),  # lower(email): equality on email is not lower()
        (_index(["id"], unique=True, partial=True), set()),
        (_index(["id"], unique=True, valid=False), set()),
        (_index(["id"], unique=True, method="hash"), set()),
    ],
)
def test_unique_columns(index: IndexFacts, columns: set[str]) -> None:
    assert unique_columns("leads", [index]) == columns
    assert unique_columns("clients", [index]) == frozenset()


class TestAKeyNoLongerUnique:
    """The catalog said unique, the index went since: the lookup reaches its bound (the page's
    end plus one) and the page and total are read again by the page-and-total statement, never
    by reading every match."""

    @pytest.fixture
    def keyed(self, db: PostgresDatabase) -> Iterator[str]:
        db.execute("CREATE TABLE keyed (id bigint PRIMARY KEY, code text)")
        db.execute("CREATE UNIQUE INDEX keyed_code ON keyed (code)")
        db.execute("INSERT INTO keyed SELECT g, 'c' || g FROM generate_series(1, 20) AS g")
        db.execute(f"GRANT SELECT ON keyed TO {db.reader_role}")
        try:
            yield "keyed"
        finally:
            db.execute("DROP TABLE keyed")

    def test_pages_and_totals_stay_exact(self, db: PostgresDatabase, keyed: str) -> None:
        dup = [Filter("code", Op.EQ, "dup")]
        with (
            create_backend(dsn=db.reader_dsn) as backend,
            create_read_only_facade(kind="postgres", dsn=db.reader_dsn, tables=[keyed]) as reader,
        ):
            query = Query(keyed, tuple(dup), limit=2, offset=1)
            assert backend.read_statement(query).unique  # the catalog's unique index
            assert reader.read(keyed, dup, limit=2, offset=1).total_count == 0  # plans the shape
            db.execute("DROP INDEX keyed_code")
            db.execute("INSERT INTO keyed SELECT g, 'dup' FROM generate_series(21, 25) AS g")
            page = backend.read(query)
            planned = reader.read(keyed, dup, limit=2, offset=1)  # by the facade's read plan
            assert (planned.rows, planned.total_count) == (page.rows, 5)
            for exact in (True, False):
                again = backend.read(Query(keyed, query.filters, limit=2, exact_total=exact))
                assert [row["id"] for row in again.rows] == [21, 22]
        assert [row["id"] for row in page.rows] == [22, 23]
        assert (page.total_count, page.total_exact) == (5, True)
        one = Query(keyed, (Filter("code", Op.EQ, "c3"),), limit=2)
        with create_backend(dsn=db.reader_dsn) as backend:
            assert backend.read(one).total_count == 1
