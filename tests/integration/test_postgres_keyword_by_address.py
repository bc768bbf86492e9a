"""The keyword leg's candidates read back by their address (``tableoid``, ``ctid``) rank the very
rows, in the very order, the primary-key read ranks: a differential over random word sets,
filters, depths and candidate bounds, with and without the stored documents, on a plain table
and on a hash-partitioned one (whose partitions hold rows at the same ``ctid``).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg import sql

from persistence import Filter, Op
from persistence.admin.index_build import index_table
from persistence.backends.postgres import search_sql as q
from tests.support.pgvector import HashEmbeddings, PgvectorDatabase, pgvector_database

_WORDS = "refund invoice courier parcel password locked cancel subscription export dashboard"
_FILLER = ["please", "thanks", "hello", "regards", "team", "question", "update", "kindly"]
#: Words a text may hold: the rows' own, and words no row holds.
_TEXT_WORDS = [*_WORDS.split(), *_FILLER[:3], "absent", "nowhere"]
_CLIENTS = [uuid.UUID(int=n) for n in (1, 2, 3)]


@dataclass
class Tables:
    db: PgvectorDatabase


def _body(rng: random.Random) -> tuple[str, str]:
    words = _WORDS.split()
    subject = " ".join(rng.sample(words, 2))
    body = " ".join(rng.sample(words, rng.randint(1, 4)) + rng.sample(_FILLER, rng.randint(0, 5)))
    return subject, body


@pytest.fixture(scope="module")
def tables(pgvector_server: str) -> Iterator[Tables]:
    rng = random.Random(41)
    with pgvector_database(pgvector_server) as db:
        with psycopg.connect(db.admin_dsn) as conn, conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO clients (id, name) VALUES (%s, 'c')", [(c,) for c in _CLIENTS]
            )
            cursor.executemany(
                "INSERT INTO inquiries (id, client_id, subject, body) VALUES (%s, %s, %s, %s)",
                [
                    (uuid.UUID(int=rng.getrandbits(128)), rng.choice(_CLIENTS), *_body(rng))
                    for _ in range(400)
                ],
            )
            # Two partitions filled alike: their first rows sit at the same ctid, (0,1), ...
            cursor.execute(
                "CREATE TABLE parted (id integer PRIMARY KEY, subject text, body text) "
                "PARTITION BY HASH (id)"
            )
            for remainder in (0, 1):
                cursor.execute(
                    f"CREATE TABLE parted_{remainder} PARTITION OF parted "
                    f"FOR VALUES WITH (MODULUS 2, REMAINDER {remainder})"
                )
            cursor.executemany(
                "INSERT INTO parted (id, subject, body) VALUES (%s, %s, %s)",
                [(n, *_body(rng)) for n in range(300)],
            )
            cursor.execute(f"GRANT SELECT ON parted TO {db.reader_role}")
        for table in ("inquiries", "parted"):
            db.execute(
                f"CREATE INDEX ON {table} USING gin (to_tsvector('english', "
                "coalesce(subject, '') || ' ' || coalesce(body, '')))"
            )
        db.execute("ANALYZE")
        index_table(
            db.writer_dsn, "inquiries", ["subject", "body"], HashEmbeddings(),
            grant_to=[db.reader_role],
        )  # fmt: skip
        yield Tables(db)


def _keyword(
    dsn: str,
    table: str,
    filters: Sequence[Filter],
    terms: Sequence[str],
    candidates: int,
    depth: int,
    *,
    stored: bool,
    by_address: bool,
) -> list[object]:
    statement = q.build_keyword(
        sql.Identifier("public", table),
        filters,
        ["subject", "body"],
        "english",
        len(terms),
        indexed=True,
        stored=sql.Identifier("public", f"{table}_documents") if stored else None,
        by_address=by_address,
    )
    params = q.keyword_params(filters, terms, candidates, depth, indexed=True)
    with psycopg.connect(dsn) as conn:
        return [row[0] for row in conn.execute(statement, params).fetchall()]


_terms = st.lists(st.sampled_from(_TEXT_WORDS), min_size=1, max_size=5, unique=True)


@settings(max_examples=60, deadline=None)
@given(
    terms=_terms,
    client=st.sampled_from([None, *_CLIENTS]),
    candidates=st.integers(1, 120),
    depth=st.integers(1, 60),
    stored=st.booleans(),
)
def test_by_address_ranks_as_by_id(
    tables: Tables,
    terms: list[str],
    client: uuid.UUID | None,
    candidates: int,
    depth: int,
    stored: bool,
) -> None:
    filters = [] if client is None else [Filter("client_id", Op.EQ, client)]
    dsn = tables.db.reader_dsn
    by_id = _keyword(dsn, "inquiries", filters, terms, candidates, depth, stored=stored,
                     by_address=False)  # fmt: skip
    assert by_id == _keyword(dsn, "inquiries", filters, terms, candidates, depth, stored=stored,
                             by_address=True)  # fmt: skip


@settings(max_examples=30, deadline=None)
@given(terms=_terms, candidates=st.integers(1, 120), depth=st.integers(1, 60))
def test_by_address_on_a_partitioned_table(
    tables: Tables, terms: list[str], candidates: int, depth: int
) -> None:
    """Each partition holds rows at the same ``ctid``s: the partition's oid tells them apart."""
    dsn = tables.db.reader_dsn
    by_id = _keyword(dsn, "parted", [], terms, candidates, depth, stored=False, by_address=False)
    assert by_id == _keyword(
        dsn, "parted", [], terms, candidates, depth, stored=False, by_address=True
    )
