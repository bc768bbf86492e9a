"""Shared test set-up: no network, hypothesis profiles, local services and the payload corpus."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from persistence import MemoryStore, PersistenceAgent, ReadOnlyPersistenceFacade
from persistence.schema import REFERENCE, SUPABASE_STYLE, SchemaVariant
from tests.data.hostile_payloads import external_payloads, own_payloads
from tests.support.leftovers import (
    LEFTOVERS,
    RECEIVED_SIGNALS,
    install_signal_handlers,
    scratch_name,
    sweep_server,
    sweep_server_dirs,
)

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}

settings.register_profile(
    "default",
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile(
    "ci",
    parent=settings.get_profile("default"),
    derandomize=True,
    print_blob=True,
)
settings.load_profile("ci" if IN_CI else os.environ.get("HYPOTHESIS_PROFILE", "default"))


def require_service(available: bool, reason: str) -> None:
    """Skip with ``reason`` where a local service is missing; fail instead when ``CI=true``."""
    if available:
        return
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: required services must be running)")
    pytest.skip(reason)


def corpus_lines() -> list[str]:
    """The project's own hostile payloads, plus an external corpus when one is named.

    Nothing outside the repository is read unless ``RAG_TEST_PAYLOAD_CORPUS`` names a folder;
    call this inside a test or fixture, never at import time.
    """
    return list(dict.fromkeys((*own_payloads(), *external_payloads())))


def _loopback_only(address: object) -> bool:
    host = address[0] if isinstance(address, tuple) else address
    return isinstance(host, str) and (
        host.startswith("127.") or host in {"localhost", "::1"} or host.startswith("/")
    )


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests may talk to services on 127.0.0.1 only; anything else is a bug in the test."""
    real_connect = socket.socket.connect

    def guarded_connect(self: socket.socket, address: object) -> object:
        if self.family in (socket.AF_INET, socket.AF_INET6) and not _loopback_only(address):
            raise RuntimeError(f"test tried to reach the network: {address!r}")
        return real_connect(self, address)  # type: ignore[arg-type]

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)


#: The harness's own variables (read at import time above and below), kept for every test.
_HARNESS_VARIABLES = frozenset(
    {"RAG_TEST_POSTGRES_DSN", "RAG_TEST_REDIS_URL", "SUPABASE_TEST_URL", "SUPABASE_TEST_KEY"}
)
_LIBRARY_PREFIXES = ("RAG_", "SUPABASE_", "OPENAI_")


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees the library's variables from the shell (a stray ``RAG_MAX_LIMIT=abc`` or an
    ``OPENAI_API_KEY`` would change what it tests); a test sets what it needs itself."""
    for name in list(os.environ):
        if name.upper().startswith(_LIBRARY_PREFIXES) and name not in _HARNESS_VARIABLES:
            monkeypatch.delenv(name)


# --- markers: each test says which local service it needs -------------------------------------

#: fixture -> the marker of the service it needs (fixtures using these inherit the marker).
_SERVICE_FIXTURES = {
    "postgres_db": "postgres",
    "postgres_supabase_db": "postgres",
    "redis_url": "redis",
}
_SERVICE_MARKERS = ("postgres", "redis", "supabase_live")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test with the service it needs, so ``-m memory`` needs none and
    ``-m "not postgres"`` needs no PostgreSQL.

    A test needs a service when it uses the service's fixture, directly or through other fixtures,
    or when it is a parametrised case whose parameter names the backend (``"postgres"``) and so
    reaches the fixture at run time. A test that needs none is marked ``memory``.
    """
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        for fixture, marker in _SERVICE_FIXTURES.items():
            if fixture in fixtures:
                item.add_marker(marker)
        callspec = getattr(item, "callspec", None)
        params = callspec.params.values() if callspec is not None else ()
        named = {value for value in params if isinstance(value, str)}
        for marker in ("postgres", "redis"):
            if marker in named:
                item.add_marker(marker)
        if not any(item.get_closest_marker(name) for name in _SERVICE_MARKERS):
            item.add_marker("memory")


@pytest.fixture
def store() -> Iterator[MemoryStore]:
    """A fresh, private memory store."""
    yield MemoryStore()


@pytest.fixture(scope="module")
def sample_store() -> MemoryStore:
    """A memory store holding the bundled sample, every table (governance ones included), one
    per module."""
    from rag_agent.ops.sample import load_sample

    sample = MemoryStore()
    load_sample(sample)
    return sample


@pytest.fixture(autouse=True)
def _fresh_memory_budgets() -> None:
    """Every test starts with the process-wide memory:// fallback budgets unspent."""
    from rag_agent.runtime.ratelimit import reset_memory_budgets

    reset_memory_budgets()


@pytest.fixture(autouse=True)
def _clean_default_store() -> Iterator[None]:
    """The process-wide default store starts every test empty."""
    from persistence import default_store

    default_store().clear()
    yield
    default_store().clear()


# --- PostgreSQL: one fresh database per test session ---------------------------------------------

POSTGRES_ADMIN_DSN = os.environ.get(
    "RAG_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/postgres"
)


#: The extensions, and the indexes and relations of ``public``: what a test may add to the
#: session database and must not leave to the next module.
_RELATIONS = (
    "SELECT 'extension', extname, '' FROM pg_catalog.pg_extension "
    "WHERE extname <> 'plpgsql' "
    "UNION ALL SELECT CASE c.relkind WHEN 'i' THEN 'index' ELSE 'relation' END, c.relname, "
    "CASE c.relkind WHEN 'i' THEN pg_catalog.pg_get_indexdef(c.oid) "
    "WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW' WHEN 'S' THEN 'SEQUENCE' "
    "ELSE 'TABLE' END "
    "FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'v', 'm', 'i', 'S', 'p')"
)


class PostgresDatabase:
    """The session's database: ``admin_dsn`` (the DSN's own role), ``reader_dsn`` (a NOSUPERUSER
    NOBYPASSRLS role with SELECT only), ``writer_dsn`` (SELECT/INSERT/UPDATE/DELETE); its tables
    are those of ``schema`` (the reference schema unless told)."""

    def __init__(
        self,
        name: str,
        admin_dsn: str,
        reader_dsn: str,
        writer_dsn: str,
        schema: SchemaVariant = REFERENCE,
        *,
        reader_role: str | None = None,
        writer_role: str | None = None,
    ) -> None:
        self.name = name
        self.admin_dsn = admin_dsn
        self.reader_dsn = reader_dsn
        self.writer_dsn = writer_dsn
        self.reader_role = reader_role or f"{name}_r"
        self.writer_role = writer_role or f"{name}_w"
        self.schema = schema
        self._admin: Any = None
        tables = ", ".join(schema.ddl)
        sequences = [t for t, ddl in schema.ddl.items() if "identity" in ddl]
        dirty = " OR ".join(
            [f"EXISTS (SELECT FROM {t})" for t in schema.ddl]
            + [
                "EXISTS (SELECT FROM pg_catalog.pg_sequences WHERE schemaname = 'public' "
                "AND last_value IS NOT NULL AND sequencename IN ("
                + ", ".join(f"'{t}_id_seq'" for t in sequences)
                + "))"
            ]
            * bool(sequences)
        )
        #: One round trip: TRUNCATE only when a table holds a row or an id was drawn.
        self._reset = (
            f"DO $reset$ BEGIN IF {dirty} THEN TRUNCATE {tables} RESTART IDENTITY; END IF; "
            "END $reset$"
        )
        self._pristine: set[tuple[str, str, str]] = set()

    def _connection(self) -> Any:
        import psycopg

        if self._admin is None or self._admin.closed or self._admin.broken:
            self._admin = psycopg.connect(self.admin_dsn, autocommit=True)
        return self._admin

    def execute(self, statement: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        """Run one statement as the admin role (autocommit); return its rows, if any."""
        import psycopg

        query = statement.encode()
        try:
            cursor = self._connection().execute(query, params)
        except psycopg.OperationalError:
            # A test may have ended the admin connection (terminated backends, a restart).
            self.close()
            cursor = self._connection().execute(query, params)
        return cursor.fetchall() if cursor.description else []

    def close(self) -> None:
        """Close the admin connection this object keeps (it reconnects when used again)."""
        if self._admin is not None:
            with contextlib.suppress(Exception):
                self._admin.close()
            self._admin = None

    def add_clients(self, ids: Iterable[object]) -> None:
        """Insert a client for each id (leads refer to their client by a foreign key; clients
        are a governance table, which no ``PersistenceAgent`` writes)."""
        wanted = sorted(set(ids) - {None}, key=str)
        if wanted:
            self.execute(
                "INSERT INTO clients (id, name) SELECT k, 'client ' || k "
                "FROM pg_catalog.unnest(%s) AS k ON CONFLICT (id) DO NOTHING",
                (wanted,),
            )

    @contextlib.contextmanager
    def writer_and_reader(self) -> Iterator[tuple[PersistenceAgent, ReadOnlyPersistenceFacade]]:
        """A writer (read-write role) and a reader (least-privilege role), both pools open, and
        every table emptied once they close.

        Both pools are opened up front: a pool connecting in the background draws from the
        global ``random`` (jitter), which hypothesis rightly reports mid-example.
        """
        from persistence import create_persistence_agent, create_read_only_facade

        with (
            create_persistence_agent(kind="postgres", dsn=self.writer_dsn) as writer,
            create_read_only_facade(kind="postgres", dsn=self.reader_dsn) as reader,
        ):
            writer.count("leads")
            reader.count("leads")
            yield writer, reader
        self.truncate()

    def truncate(self) -> None:
        """Empty every table of the schema and restart its ids at 1 (nothing to do, and no
        TRUNCATE, when every table is empty and no id was drawn)."""
        self.execute(self._reset)

    @contextlib.contextmanager
    def leads(self, statement: str, params: tuple[Any, ...] = ()) -> Iterator[PostgresDatabase]:
        """Emptied tables, then ``statement`` (which fills ``leads``) and ``ANALYZE leads``;
        emptied again on the way out: a module's data for its reads."""
        self.truncate()
        self.execute(statement, params)
        self.execute("ANALYZE leads")
        try:
            yield self
        finally:
            self.truncate()

    def _shape(self) -> set[tuple[str, str, str]]:
        return {(str(k), str(n), str(d)) for k, n, d in self.execute(_RELATIONS)}

    def remember_pristine(self) -> None:
        """Note the extensions, indexes and relations the database has now (its set-up)."""
        self._pristine = self._shape()

    def restore_pristine(self) -> list[str]:
        """Drop the extensions, indexes and relations a test added, recreate the indexes it
        dropped, and empty the tables; returns what was changed (for the curious)."""
        now = self._shape()
        if now == self._pristine:
            self.truncate()
            return []
        changed = []
        for kind, name, definition in sorted(now - self._pristine):
            if kind == "extension":
                self.execute(f'DROP EXTENSION IF EXISTS "{name}" CASCADE')
            elif kind == "index":
                self.execute(f'DROP INDEX IF EXISTS public."{name}" CASCADE')
            elif (kind, name) not in {(k, n) for k, n, _ in self._pristine}:
                self.execute(f'DROP {definition} IF EXISTS public."{name}" CASCADE')
            changed.append(f"-{kind} {name}")
        present = {(k, n) for k, n, _ in self._shape()}
        for kind, name, definition in sorted(self._pristine):
            if kind == "index" and (kind, name) not in present:
                self.execute(definition)
                changed.append(f"+index {name}")
            elif kind == "extension" and (kind, name) not in present:
                self.execute(f'CREATE EXTENSION IF NOT EXISTS "{name}"')
                changed.append(f"+extension {name}")
        self.truncate()
        return changed


def _postgres_admin_connect(dsn: str) -> object | None:
    try:
        import psycopg
    except ImportError:
        return None
    try:
        return psycopg.connect(dsn, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError:
        return None


def _postgres_database(schema: SchemaVariant) -> Iterator[PostgresDatabase]:
    """A database ``rag_test_<pid>_<kind>_<hex>`` with ``schema``'s tables and two login roles;
    dropped at the end, on an interrupt too (``tests.support.leftovers``). Admin DSN:
    ``RAG_TEST_POSTGRES_DSN`` (default: postgres on 127.0.0.1:5432)."""
    import secrets

    from psycopg.conninfo import make_conninfo

    admin = _postgres_admin_connect(POSTGRES_ADMIN_DSN)
    require_service(admin is not None, f"PostgreSQL not reachable at {POSTGRES_ADMIN_DSN!r}")
    import psycopg

    assert isinstance(admin, psycopg.Connection)
    name = scratch_name("db")
    reader, writer = f"{name}_r", f"{name}_w"
    password = secrets.token_hex(16)
    undo = [LEFTOVERS.database(POSTGRES_ADMIN_DSN, name)]
    undo += [LEFTOVERS.role(POSTGRES_ADMIN_DSN, role) for role in (reader, writer)]
    try:
        with admin:
            admin.execute(f"CREATE DATABASE {name}".encode())
            for role in (reader, writer):
                admin.execute(
                    f"CREATE ROLE {role} LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE "
                    f"PASSWORD '{password}'".encode()
                )
        admin_dsn = make_conninfo(POSTGRES_ADMIN_DSN, dbname=name)
        database = PostgresDatabase(
            name,
            admin_dsn,
            make_conninfo(admin_dsn, user=reader, password=password),
            make_conninfo(admin_dsn, user=writer, password=password),
            schema,
        )
        try:
            for statement in schema.statements():
                database.execute(statement)
            for statement in (
                f"GRANT USAGE ON SCHEMA public TO {reader}, {writer}",
                f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {reader}",
                f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO {reader}",
                f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {writer}",
                f"GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO {writer}",
            ):
                database.execute(statement)
            database.remember_pristine()
            yield database
        finally:
            database.close()
    finally:
        for now in undo:  # the database first, then its roles
            now()


#: The session databases made so far (the module-boundary restore looks them up here).
_SESSION_DATABASES: dict[str, PostgresDatabase] = {}


@pytest.fixture(scope="session")
def postgres_db() -> Iterator[PostgresDatabase]:
    """A session database with the reference schema (``persistence.schema.REFERENCE``)."""
    for database in _postgres_database(REFERENCE):
        _SESSION_DATABASES["postgres_db"] = database
        yield database
        del _SESSION_DATABASES["postgres_db"]


@pytest.fixture(scope="session")
def postgres_supabase_db() -> Iterator[PostgresDatabase]:
    """A session database with the uuid-keyed ``persistence.schema.SUPABASE_STYLE`` schema."""
    for database in _postgres_database(SUPABASE_STYLE):
        _SESSION_DATABASES["postgres_supabase_db"] = database
        yield database
        del _SESSION_DATABASES["postgres_supabase_db"]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After a module's last test (its module fixtures finalised): the session databases it
    used get back the extensions, indexes and relations they were made with, so what one module
    installs (pg_trgm, an index) is never what the next one tests by accident."""
    result = yield
    if nextitem is None or nextitem.module is not getattr(item, "module", None):
        for fixture in ("postgres_db", "postgres_supabase_db"):
            database = _SESSION_DATABASES.get(fixture)
            if database is not None and fixture in getattr(item, "fixturenames", ()):
                database.restore_pristine()
    return result


@pytest.fixture
def postgres_clean(postgres_db: PostgresDatabase) -> Iterator[PostgresDatabase]:
    """The session database with every reference table empty before and after the test."""
    postgres_db.truncate()
    yield postgres_db
    postgres_db.truncate()


@pytest.fixture
def postgres_supabase_clean(
    postgres_supabase_db: PostgresDatabase,
) -> Iterator[PostgresDatabase]:
    """The Supabase-style session database, every table empty before and after the test."""
    postgres_supabase_db.truncate()
    yield postgres_supabase_db
    postgres_supabase_db.truncate()


# --- PostgreSQL 18 with pgvector: one embedded server per session -------------------------------


@pytest.fixture(scope="session")
def pgvector_server() -> Iterator[str]:
    """The admin URI of the session's one PostgreSQL 18 with pgvector and pg_trgm available
    (``tests.support.pgvector``); stopped and removed at the end, on an interrupt too."""
    from tests.support.pgvector import embedded_server

    with embedded_server() as uri:
        yield uri


# --- leftovers: swept at the start, removed at the end, on Ctrl-C and SIGTERM too --------------


def pytest_sessionstart(session: pytest.Session) -> None:
    """Install the interrupt handlers; remove what killed sessions left behind."""
    install_signal_handlers()
    sweep_server(POSTGRES_ADMIN_DSN)
    sweep_server_dirs()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[object]:
    """Stop after this test when a signal asked to stop and its ``KeyboardInterrupt`` was
    swallowed (raised inside a finaliser): the run ends as interrupted, fixtures finalised."""
    result = yield
    if RECEIVED_SIGNALS:
        item.session.shouldstop = f"interrupted by signal {RECEIVED_SIGNALS[0]}"
    return result


def pytest_unconfigure(config: pytest.Config) -> None:
    """Whatever a finalizer did not get to (an interrupt during set-up) goes now."""
    LEFTOVERS.clean()


# --- Redis: a unique key prefix per test ---------------------------------------------------------

REDIS_TEST_URL = os.environ.get("RAG_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


@pytest.fixture
def redis_url() -> Iterator[str]:
    """The test Redis URL (``RAG_TEST_REDIS_URL``, default database 15 on 127.0.0.1:6379).

    Skips (fails when ``CI=true``) if Redis is unreachable. Tests must use keys under
    ``redis_key_prefix`` so they never collide; those keys are deleted afterwards.
    """
    try:
        import redis
    except ImportError:
        require_service(False, "the redis client is not installed (extra 'redis')")
        raise
    client = redis.Redis.from_url(REDIS_TEST_URL, socket_connect_timeout=1, socket_timeout=1)
    try:
        client.ping()
    except redis.RedisError:
        client.close()
        require_service(False, f"Redis not reachable at {REDIS_TEST_URL!r}")
    yield REDIS_TEST_URL
    client.close()


@pytest.fixture
def redis_key_prefix(redis_url: str) -> Iterator[str]:
    """A key prefix unique to this test; every key under it is deleted after the test."""
    import secrets

    import redis

    prefix = f"rag_test:{secrets.token_hex(6)}:"
    yield prefix
    client = redis.Redis.from_url(redis_url, socket_connect_timeout=1, socket_timeout=1)
    try:
        keys = list(client.scan_iter(match=f"{prefix}*"))
        if keys:
            client.delete(*keys)
    finally:
        client.close()
