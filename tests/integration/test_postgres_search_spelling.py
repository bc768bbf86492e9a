"""Spelling correction on PostgreSQL 18 (embedded, with pgvector and pg_trgm): the words table
the index step writes corrects a text as the memory backend's vocabulary does; without it the
search says so; hostile text stays a bound value."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest

from persistence import MemoryStore, create_read_only_facade
from persistence.admin.index_build import IndexReport, index_table
from persistence.backends.postgres import SearchSettings, inspect_database
from persistence.search import SearchResult
from rag_agent.ops.doctor_search import spelling_notes
from tests.data.hostile_payloads import own_payloads
from tests.support.pgvector import PgvectorDatabase, pgvector_database
from tests.support.search import HashEmbeddings, inquiries_store

TYPOS = [
    "canncel subscrpition",
    "pasword resett",
    "parcle delivry late",
    "invoce refnd",
    "where is my ordr",
    "dashbord exprot idea",
]


def _facade(dsn: str) -> Any:
    return create_read_only_facade(
        kind="postgres",
        dsn=dsn,
        embeddings=HashEmbeddings(),
        search=SearchSettings(exact_rows=200),
    )


def _load(dsn: str, rows: list[dict[str, Any]]) -> None:
    client = uuid.uuid4()
    with psycopg.connect(dsn) as conn, conn.cursor() as cursor:
        cursor.execute("INSERT INTO clients (id, name) VALUES (%s, 'c')", (client,))
        cursor.executemany(
            "INSERT INTO inquiries (id, client_id, subject, body) VALUES (%s, %s, %s, %s)",
            [(uuid.UUID(int=r["id"]), client, r["subject"], r["body"]) for r in rows],
        )


def _load_and_index(db: PgvectorDatabase, store: MemoryStore) -> IndexReport:
    """``store``'s inquiries loaded, and indexed (words table included) for the reader."""
    _load(db.admin_dsn, store.rows("inquiries"))
    return index_table(
        db.writer_dsn, "inquiries", ["subject", "body"], HashEmbeddings(),
        grant_to=[db.reader_role],
    )  # fmt: skip


def test_corrections_agree_with_memory(pgvector_server: str) -> None:
    """The same rows: every typo text is corrected to the same words on both backends, and the
    index step reports the words it wrote."""
    store = inquiries_store(rows=400)
    memory = create_read_only_facade(kind="memory", store=store, embeddings=HashEmbeddings())
    expected = {t: memory.search("inquiries", t, k=5).corrections for t in TYPOS}
    assert sum(1 for c in expected.values() if c) >= 4  # the texts do exercise correction
    with pgvector_database(pgvector_server) as db:
        report = _load_and_index(db, store)
        assert report.words is not None and report.words > 10
        with _facade(db.reader_dsn) as facade:
            found = {t: facade.search("inquiries", t, k=5) for t in TYPOS}
    assert {t: r.corrections for t, r in found.items()} == expected
    for result in found.values():
        assert result.degraded is None


def test_without_a_words_table_nothing_is_corrected_and_it_is_said(pgvector_server: str) -> None:
    with pgvector_database(pgvector_server) as db:
        _load(db.admin_dsn, inquiries_store(rows=50).rows("inquiries"))
        with _facade(db.reader_dsn) as facade:
            result = facade.search("inquiries", "canncel subscrpition", k=5, mode="keyword")
            plain = facade.search("inquiries", "48213", k=5, mode="keyword")
    assert result.corrections == ()
    assert result.degraded is not None and "no words table" in result.degraded
    assert plain.degraded is None  # nothing to correct: no note, no round trip


@pytest.mark.parametrize("line", [x for x in own_payloads()[::20] if "\x00" not in x])
def test_hostile_rows_and_text_stay_values(pgvector_server: str, line: str) -> None:
    """Rows holding injection payloads feed the words table; the same payloads as search text
    are corrected against it and ranked without any error but the library's own."""
    rows = [{"id": i + 1, "subject": line[:200], "body": f"{line} cancel order"} for i in range(3)]
    with pgvector_database(pgvector_server) as db:
        _load(db.admin_dsn, rows)
        index_table(
            db.writer_dsn, "inquiries", ["subject", "body"], HashEmbeddings(),
            grant_to=[db.reader_role],
        )  # fmt: skip
        with _facade(db.reader_dsn) as facade:
            result = facade.search("inquiries", line[:900] or "x", k=3, mode="keyword")
        assert all(fixed.isalpha() and fixed.islower() for _, fixed in result.corrections)
        count = db.execute("SELECT count(*) FROM inquiries")
    assert count == [(3,)]


def _secret_rows() -> list[dict[str, Any]]:
    # "zanzibar" is held by the hidden rows only; "parcel" by every row.
    hidden = [{"id": i, "subject": "zanzibar merger", "body": "zanzibar"} for i in (1, 2, 3)]
    shown = [{"id": i, "subject": "parcel late", "body": "parcel"} for i in (4, 5, 6)]
    return hidden + shown


def _index_secret_rows(db: Any) -> None:
    _load(db.admin_dsn, _secret_rows())
    index_table(
        db.writer_dsn, "inquiries", ["subject", "body"], HashEmbeddings(),
        grant_to=[db.reader_role],
    )  # fmt: skip


def test_no_correction_from_rows_row_level_security_hides(pgvector_server: str) -> None:
    """Under row-level security the words table counts rows the reader cannot see, so it
    corrects nothing (and says why): a reader seeing no 'zanzibar' row never gets the word."""
    with pgvector_database(pgvector_server) as db:
        _index_secret_rows(db)
        db.execute("ALTER TABLE inquiries ENABLE ROW LEVEL SECURITY")
        db.execute(
            f"CREATE POLICY shown ON inquiries FOR SELECT TO {db.reader_role} "
            "USING (subject <> 'zanzibar merger')"
        )
        with _facade(db.reader_dsn) as facade:
            assert facade.count("inquiries") == 3
            result = facade.search("inquiries", "zanzibr", k=5, mode="keyword")
        facts = inspect_database(db.reader_dsn)
    assert result.corrections == ()
    assert result.degraded is not None and "row-level security" in result.degraded
    # `rag-agent doctor` says which tables are corrected, and why the others are not.
    notes = spelling_notes(["inquiries", "leads"], facts.spelling, {"pg_trgm": "installed"})
    assert "spelling corrections on inquiries: off: row-level security" in notes[0]
    assert "spelling corrections on leads: off: no words table" in notes[1]


def test_a_filtered_search_is_not_corrected_from_other_rows(pgvector_server: str) -> None:
    """The words table counts every row: a filtered search is not corrected by it (a word
    only rows outside the filters hold would leak), and says so; unfiltered it is."""
    from persistence import Filter, Op

    with pgvector_database(pgvector_server) as db:
        _index_secret_rows(db)
        inside = [Filter("subject", Op.EQ, "parcel late")]
        with _facade(db.reader_dsn) as facade:
            filtered = facade.search("inquiries", "zanzibr", filters=inside, k=5, mode="keyword")
            unfiltered = facade.search("inquiries", "zanzibr", k=5, mode="keyword")
    assert filtered.corrections == ()
    assert filtered.degraded is not None and "inside its filters" in filtered.degraded
    assert unfiltered.corrections == (("zanzibr", "zanzibar"),)


def _around_a_revoke(
    server: str, before: list[str], after: list[str]
) -> tuple[list[SearchResult], list[SearchResult]]:
    """Hybrid searches (k 5) of 400 indexed inquiries, for the texts ``before``, then, with the
    reader's SELECT on the words table revoked, for the texts ``after``: one facade throughout,
    so what it remembers of the words table outlives the revoke."""
    with pgvector_database(server) as db:
        _load_and_index(db, inquiries_store(rows=400))
        with _facade(db.reader_dsn) as facade:
            first = [facade.search("inquiries", text, k=5) for text in before]
            db.execute(f"REVOKE SELECT ON inquiries_words FROM {db.reader_role}")
            return first, [facade.search("inquiries", text, k=5) for text in after]


def test_a_text_of_known_words_skips_the_spelling_pass(pgvector_server: str) -> None:
    """Words the words table held are remembered: a text made only of them is not looked up
    again (with the table's SELECT revoked since, no note says it cannot be read), a text
    with a word not seen yet still is, and a typo among known words is still corrected."""
    (first, typo), (again, fresh) = _around_a_revoke(
        pgvector_server,
        ["cancel subscription", "canncel subscription"],
        ["cancel subscription", "password reset"],
    )
    assert first.degraded is None and first.corrections == ()
    assert typo.corrections == (("canncel", "cancel"),)
    assert again.degraded is None and again.corrections == ()
    assert [h.row["id"] for h in again.hits] == [h.row["id"] for h in first.hits]
    assert fresh.degraded is not None and "no words table" in fresh.degraded


def test_a_word_left_as_typed_skips_the_spelling_pass(pgvector_server: str) -> None:
    """A word the table offered no correction for is remembered as one held: a text of such
    words is not looked up again (with SELECT revoked since, no note), while a word the pass
    corrected still is, each time (the note says the table can no longer be read)."""
    (first, typo), (again, typo_again) = _around_a_revoke(
        pgvector_server, ["cancel qzxvwy", "canncel qzxvwy"], ["qzxvwy cancel", "canncel"]
    )
    assert first.degraded is None and first.corrections == ()
    assert typo.corrections == (("canncel", "cancel"),)
    assert again.degraded is None and again.corrections == ()
    assert typo_again.corrections == ()
    assert typo_again.degraded is not None and "no words table" in typo_again.degraded


def test_prefetched_words_answer_as_the_lookups_would(pgvector_server: str) -> None:
    """After ``prefetch`` (one statement), ``known`` and ``similar`` of those words send
    nothing and answer what the two lookups of a vocabulary without it answer."""
    from persistence.backends.postgres.words import read_vocabulary, send_words_probe

    words = ["cancel", "canncel", "subscrpition", "zzzzqqq", "password"]
    with pgvector_database(pgvector_server) as db:
        _load(db.admin_dsn, inquiries_store(rows=400).rows("inquiries"))
        index_table(
            db.writer_dsn, "inquiries", ["subject", "body"], HashEmbeddings(),
            grant_to=[db.reader_role],
        )  # fmt: skip
        with psycopg.connect(db.reader_dsn) as conn:
            answers = []
            for prefetched in (False, True):
                cursor = conn.cursor()
                probe = send_words_probe(cursor, "public", "inquiries")
                vocabulary, why = read_vocabulary(
                    probe, cursor, "public", "inquiries", ["subject", "body"]
                )
                assert vocabulary is not None and why is None
                if prefetched:
                    vocabulary.prefetch(words)
                    conn.close()  # nothing more may be sent
                known = vocabulary.known(words)
                unknown = [w for w in words if w not in known]
                answers.append((known, vocabulary.similar(unknown)))
    assert answers[0] == answers[1]
    assert answers[1][0] == {"cancel", "password"}
    assert any(word == "cancel" for word, _ in answers[1][1]["canncel"])


def test_a_corrected_text_is_embedded_once_as_corrected(pgvector_server: str) -> None:
    """A hybrid search asks the words table before it embeds: one model call per search, made
    with the corrected text. A keyword search corrects inside its own snapshot and ranks the
    corrected words, as a search of the corrected text does."""
    store = inquiries_store(rows=400)
    with pgvector_database(pgvector_server) as db:
        _load_and_index(db, store)
        embeddings = HashEmbeddings()
        with create_read_only_facade(
            kind="postgres", dsn=db.reader_dsn, embeddings=embeddings,
            search=SearchSettings(exact_rows=200),
        ) as facade:  # fmt: skip
            for typo in TYPOS:
                calls = embeddings.query_calls
                hybrid = facade.search("inquiries", typo, k=5)
                assert embeddings.query_calls == calls + 1, typo
                keyword = facade.search("inquiries", typo, k=5, mode="keyword")
                assert keyword.corrections == hybrid.corrections
                if keyword.corrections:
                    fixed = typo
                    for wrong, right in keyword.corrections:
                        fixed = fixed.replace(wrong, right)
                    again = facade.search("inquiries", fixed, k=5, mode="keyword")
                    assert [h.row["id"] for h in keyword.hits] == [h.row["id"] for h in again.hits]
            corrected = [t for t in TYPOS if facade.search("inquiries", t, k=5).corrections]
    assert len(corrected) >= 4
