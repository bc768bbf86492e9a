"""The trigram leg's statement (rows grouped by their short columns, each group's similarity
computed once) ranks exactly as the plain per-row statement it replaced: the same ids, in the
same order, on random tables of repeated, similar and missing values, with and without a filter.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from psycopg import sql

from persistence import Filter, Op
from persistence.backends.postgres import search_sql as q
from tests.conftest import PostgresDatabase

WORDS = ["refund", "refunds", "invoice", "invoices", "cancel", "cancelled", "login", "parcel"]
#: A short value: one or two words, or none (NULL); few values, so many rows repeat one.
VALUE = st.one_of(st.none(), st.lists(st.sampled_from(WORDS), min_size=1, max_size=2).map(" ".join))
ROW = st.tuples(VALUE, VALUE, st.integers(min_value=0, max_value=2))
TEXT = st.sampled_from([*WORDS, "refnd", "invoce request", "cancel my parcel", "log in"])


@pytest.fixture(scope="module")
def conn(postgres_db: PostgresDatabase) -> Iterator[Any]:
    import psycopg

    postgres_db.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    with psycopg.connect(postgres_db.admin_dsn, autocommit=True) as connection:
        yield connection


def _trgm_schema(conn: Any) -> str:
    row = conn.execute(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
        "WHERE e.extname = 'pg_trgm'"
    ).fetchone()
    return str(row[0])


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(ROW, max_size=40),
    text=TEXT,
    depth=st.integers(min_value=1, max_value=30),
    columns=st.sampled_from([("subject",), ("subject", "title")]),
    filtered=st.booleans(),
)
@example(rows=[("refund", None, 0), (None, "refund", 0), (None, None, 0)], text="refund",
         depth=5, columns=("subject", "title"), filtered=False)  # fmt: skip
def test_grouped_leg_ranks_as_the_per_row_statement(
    conn: Any,
    rows: list[tuple[str | None, str | None, int]],
    text: str,
    depth: int,
    columns: tuple[str, ...],
    filtered: bool,
) -> None:
    trgm = _trgm_schema(conn)
    filters = (Filter("owner", Op.EQ, 1),) if filtered else ()
    with conn.transaction(force_rollback=True):
        conn.execute(
            "CREATE TEMP TABLE leg (id int PRIMARY KEY, subject text, title text, owner int) "
            "ON COMMIT DROP"
        )
        if rows:
            with conn.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO leg VALUES (%s, %s, %s, %s)",
                    [(i, s, t, o) for i, (s, t, o) in enumerate(rows)],
                )
        conn.execute("SET LOCAL pg_trgm.word_similarity_threshold = 0.6")
        table = sql.Identifier("leg")
        statement = q.build_trigram(table, filters, columns, trgm)
        values = [1] if filtered else []
        texts = [text] * len(columns)
        found = conn.execute(statement, [*texts, *values, *texts, depth]).fetchall()
        similar = sql.SQL(" OR ").join(
            sql.SQL("%s OPERATOR({}.<%%) {}").format(sql.Identifier(trgm), sql.Identifier(c))
            for c in columns
        )
        rank = sql.SQL(", ").join(
            sql.SQL("{}.word_similarity(%s, {})").format(sql.Identifier(trgm), sql.Identifier(c))
            for c in columns
        )
        owner = sql.SQL("owner = %s AND ") if filtered else sql.SQL("")
        reference = sql.SQL(
            "SELECT id FROM leg WHERE {owner}({similar}) ORDER BY GREATEST({rank}) DESC, id "
            "LIMIT %s"
        ).format(owner=owner, similar=similar, rank=rank)
        expected = conn.execute(reference, [*values, *texts, *texts, depth]).fetchall()
    assert [r[0] for r in found] == [r[0] for r in expected]
