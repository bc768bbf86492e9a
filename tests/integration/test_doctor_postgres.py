"""`rag-agent doctor` on a real PostgreSQL database, with and without the indexes it asks for."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from persistence.backends.postgres import inspect_database
from tests.conftest import PostgresDatabase
from tests.support.cli import run, without_dsn_warning

pytestmark = pytest.mark.postgres

_OUR_INDEXES = (
    "SELECT i.relname FROM pg_catalog.pg_index x"
    " JOIN pg_catalog.pg_class i ON i.oid = x.indexrelid"
    " JOIN pg_catalog.pg_namespace n ON n.oid = i.relnamespace"
    " WHERE n.nspname = 'public' AND NOT x.indisprimary"
)


def drop_added_indexes(db: PostgresDatabase) -> None:
    """Remove pg_trgm (and the indexes using it) and every index but the primary keys."""
    db.execute("DROP EXTENSION IF EXISTS pg_trgm CASCADE")
    for (name,) in db.execute(_OUR_INDEXES):
        db.execute(f'DROP INDEX IF EXISTS public."{name}"')


@pytest.fixture
def db(postgres_clean: PostgresDatabase) -> Iterator[PostgresDatabase]:
    """The session database with only its primary keys, before and after the test."""
    drop_added_indexes(postgres_clean)
    yield postgres_clean
    drop_added_indexes(postgres_clean)


def doctor(dsn: str, *extra: str) -> tuple[int, dict[str, Any]]:
    """Run `rag-agent doctor --json` against ``dsn``; return the exit code and the report."""
    code, out, err = run("doctor", "--dsn", dsn, "--json", *extra)
    assert without_dsn_warning(err) == "", err
    return code, json.loads(out)


def column(report: dict[str, Any], table: str, name: str) -> dict[str, Any]:
    """One column's entry of the report."""
    return next(c for c in report["columns"] if (c["table"], c["column"]) == (table, name))


class TestDoctorOnPostgres:
    """The facts read from pg_catalog, the verdicts, and the statements that fix them."""

    def test_without_indexes_it_fails_and_says_what_to_run(self, db: PostgresDatabase) -> None:
        """Only primary keys: exit 1, leads.email needs lower(email), pg_trgm comes first."""
        code, report = doctor(db.reader_dsn)
        assert code == 1
        assert report["role"] == {
            "name": db.reader_role,
            "superuser": False,
            "bypassrls": False,
            "writable_tables": [],
        }
        assert report["problems"] == []
        assert column(report, "leads", "id")["served_by"] == "leads_pkey"
        email = column(report, "leads", "email")
        assert (email["operator"], email["served"]) == ("ieq", False)
        assert email["statement"] == (
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS leads_email_lower_idx "
            "ON public.leads (lower(email));"
        )
        company = column(report, "leads", "company_name")
        assert (company["operator"], company["index"]) == ("icontains", "gin_trgm_ops")
        assert report["statements"][0] == "CREATE EXTENSION IF NOT EXISTS pg_trgm;"
        assert "pg_trgm is not installed" in " ".join(report["notes"])

    def test_running_the_printed_statements_makes_it_pass(self, db: PostgresDatabase) -> None:
        """Every statement it prints runs as printed; afterwards every column is served."""
        _, before = doctor(db.reader_dsn)
        for statement in before["statements"]:
            db.execute(statement)  # autocommit: CONCURRENTLY cannot run in a transaction
        code, after = doctor(db.reader_dsn)
        assert code == 0
        assert after["ok"] is True
        assert after["statements"] == []
        assert column(after, "leads", "email")["served_by"] == "leads_email_lower_idx"
        assert column(after, "leads", "company_name")["served_by"] == (
            "leads_company_name_trgm_idx"
        )

    def test_indexes_are_matched_by_what_they_index(self, db: PostgresDatabase) -> None:
        """Odd names, a leading column of a wider index: served; a plain email btree is not."""
        db.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        db.execute("CREATE INDEX whatever_1 ON leads (client_id, created_at)")
        db.execute("CREATE INDEX whatever_2 ON leads USING gin (title gin_trgm_ops)")
        db.execute("CREATE INDEX leads_email_lower_looking_name ON leads (email)")
        db.execute("CREATE INDEX whatever_3 ON leads (lower(email)) WHERE status = 'new'")
        _, report = doctor(db.reader_dsn)
        assert column(report, "leads", "client_id")["served_by"] == "whatever_1"
        assert column(report, "leads", "created_at")["served_by"] is None
        assert column(report, "leads", "title")["served_by"] == "whatever_2"
        assert column(report, "leads", "email")["served_by"] is None
        assert "CREATE EXTENSION IF NOT EXISTS pg_trgm;" not in report["statements"]

    def test_a_writer_role_is_a_problem(self, db: PostgresDatabase) -> None:
        """The read-write role gets exit 1 for its write grants, table by table."""
        code, report = doctor(db.writer_dsn)
        assert code == 1
        assert "leads" in report["role"]["writable_tables"]
        assert any("grant SELECT only" in problem for problem in report["problems"])

    def test_a_superuser_is_reported_not_refused(self, db: PostgresDatabase) -> None:
        """The admin role is described (superuser) rather than refused as the facade would."""
        code, report = doctor(db.admin_dsn)
        assert code == 1
        assert report["role"]["superuser"] is True
        assert any("superuser" in problem for problem in report["problems"])

    def test_human_output_and_the_environment_dsn(
        self, db: PostgresDatabase, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """RAG_POSTGRES_DSN is used without --dsn; a terminal gets the table and the SQL."""
        monkeypatch.setenv("RAG_POSTGRES_DSN", db.reader_dsn)
        code, out, err = run("doctor", tty=True)
        assert code == 1, err
        assert out.startswith(f"postgres: database {db.name} on 127.0.0.1:")
        assert f"role {db.reader_role}:\n  ok:" in out
        assert any(
            line.split()[:5] == ["leads", "email", "ieq", "btree", "on"] and "MISSING" in line
            for line in out.splitlines()
        )
        assert "ON public.leads (lower(email));" in out

    def test_inspection_facts(self, db: PostgresDatabase) -> None:
        """inspect_database returns the readable tables, the role and the indexes as facts."""
        facts = inspect_database(db.reader_dsn)
        assert "leads" in facts.tables
        assert facts.role is not None and facts.role.name == db.reader_role
        assert {i.name for i in facts.indexes if i.table == "leads"} == {"leads_pkey"}
