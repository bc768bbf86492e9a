"""The documents table (the keyword leg's stored documents) on a real PostgreSQL 18 with pgvector
and pg_trgm: what ``index_table`` writes, that the search reads a stored document only while the
row's text is the one it was made of, and that the order is the one computed from the rows.

``inquiries`` has the keyword leg's GIN index (the candidates-then-rank path); ``messages`` has
none (the one-pass path): both read the documents table.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from structlog.testing import capture_logs

from persistence import ConfigurationError, create_read_only_facade
from persistence.admin.index_build import index_table
from persistence.backends.postgres import SearchSettings
from persistence.backends.postgres.documents import describe, usable
from tests.support.pgvector import HashEmbeddings, PgvectorDatabase, pgvector_database

_WORDS = "refund invoice courier parcel password locked cancel subscription export dashboard"
_FILLER = ["please", "thanks", "hello", "regards", "team", "question", "update", "kindly"]
_QUERY = "courier parcel refund"
#: The text columns of messages, in table order: what its search ranks by.
_MESSAGES = ["direction", "body"]


def _rows(rng: random.Random, n: int) -> list[tuple[uuid.UUID, str, str]]:
    words = _WORDS.split()
    return [
        (
            uuid.UUID(int=rng.getrandbits(128)),
            " ".join(rng.sample(words, 2)),
            " ".join(rng.sample(words, rng.randint(1, 4)) + rng.sample(_FILLER, rng.randint(0, 5))),
        )
        for _ in range(n)
    ]


@pytest.fixture()
def db(pgvector_server: str) -> Iterator[PgvectorDatabase]:
    with pgvector_database(pgvector_server) as database:
        rows = _rows(random.Random(31), 300)
        with psycopg.connect(database.admin_dsn) as conn, conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO inquiries (id, subject, body) VALUES (%s, %s, %s)", rows
            )
            cursor.executemany(
                "INSERT INTO messages (id, body) VALUES (%s, %s)", [(r[0], r[2]) for r in rows]
            )
        database.execute(
            "CREATE INDEX ON inquiries USING gin (to_tsvector('english', "
            "coalesce(subject, '') || ' ' || coalesce(body, '')))"
        )
        database.execute("ANALYZE")
        for table, columns in (("inquiries", ["subject", "body"]), ("messages", _MESSAGES)):
            index_table(
                database.writer_dsn,
                table,
                columns,
                HashEmbeddings(),
                grant_to=[database.reader_role],
            )
        yield database


def _text(table: str) -> str:
    return (
        "coalesce(subject, '') || ' ' || coalesce(body, '')"
        if table == "inquiries"
        else "coalesce(direction, '') || ' ' || coalesce(body, '')"
    )


def _expected(db: PgvectorDatabase, table: str, words: str, k: int) -> list[Any]:
    """The keyword leg's order computed from the rows themselves: ts_rank of each row's own
    document, length-normalised, then id."""
    query = " || ".join("plainto_tsquery('english', %s)" for _ in words.split())
    document = f"to_tsvector('english', {_text(table)})"
    rows = db.execute(
        f"SELECT id FROM {table} WHERE {document} @@ ({query}) "
        f"ORDER BY ts_rank({document}, ({query}), 1) DESC, id LIMIT %s",
        (*words.split(), *words.split(), k),
    )
    return [row[0] for row in rows]


def _search(db: PgvectorDatabase, table: str, words: str, k: int) -> tuple[list[Any], bool]:
    """The keyword leg's ids, best first, as far as the page of ``k`` shows them (on
    ``inquiries`` the trigram leg is fused in too), and whether the search read the stored
    documents."""
    with (
        create_read_only_facade(
            kind="postgres",
            dsn=db.reader_dsn,
            embeddings=HashEmbeddings(),
            # Every match a candidate: the order compared is then the whole ranking's.
            search=SearchSettings(exact_rows=50, keyword_candidates=1_000),
        ) as facade,
        capture_logs() as logs,
    ):
        result = facade.search(table, words, k=k, mode="keyword")
    events = [e for e in logs if e["event"] == "postgres.search"]
    ranked = sorted((h.ranks["keyword"], h.row["id"]) for h in result.hits if h.ranks["keyword"])
    assert [rank for rank, _ in ranked] == list(range(1, len(ranked) + 1)), "a gap in the leg"
    return [key for _, key in ranked], bool(events[-1]["stored_documents"])


class TestIndexWritesDocuments:
    def test_every_row_has_postgresqls_own_document(self, db: PgvectorDatabase) -> None:
        """One row per table row, its document the table's own ``to_tsvector`` of its text."""
        differing = db.execute(
            "SELECT count(*) FROM inquiries t FULL JOIN inquiries_documents d ON d.row_id = t.id "
            "WHERE d.document IS DISTINCT FROM to_tsvector('english', "
            "coalesce(t.subject, '') || ' ' || coalesce(t.body, ''))"
        )
        assert differing == [(0,)]
        assert db.execute("SELECT count(*) FROM inquiries_documents") == [(300,)]

    def test_runs_are_incremental(self, db: PgvectorDatabase) -> None:
        """A second run rewrites nothing; an edit, an insert and a delete are followed."""
        first, second = db.execute("SELECT id FROM inquiries ORDER BY id LIMIT 2")
        before = dict(db.execute("SELECT row_id, xmin::text FROM inquiries_documents"))
        index_table(db.writer_dsn, "inquiries", ["subject", "body"], HashEmbeddings())
        assert dict(db.execute("SELECT row_id, xmin::text FROM inquiries_documents")) == before
        db.execute("UPDATE inquiries SET body = 'zeppelin' WHERE id = %s", (first[0],))
        db.execute("DELETE FROM inquiries WHERE id = %s", (second[0],))
        added = uuid.uuid4()
        db.execute("INSERT INTO inquiries (id, subject) VALUES (%s, 'walrus')", (added,))
        index_table(db.writer_dsn, "inquiries", ["subject", "body"], HashEmbeddings())
        after = dict(db.execute("SELECT row_id, xmin::text FROM inquiries_documents"))
        assert set(after) == (set(before) - {second[0]}) | {added}
        assert {k for k in after if after[k] != before.get(k)} == {first[0], added}
        assert db.execute(
            "SELECT document::text FROM inquiries_documents WHERE row_id = %s", (first[0],)
        ) == db.execute(
            "SELECT to_tsvector('english', coalesce(subject, '') || ' ' || coalesce(body, ''))"
            "::text FROM inquiries WHERE id = %s",
            (first[0],),
        )

    def test_other_columns_rewrite_the_table(self, db: PgvectorDatabase) -> None:
        index_table(db.writer_dsn, "inquiries", ["subject"], HashEmbeddings())
        meta = db.execute("SELECT obj_description('inquiries_documents'::regclass, 'pg_class')")
        described = json.loads(meta[0][0])
        assert (described["columns"], described["config"]) == (["subject"], "english")
        differing = db.execute(
            "SELECT count(*) FROM inquiries t JOIN inquiries_documents d ON d.row_id = t.id "
            "WHERE d.document <> to_tsvector('english', coalesce(t.subject, ''))"
        )
        assert differing == [(0,)]

    def test_another_parse_of_the_configuration_rewrites_the_table(
        self, db: PgvectorDatabase
    ) -> None:
        """A fingerprint that no longer matches (dictionaries or stemmers changed, another
        server version) rewrites every document, though no row's text changed."""
        (described,) = db.execute(
            "SELECT obj_description('inquiries_documents'::regclass, 'pg_class')"
        )[0]
        stale = {**json.loads(described), "fingerprint": "0:0"}
        db.execute(f"COMMENT ON TABLE inquiries_documents IS '{json.dumps(stale)}'")
        db.execute("UPDATE inquiries_documents SET document = to_tsvector('simple', 'stale')")
        index_table(db.writer_dsn, "inquiries", ["subject", "body"], HashEmbeddings())
        assert db.execute(
            "SELECT count(*) FROM inquiries_documents WHERE document = to_tsvector('simple', "
            "'stale')"
        ) == [(0,)]

    @pytest.mark.parametrize("comment", [None, "Uploaded files of each inquiry"])
    def test_a_table_it_did_not_write_is_left_alone(
        self, db: PgvectorDatabase, comment: str | None
    ) -> None:
        """A user's own table of that name is neither dropped nor written: the run stops."""
        db.execute("DROP TABLE inquiries_documents")
        db.execute("CREATE TABLE inquiries_documents (row_id uuid, name text)")
        db.execute("INSERT INTO inquiries_documents VALUES (gen_random_uuid(), 'contract.pdf')")
        if comment is not None:
            db.execute(f"COMMENT ON TABLE inquiries_documents IS '{comment}'")
        with pytest.raises(ConfigurationError, match="not a documents table"):
            index_table(db.writer_dsn, "inquiries", ["subject", "body"], HashEmbeddings())
        assert db.execute("SELECT name FROM inquiries_documents") == [("contract.pdf",)]

    @pytest.mark.parametrize("hidden", ["column", "rows"])
    def test_not_granted_to_a_role_that_may_not_read_every_text(
        self, db: PgvectorDatabase, hidden: str
    ) -> None:
        """Documents are close to the text: a role denied a column, or a table under row-level
        security, gets no grant, and searches by what it may see."""
        db.execute(f"REVOKE SELECT ON inquiries_documents FROM {db.reader_role}")
        if hidden == "column":
            db.execute(f"REVOKE SELECT ON inquiries FROM {db.reader_role}")
            db.execute(f"GRANT SELECT (id, subject) ON inquiries TO {db.reader_role}")
        else:
            db.execute("ALTER TABLE inquiries ENABLE ROW LEVEL SECURITY")
        with capture_logs() as logs:
            index_table(
                db.writer_dsn,
                "inquiries",
                ["subject", "body"],
                HashEmbeddings(),
                grant_to=[db.reader_role],
            )
        granted = db.execute(
            "SELECT has_table_privilege(%s, 'inquiries_documents', 'SELECT')", (db.reader_role,)
        )
        assert granted == [(False,)]
        assert any(e["event"] == "persistence.documents.not_granted" for e in logs)

    def test_keyword_columns_apart_from_the_embedded_ones(self, db: PgvectorDatabase) -> None:
        """Only ``body`` embedded: the documents hold the keyword leg's columns when named,
        and the search reads them; without the option they hold ``body`` and are not read."""
        index_table(
            db.writer_dsn, "inquiries", ["body"], HashEmbeddings(), grant_to=[db.reader_role]
        )
        assert not _search(db, "inquiries", _QUERY, 100)[1]
        index_table(
            db.writer_dsn,
            "inquiries",
            ["body"],
            HashEmbeddings(),
            keyword_columns=["subject", "body"],
            grant_to=[db.reader_role],
        )
        side = db.execute("SELECT obj_description('inquiries_embeddings'::regclass, 'pg_class')")
        assert json.loads(side[0][0])["columns"] == ["body"]
        found, stored = _search(db, "inquiries", _QUERY, 100)
        assert stored and len(found) >= 40
        assert found == _expected(db, "inquiries", _QUERY, len(found))

    @pytest.mark.parametrize(
        ("keyword_columns", "message"),
        [([], "names at least one"), (["subject", "nope"], "no column 'nope'"),
         (["subject", "received_at"], "not text"), (["body", "subject"], "in the table's order"),
         (["subject", "subject"], "each column once")],
    )  # fmt: skip
    def test_bad_keyword_columns_are_refused_before_anything_is_written(
        self, db: PgvectorDatabase, keyword_columns: list[str], message: str
    ) -> None:
        before = db.execute("SELECT count(*), max(xmin::text) FROM inquiries_documents")
        with pytest.raises(ConfigurationError, match=message):
            index_table(
                db.writer_dsn,
                "inquiries",
                ["body"],
                HashEmbeddings(),
                keyword_columns=keyword_columns,
            )
        assert db.execute("SELECT count(*), max(xmin::text) FROM inquiries_documents") == before


class TestSearchReadsDocuments:
    @pytest.mark.parametrize("table", ["inquiries", "messages"])
    def test_order_is_the_rows_own(self, db: PgvectorDatabase, table: str) -> None:
        """With stored documents the keyword leg ranks exactly as the rows' own documents do
        (GIN path on inquiries, one-pass path on messages)."""
        found, stored = _search(db, table, _QUERY, 100)
        assert stored and len(found) >= 40
        assert found == _expected(db, table, _QUERY, len(found))

    @pytest.mark.parametrize("table", ["inquiries", "messages"])
    def test_a_row_changed_since_indexing_ranks_by_its_new_text(
        self, db: PgvectorDatabase, table: str
    ) -> None:
        """An edit after the index run: the stored document is stale and not read. The row
        matched none of the words; now it matches all three, and ranks where its new text
        puts it (a stale document would have ranked it last, or not at all)."""
        (row,) = db.execute(
            f"SELECT id FROM {table} WHERE NOT to_tsvector('english', {_text(table)}) @@ "
            "to_tsquery('english', 'courier | parcel | refund') ORDER BY id LIMIT 1"
        )
        db.execute(
            f"UPDATE {table} SET body = 'courier parcel refund' WHERE id = %s",
            (row[0],),
        )
        found, stored = _search(db, table, _QUERY, 100)
        assert stored and found == _expected(db, table, _QUERY, len(found))
        assert row[0] in found[: len(found) - 1]

    def test_a_stored_document_is_read_only_while_its_source_matches(
        self, db: PgvectorDatabase
    ) -> None:
        """A stored document that says ``walrus`` for a row whose text does not: read (the row
        is ranked first for ``walrus``, though found by its real words) while ``source`` is
        the md5 of the row's text; ignored once it is not."""
        row = _expected(db, "inquiries", "courier walrus", 1_000)[-1:]  # ranked last by its text
        db.execute(
            "UPDATE inquiries_documents SET document = to_tsvector('english', 'courier walrus') "
            "WHERE row_id = %s",
            (row[0],),
        )
        found, _ = _search(db, "inquiries", "courier walrus", 100)
        assert found[0] == row[0]
        db.execute("UPDATE inquiries_documents SET source = 'stale' WHERE row_id = %s", (row[0],))
        found, _ = _search(db, "inquiries", "courier walrus", 100)
        assert found == _expected(db, "inquiries", "courier walrus", len(found))
        assert row[0] not in found[:1]

    def test_without_the_table_or_the_right_to_read_it_the_order_is_the_same(
        self, db: PgvectorDatabase
    ) -> None:
        with_documents, stored = _search(db, "inquiries", _QUERY, 100)
        assert stored
        db.execute(f"REVOKE SELECT ON inquiries_documents FROM {db.reader_role}")
        unreadable, stored = _search(db, "inquiries", _QUERY, 100)
        assert not stored
        db.execute("DROP TABLE inquiries_documents")
        dropped, stored = _search(db, "inquiries", _QUERY, 100)
        assert not stored
        assert with_documents == unreadable == dropped


class TestUsable:
    def test_only_the_same_columns_in_order_and_configuration(self) -> None:
        meta = describe(["subject", "body"], "english", "3f0c:180000")
        assert usable(meta, ["subject", "body"], "english")
        assert not usable(meta, ["body", "subject"], "english")
        assert not usable(meta, ["subject"], "english")
        assert not usable(meta, ["subject", "body"], "simple")
        assert not usable(None, ["subject", "body"], "english")
        assert not usable("not json", ["subject", "body"], "english")
        assert not usable('{"columns": ["subject", "body"]}', ["subject", "body"], "english")
