"""``rag-agent setup`` against the real PostgreSQL: a scratch database, created and dropped."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from rag_agent.cli import main
from rag_agent.cli.setup import reader_dsn
from rag_agent.ops.sample import SAMPLE_TABLES, sample_rows
from tests.conftest import POSTGRES_ADMIN_DSN, require_service
from tests.support.leftovers import scratch_name

pytestmark = pytest.mark.postgres


def _admin() -> psycopg.Connection[Any] | None:
    try:
        return psycopg.connect(POSTGRES_ADMIN_DSN, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError:
        return None


@pytest.fixture
def scratch() -> Iterator[tuple[str, str]]:
    """An empty database and a role name for it, named as the suite names what it makes (a
    killed run's are swept at the next start); both dropped after."""
    admin = _admin()
    require_service(admin is not None, f"PostgreSQL not reachable at {POSTGRES_ADMIN_DSN!r}")
    assert admin is not None
    name = scratch_name("setup")
    role = f"{name}_reader"
    with admin:
        admin.execute(f"CREATE DATABASE {name}".encode())
    try:
        yield make_conninfo(POSTGRES_ADMIN_DSN, dbname=name), role
    finally:
        with psycopg.connect(POSTGRES_ADMIN_DSN, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)".encode())
            conn.execute(f"DROP ROLE IF EXISTS {role}".encode())


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def stored_password(role: str) -> str | None:
    with psycopg.connect(POSTGRES_ADMIN_DSN, autocommit=True) as conn:
        row = conn.execute(b"SELECT rolpassword FROM pg_authid WHERE rolname = %s", (role,))
        found = row.fetchone()
    return None if found is None else found[0]


def setup_json(dsn: str, role: str, *extra: str) -> dict[str, Any]:
    code, out, err = run("setup", "--dsn", dsn, "--role", role, "--json", *extra)
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


class TestSetup:
    def test_creates_loads_and_grants_select_only(self, scratch: tuple[str, str]) -> None:
        """Tables exist with the sample's rows, and the role may read them and nothing else."""
        dsn, role = scratch
        result = setup_json(dsn, role, "--show-password")
        assert result["role_created"] is True and result["password"] == "generated"
        assert result["loaded"] == {t: len(sample_rows(t)) for t in SAMPLE_TABLES}
        reader = result["reader_dsn"]
        assert conninfo_to_dict(reader)["user"] == role
        with psycopg.connect(reader, autocommit=True) as conn:
            for table in result["granted"]:
                count = conn.execute(f"SELECT count(*) FROM {table}".encode()).fetchone()
                assert count is not None and count[0] == len(sample_rows(table))
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(b"DELETE FROM leads")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(b"CREATE TABLE public.mine (id int)")

    def test_is_idempotent(self, scratch: tuple[str, str]) -> None:
        """A second run changes nothing: same rows, the role kept with its password."""
        dsn, role = scratch
        first = setup_json(dsn, role, "--show-password")
        second = setup_json(dsn, role, "--show-password")
        assert second["role_created"] is False and second["password"] == "unchanged"
        assert second["loaded"] == first["loaded"] and second["granted"] == first["granted"]
        with psycopg.connect(first["reader_dsn"], autocommit=True) as conn:  # still valid
            count = conn.execute(b"SELECT count(*) FROM leads").fetchone()
            assert count is not None and count[0] == len(sample_rows("leads"))

    def test_reset_password_and_a_given_one(
        self, scratch: tuple[str, str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """--reset-password draws a new password; RAG_READER_PASSWORD sets the one given."""
        dsn, role = scratch
        first = setup_json(dsn, role, "--show-password", "--no-sample")
        assert first["loaded"] == {}
        stored = [stored_password(role)]
        unchanged = setup_json(dsn, role, "--no-sample")
        assert unchanged["password"] == "unchanged" and stored_password(role) == stored[0]
        reset = setup_json(dsn, role, "--show-password", "--no-sample", "--reset-password")
        assert reset["password"] == "generated" and reset["reader_dsn"] != first["reader_dsn"]
        stored.append(stored_password(role))
        monkeypatch.setenv("RAG_READER_PASSWORD", "a chosen 'pass' word")
        given = setup_json(dsn, role, "--show-password", "--no-sample")
        assert given["password"] == "given"
        assert conninfo_to_dict(given["reader_dsn"])["password"] == "a chosen 'pass' word"
        stored.append(stored_password(role))
        # The local server trusts 127.0.0.1, so the catalog shows each change of password.
        assert len(set(stored)) == 3 and all(s and s.startswith("SCRAM-") for s in stored)
        psycopg.connect(given["reader_dsn"]).close()

    def test_password_masked_on_screen_unless_asked(self, scratch: tuple[str, str]) -> None:
        """The report masks the password and names the next commands."""
        dsn, role = scratch
        code, out, err = run("setup", "--dsn", dsn, "--role", role, "--no-sample")
        assert code == 0, err
        assert "password=***" in out or ":***@" in out
        assert "rag-agent doctor" in out and "export RAG_POSTGRES_DSN=" in out
        code, again, err = run("setup", "--dsn", dsn, "--role", role, "--no-sample")
        assert code == 0, err
        # The role kept a password this run does not know: the DSN shows none, and its user.
        assert f"user={role}" in again and "***" not in again
        assert "kept its password" in again

    def test_doctor_reports_the_role_as_a_reader(self, scratch: tuple[str, str]) -> None:
        """rag-agent doctor with the printed reader DSN finds no privilege problem."""
        dsn, role = scratch
        reader = setup_json(dsn, role, "--show-password")["reader_dsn"]
        code, out, err = run("doctor", "--dsn", reader, "--json")
        report = json.loads(out)
        assert report["role"]["name"] == role, err
        assert report["role"]["superuser"] is False and report["role"]["bypassrls"] is False
        assert report["problems"] == []
        # setup created every index the doctor checks for: setup -> doctor passes.
        assert (report["missing_required"], report["missing_recommended"]) == (0, 0)
        assert report["ok"] is True and code == 0

    def test_without_indexes_doctor_separates_required_from_recommended(
        self, scratch: tuple[str, str]
    ) -> None:
        """--no-indexes: the doctor fails on the required (point lookup) indexes alone, and
        lists the recommended ones apart."""
        dsn, role = scratch
        result = setup_json(dsn, role, "--show-password", "--no-indexes", "--no-sample")
        assert result["indexes"] == []
        code, out, _ = run("doctor", "--dsn", result["reader_dsn"], "--json")
        report = json.loads(out)
        assert code == 1 and report["ok"] is False
        required = {(c["table"], c["column"]) for c in report["columns"] if c["required"]}
        missing = {(c["table"], c["column"]) for c in report["columns"] if c["served"] is False}
        assert ("leads", "client_id") in required & missing
        assert ("leads", "email") in required & missing
        assert report["missing_recommended"] > 0

    def test_refuses_a_role_that_is_not_an_identifier(self, scratch: tuple[str, str]) -> None:
        """A role name is an identifier, never SQL."""
        dsn, _ = scratch
        code, _, err = run("setup", "--dsn", dsn, "--role", 'x"; DROP TABLE leads; --')
        assert code == 2 and "identifier" in err


class TestReaderDsn:
    def test_url_form(self) -> None:
        """A URL keeps host, port, database and options; user and password are replaced."""
        dsn = reader_dsn("postgresql://admin:pw@db:5433/app?sslmode=require", "r", "p@ss/w#d")
        assert dsn == "postgresql://r:p%40ss%2Fw%23d@db:5433/app?sslmode=require"
        assert conninfo_to_dict(dsn)["password"] == "p@ss/w#d"

    def test_keyword_form(self) -> None:
        """A key=value DSN gets user and password keys; no password leaves none."""
        dsn = reader_dsn("host=127.0.0.1 dbname=app user=postgres password=x", "r", None)
        assert conninfo_to_dict(dsn) == {"host": "127.0.0.1", "dbname": "app", "user": "r"}
