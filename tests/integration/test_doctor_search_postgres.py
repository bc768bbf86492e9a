"""`rag-agent doctor` on PostgreSQL 15 (pg_trgm available, pgvector absent): what each search leg
needs, said from the catalog, and statements that run as printed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import PostgresDatabase
from tests.integration.test_doctor_postgres import drop_added_indexes
from tests.support.cli import run, without_dsn_warning

pytestmark = pytest.mark.postgres


@pytest.fixture
def db(postgres_clean: PostgresDatabase) -> Iterator[PostgresDatabase]:
    """The session database with only its primary keys (and no pg_trgm), before and after."""
    drop_added_indexes(postgres_clean)
    yield postgres_clean
    drop_added_indexes(postgres_clean)


def search_report(dsn: str) -> dict[str, Any]:
    """The ``search`` part of `rag-agent doctor --json`."""
    _, out, err = run("doctor", "--dsn", dsn, "--json")
    assert without_dsn_warning(err) == "", err
    search: dict[str, Any] = json.loads(out)["search"]
    return search


def entry(search: dict[str, Any], table: str, leg: str, needs: str = "") -> dict[str, Any]:
    """The index entry of one leg on one table (the first whose ``needs`` contains ``needs``)."""
    return next(
        e
        for e in search["indexes"]
        if (e["table"], e["leg"]) == (table, leg) and needs in e["needs"]
    )


def available(db: PostgresDatabase, name: str) -> bool:
    """Whether the server could install extension ``name``."""
    rows = db.execute("SELECT 1 FROM pg_catalog.pg_available_extensions WHERE name = %s", (name,))
    return bool(rows)


class TestSearchAdviceOnPostgres:
    def test_extensions_are_reported_as_the_server_has_them(self, db: PostgresDatabase) -> None:
        """pg_trgm not installed (but available here); pgvector absent: both said, with effect."""
        search = search_report(db.reader_dsn)
        assert search["extensions"]["pg_trgm"] == (
            "available" if available(db, "pg_trgm") else "absent"
        )
        vector = "available" if available(db, "vector") else "absent"
        assert search["extensions"]["vector"] == vector
        notes = " ".join(search["notes"])
        assert "pg_trgm is not installed" in notes
        assert "vector is not installed" in notes
        assert "re-ranks a bounded filtered candidate set in process" in notes
        if vector == "absent":
            assert "not available on this server" in notes

    def test_each_leg_names_its_index(self, db: PostgresDatabase) -> None:
        """Keyword: GIN on the tsvector over the text columns with the config; trigram: GIN
        gin_trgm_ops on short columns; semantic: HNSW vector_cosine_ops on the side table."""
        search = search_report(db.reader_dsn)
        keyword = entry(search, "inquiries", "keyword")
        assert keyword["served_by"] is None
        assert keyword["statement"] == (
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS inquiries_search_tsv_idx ON public.inquiries"
            " USING gin (to_tsvector('english'::regconfig, COALESCE(subject, '') || ' ' || "
            "COALESCE(body, '')));"
        )
        trigram = entry(search, "leads", "trigram", "company_name")
        assert trigram["statement"] == (
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS leads_company_name_trgm_idx "
            "ON public.leads USING gin (company_name gin_trgm_ops);"
        )
        assert not any(
            e["leg"] == "trigram" and "body" in e["needs"] for e in search["indexes"]
        )  # a long text is ranked by the keyword leg only
        semantic = entry(search, "inquiries", "semantic")
        assert "inquiries_embeddings (embedding vector_cosine_ops)" in semantic["needs"]
        assert semantic["served_by"] is None

    def test_printed_statements_run_and_then_serve(self, db: PostgresDatabase) -> None:
        """After the extension and the printed statements, keyword and trigram are served."""
        before = search_report(db.admin_dsn)
        db.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        for item in before["indexes"]:
            if item["statement"] and item["table"] in ("inquiries", "leads"):
                db.execute(item["statement"])
        after = search_report(db.reader_dsn)
        assert after["extensions"]["pg_trgm"] == "installed"
        assert entry(after, "inquiries", "keyword")["served_by"] == "inquiries_search_tsv_idx"
        assert entry(after, "leads", "keyword")["served_by"] == "leads_search_tsv_idx"
        assert entry(after, "leads", "trigram", "email")["served_by"] == "leads_email_trgm_idx"

    def test_human_output_has_a_search_section(self, db: PostgresDatabase) -> None:
        """A terminal gets the extensions, the legs and the statements after the index table."""
        code, out, err = run("doctor", "--dsn", db.reader_dsn, tty=True)
        assert without_dsn_warning(err) == ""
        assert code == 1  # the filter indexes are missing; search advice alone never fails it
        section = out[out.index("\nsearch:\n") :]
        assert "  pg_trgm: " in section and "  vector: " in section
        assert "USING gin (to_tsvector('english'::regconfig" in section
