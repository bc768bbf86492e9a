"""The PostgreSQL backend (any PostgreSQL, including Supabase's database by its DSN).

Read-only is enforced by the database, not only by this code: the backend's connections open
with ``default_transaction_read_only=on`` and ``statement_timeout`` as session defaults, so every
read is one statement (one execute, one round trip) in a server-side ``READ ONLY`` transaction.
Behind a transaction pooler (``transaction_pooler=True``), where session settings do not stick,
each read sends ``BEGIN READ ONLY``, ``SET LOCAL statement_timeout``, the ``SELECT`` and
``COMMIT`` as four executes in one pipeline instead. At start-up a read-only backend refuses a
superuser or ``BYPASSRLS`` role unless ``allow_privileged=True``. Writes (``PersistenceAgent``
only) run in explicit ``READ WRITE`` transactions with ``SET LOCAL statement_timeout``.

This module holds the backend's options and ``inspect_database``; its start-up and catalog checks
are in :mod:`~persistence.backends.postgres.session`, its reads in
:mod:`~persistence.backends.postgres.reads`, its writes in
:mod:`~persistence.backends.postgres.writes`, its connections in
:mod:`~persistence.backends.postgres.pool`, its catalog and role check in
:mod:`~persistence.backends.postgres.catalog`, its SQL in :mod:`~persistence.backends.postgres.sql`.

Thread-safety: a backend is safe to share between threads; its pool hands each call its own
connection, and the cached catalog is replaced, never mutated.

Example::

    facade = create_read_only_facade(kind="postgres", dsn="postgresql://reader@db/app")
    with facade:
        page = facade.read("leads", [Filter("email", Op.EQ, "a@x.io")], limit=10)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from persistence.capabilities import Capabilities
from persistence.errors import ConfigurationError
from persistence.options import check_options, require_text

try:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    # These import psycopg and psycopg_pool too.
    from persistence.backends.postgres.async_reads import AsyncConnections
    from persistence.backends.postgres.catalog import (
        Catalog,
        IndexFacts,
        RoleFacts,
        Table,
        read_available_extensions,
        read_extensions,
        read_indexes,
        read_role,
    )
    from persistence.backends.postgres.errors import translate
    from persistence.backends.postgres.pool import Connections
    from persistence.backends.postgres.reads import _PostgresReads
    from persistence.backends.postgres.search import PostgresSearch
    from persistence.backends.postgres.vectors import SearchSettings
    from persistence.backends.postgres.words import SpellingFacts, read_spelling_facts
    from persistence.backends.postgres.writes import _PostgresWrites
except ImportError as exc:  # pragma: no cover - exercised only without the extra installed
    raise ConfigurationError(
        "the postgres backend needs psycopg 3 and psycopg_pool: "
        'pip install "readonly-rag[postgres]"'
    ) from exc

__all__ = [
    "DatabaseFacts",
    "IndexFacts",
    "PostgresBackend",
    "RoleFacts",
    "SearchSettings",
    "SpellingFacts",
    "create_backend",
    "data_target",
    "inspect_database",
]

Row = dict[str, Any]

DEFAULT_STATEMENT_TIMEOUT_MS = 5000


class PostgresBackend(_PostgresReads, _PostgresWrites):
    """psycopg 3 over a ``psycopg_pool`` pool, opened on first use; see the module docstring.

    ``read_only=True`` (the facade's backend) refuses writes itself, runs reads in ``READ ONLY``
    transactions and checks the role's privileges at start-up.
    """

    name = "postgres"
    #: Every operator.
    capabilities = Capabilities()

    def __init__(
        self,
        dsn: str,
        *,
        read_only: bool = True,
        schema: str = "public",
        statement_timeout_ms: int = DEFAULT_STATEMENT_TIMEOUT_MS,
        pool_min_size: int = 1,
        pool_max_size: int = 10,
        pool_timeout: float = 10.0,
        connect_timeout: float = 5.0,
        max_idle: float = 600.0,
        max_lifetime: float = 3600.0,
        prepared_statements: bool | None = None,
        transaction_pooler: bool = False,
        allow_privileged: bool = False,
        clock: Callable[[], float] = time.monotonic,
        search: SearchSettings | None = None,
    ) -> None:
        self._read_only = read_only
        self._schema = schema
        self._allow_privileged = allow_privileged
        #: Which tables these are, for write versions: server, database and schema.
        self.data_target = data_target(dsn, schema)
        #: The database name alone, for envelopes: no user, password or host.
        self.database = self.data_target[3] or None
        self._catalog = Catalog(schema, clock)
        self._statements: dict[tuple[Any, ...], Any] = {}
        self._connections = Connections(
            dsn,
            read_only=read_only,
            statement_timeout_ms=statement_timeout_ms,
            connect_timeout=connect_timeout,
            prepared_statements=prepared_statements,
            transaction_pooler=transaction_pooler,
            start_up=self._start_up,
            clock=clock,
            min_size=pool_min_size,
            max_size=pool_max_size,
            timeout=pool_timeout,
            max_idle=max_idle,
            max_lifetime=max_lifetime,
        )
        self._started = False
        self._async = AsyncConnections(self._connections, self._start_up_steps)
        self._search = PostgresSearch(self._connections, schema, search or SearchSettings())

    def __repr__(self) -> str:
        mode = "read-only" if self._read_only else "read-write"
        return f"PostgresBackend({mode}, schema={self._schema!r})"


def data_target(dsn: str, schema: str) -> tuple[str, str, str, str, str]:
    """``("postgres", host, port, dbname, schema)`` of ``dsn``, with libpq's defaults filled in
    (port 5432, the user's name as database); no secret. Two DSNs name the same target only
    when they spell the host the same way (``localhost`` is not ``127.0.0.1``)."""
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:  # unparseable: connecting will say so
        parts = {}
    host, port = str(parts.get("host") or ""), str(parts.get("port") or "5432")
    dbname = str(parts.get("dbname") or parts.get("user") or "")
    return ("postgres", host, port, dbname, schema)


class DatabaseFacts(NamedTuple):
    """What :func:`inspect_database` read: the target, the connected role, the readable tables
    with their column types, the tables the role may write, the indexes, the extensions."""

    target: tuple[str, str, str, str, str]
    role: RoleFacts | None
    tables: Mapping[str, Table]
    writable: frozenset[str]
    indexes: tuple[IndexFacts, ...]
    extensions: frozenset[str]
    #: The extensions the server could install (``pg_available_extensions``).
    available: frozenset[str] = frozenset()
    #: Tables under row-level security and tables with a readable words table.
    spelling: SpellingFacts = SpellingFacts()


def inspect_database(
    dsn: str,
    *,
    schema: str = "public",
    connect_timeout: float = 5.0,
    statement_timeout_ms: int = DEFAULT_STATEMENT_TIMEOUT_MS,
) -> DatabaseFacts:
    """Read the catalog facts ``rag-agent doctor`` reports, over one short ``READ ONLY``
    connection: nothing is written, and a privileged role is described rather than refused."""
    try:
        with psycopg.connect(dsn, connect_timeout=max(1, round(connect_timeout))) as conn:
            conn.read_only = True
            conn.execute(
                b"SELECT pg_catalog.set_config('statement_timeout', %s, true)",
                (str(statement_timeout_ms),),
            )
            catalog = Catalog(schema, time.monotonic)
            catalog.load(conn)
            tables = {name: entry for name in catalog.names() if (entry := catalog.get(name))}
            return DatabaseFacts(
                target=data_target(dsn, schema),
                role=read_role(conn),
                tables=tables,
                writable=catalog.writable,
                indexes=read_indexes(conn, schema),
                extensions=read_extensions(conn),
                available=read_available_extensions(conn),
                spelling=read_spelling_facts(conn, schema),
            )
    except psycopg.Error as exc:
        raise translate(exc, "inspect") from exc


# --- factory -----------------------------------------------------------------------------------

_INT_OPTIONS = ("pool_min_size", "pool_max_size", "statement_timeout_ms")
_FLOAT_OPTIONS = ("pool_timeout", "connect_timeout", "max_idle", "max_lifetime")
_BOOL_OPTIONS = ("prepared_statements", "transaction_pooler", "allow_privileged")
_OPTIONS = frozenset((*_INT_OPTIONS, *_FLOAT_OPTIONS, *_BOOL_OPTIONS, "schema", "clock", "search"))


def _check_options(options: Mapping[str, Any]) -> None:
    check_options("kind='postgres'", options, {"dsn", *_OPTIONS})
    for name in _INT_OPTIONS:
        value = options.get(name)
        if value is not None and (type(value) is not int or value <= 0):
            raise ConfigurationError(f"{name}= must be a positive int, not {value!r}")
    for name in _FLOAT_OPTIONS:
        value = options.get(name)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int | float) or value <= 0
        ):
            raise ConfigurationError(f"{name}= must be a positive number, not {value!r}")
    for name in _BOOL_OPTIONS:
        value = options.get(name)
        if value is not None and type(value) is not bool:
            raise ConfigurationError(f"{name}= must be True or False, not {value!r}")
    schema = options.get("schema")
    if schema is not None and not (isinstance(schema, str) and schema.isidentifier()):
        raise ConfigurationError(f"schema= must be a plain identifier, not {schema!r}")
    search = options.get("search")
    if search is not None and not isinstance(search, SearchSettings):
        raise ConfigurationError(f"search= must be a SearchSettings, not {search!r}")
    low, high = options.get("pool_min_size", 1), options.get("pool_max_size", 10)
    if low > high:
        raise ConfigurationError(f"pool_min_size={low} exceeds pool_max_size={high}")


def create_backend(
    *, read_only: bool = True, dsn: str | None = None, **options: Any
) -> PostgresBackend:
    """Factory hook for ``kind="postgres"``: ``dsn=`` is required; nothing connects yet.

    The facade factories pass ``RAG_POSTGRES_DSN`` and ``RAG_STATEMENT_TIMEOUT_MS`` (through
    ``PersistenceSettings``) for the options a caller leaves out; this hook reads no environment.
    Options: ``schema`` (``"public"``), ``statement_timeout_ms`` (5000), ``pool_min_size`` (1),
    ``pool_max_size`` (10), ``pool_timeout`` (10 s), ``connect_timeout`` (5 s), ``max_idle``
    (600 s), ``max_lifetime`` (3600 s), ``transaction_pooler`` (False; True behind
    PgBouncer/Supavisor in transaction mode), ``prepared_statements`` (default: not
    ``transaction_pooler``), ``allow_privileged`` (False), ``search``
    (a :class:`~persistence.backends.postgres.SearchSettings`: text-search configuration,
    declared vector columns, the exact-path and re-rank bounds).
    """
    dsn = require_text(
        "postgres", "dsn", dsn, what="a connection string", variable="RAG_POSTGRES_DSN"
    )
    _check_options(options)
    return PostgresBackend(dsn, read_only=read_only, **options)
