"""The PostgreSQL backend (any PostgreSQL, including Supabase's database by its DSN).

Read-only is enforced by the database, not only by this code: the backend's connections open
with ``default_transaction_read_only=on`` and ``statement_timeout`` as session defaults, so every
read is one statement (one execute, one round trip) in a server-side ``READ ONLY`` transaction.
Behind a transaction pooler (``transaction_pooler=True``), where session settings do not stick,
each read sends ``BEGIN READ ONLY``, ``SET LOCAL statement_timeout``, the ``SELECT`` and
``COMMIT`` as four executes in one pipeline instead. At start-up a read-only backend refuses a
superuser or ``BYPASSRLS`` role unless ``allow_privileged=True``. Writes (``PersistenceAgent``
only) run in explicit ``READ WRITE`` transactions with ``SET LOCAL statement_timeout``.

Thread-safety: a backend is safe to share between threads; its pool hands each call its own
connection, and the cached catalog is replaced, never mutated.

Example::

    facade = create_read_only_facade(kind="postgres", dsn="postgresql://reader@db/app")
    with facade:
        page = facade.read("leads", [Filter("email", Op.EQ, "a@x.io")], limit=10)
"""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections.abc import Callable, Collection, Mapping, Sequence
from collections.abc import Set as AbstractSet
from types import MappingProxyType
from typing import Any, NamedTuple

from persistence._closing import Closing
from persistence._logs import get_logger
from persistence._options import check_options, require_text
from persistence.capabilities import Capabilities
from persistence.errors import (
    BackendError,
    ColumnNotAllowedError,
    ConfigurationError,
    PersistenceError,
    PersistencePermissionError,
)
from persistence.query import Filter, Page, Query

try:
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import conninfo_to_dict
    from psycopg.pq import TransactionStatus
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool
except ImportError as exc:  # pragma: no cover - exercised only without the extra installed
    raise ConfigurationError(
        "the postgres backend needs psycopg 3 and psycopg_pool: "
        'pip install "readonly-rag[postgres]"'
    ) from exc

from persistence.backends import _pg_sql
from persistence.backends._pg_errors import is_connection_lost, translate
from persistence.backends._pg_sql import ColumnType

__all__ = ["PostgresBackend", "create_backend"]

log = get_logger("persistence.postgres")

Row = dict[str, Any]


class _Table(NamedTuple):
    """One table of the catalog: its column types, names in table order, and name set."""

    types: Mapping[str, ColumnType]
    names: tuple[str, ...]
    column_set: frozenset[str]


#: Table name -> its columns; replaced as a whole on reload, never mutated.
Catalog = Mapping[str, _Table]

DEFAULT_STATEMENT_TIMEOUT_MS = 5000

_CATALOG_SQL = b"""
SELECT c.relname, a.attname, t.typname, t.typcategory,
       has_table_privilege(c.oid, 'INSERT, UPDATE, DELETE') AS writable
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid
JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
WHERE n.nspname = %s AND c.relkind IN ('r', 'v', 'm', 'p', 'f')
  AND a.attnum > 0 AND NOT a.attisdropped
  AND has_column_privilege(c.oid, a.attnum, 'SELECT')
ORDER BY c.relname, a.attnum
"""
_ROLE_SQL = (
    b"SELECT current_user, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user"
)
# Moves an identity/serial sequence past explicitly written ids, never backwards, so that a later
# insert without an id does not collide (the memory backend behaves the same way).
_BUMP_SEQUENCE_SQL = b"""
SELECT setval(s.seq::regclass, s.m) FROM (
  SELECT pg_get_serial_sequence(%s, 'id') AS seq, (SELECT max(id) FROM {table}) AS m
) AS s
WHERE s.seq IS NOT NULL AND s.m >= 1
  AND s.m > COALESCE(pg_sequence_last_value(s.seq::regclass), 0)
"""
_RESET_STATEMENTS = (b"RESET ALL", b"SELECT pg_advisory_unlock_all()", b"UNLISTEN *")
_CATALOG_RETRY_SECONDS = 5.0
_STATEMENT_CACHE_SIZE = 1024


def _reset_connection(conn: psycopg.Connection[Any]) -> None:
    """Bring a connection back to its session defaults: no transaction, SET or advisory lock."""
    _end_transaction(conn)
    for statement in _RESET_STATEMENTS:
        conn.execute(statement)


def _read_write_transactions(conn: psycopg.Connection[Any]) -> None:
    """A writer's ``transaction()`` blocks begin READ WRITE (its session default is READ ONLY)."""
    conn.read_only = False


class PostgresBackend(Closing):
    """psycopg 3 over a ``psycopg_pool`` pool, opened on first use; see the module docstring.

    ``read_only=True`` (the facade's backend) refuses writes itself, runs reads in ``READ ONLY``
    transactions and checks the role's privileges at start-up.
    """

    name = "postgres"

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
    ) -> None:
        self._dsn = dsn
        self._read_only = read_only
        self._schema = schema
        self._timeout_ms = statement_timeout_ms
        self._pool_sizes = (pool_min_size, pool_max_size)
        self._pool_times = (pool_timeout, max_idle, max_lifetime)
        if prepared_statements is None:
            prepared_statements = not transaction_pooler
        self._pooled = transaction_pooler
        self._connect_kwargs: dict[str, Any] = {
            "autocommit": True,
            "connect_timeout": max(1, round(connect_timeout)),
            # None turns server-side prepared statements off (PgBouncer/Supavisor transaction mode).
            "prepare_threshold": 5 if prepared_statements else None,
        }
        if not transaction_pooler:
            # The session's defaults, fixed at connect: every transaction on these connections is
            # READ ONLY with the timeout unless a write explicitly begins READ WRITE. A read is
            # then a single statement (one execute, no BEGIN/SET/COMMIT: see the docs' figures).
            # A transaction pooler does not keep session state, so there each read sends its own
            # BEGIN READ ONLY and SET LOCAL instead.
            base = conninfo_to_dict(dsn).get("options") or ""
            self._connect_kwargs["options"] = (
                f"{base} -c default_transaction_read_only=on "
                f"-c statement_timeout={int(statement_timeout_ms)}"
            ).strip()
        self._allow_privileged = allow_privileged
        self._clock = clock
        self._capabilities = Capabilities()
        self._lock = threading.Lock()
        self._pool: ConnectionPool[psycopg.Connection[Any]] | None = None
        self._closed = False
        self._catalog: Catalog = {}
        self._catalog_loaded_at = float("-inf")
        self._set_timeout = (
            sql.SQL("SET LOCAL statement_timeout = {}")
            .format(sql.Literal(int(statement_timeout_ms)))
            .as_bytes(None)
        )
        self._statements: dict[tuple[Any, ...], bytes] = {}

    # --- life cycle ----------------------------------------------------------------------------

    @property
    def capabilities(self) -> Capabilities:
        return self._capabilities

    def _ensure_pool(self) -> ConnectionPool[psycopg.Connection[Any]]:
        pool = self._pool
        if pool is not None:
            return pool
        with self._lock:
            if self._closed:
                raise BackendError("postgres backend is closed", backend="postgres")
            if self._pool is None:
                self._start_up()
                pool = ConnectionPool(
                    self._dsn,
                    kwargs=self._connect_kwargs,
                    configure=None if self._read_only else _read_write_transactions,
                    open=False,
                    name="readonly-rag",
                    min_size=self._pool_sizes[0],
                    max_size=self._pool_sizes[1],
                    timeout=self._pool_times[0],
                    max_idle=self._pool_times[1],
                    max_lifetime=self._pool_times[2],
                )
                pool.open(wait=False)
                self._pool = pool
            return self._pool

    def _start_up(self) -> None:
        """One direct connection: fail fast when unreachable, check the role, load the catalog."""
        try:
            with psycopg.connect(self._dsn, **self._connect_kwargs) as conn:
                role = conn.execute(_ROLE_SQL).fetchone()
                self._load_catalog(conn)
        except PersistenceError:
            raise
        except Exception as exc:
            raise translate(exc, "connect") from exc
        if role is not None:
            self._check_role(str(role[0]), bool(role[1]), bool(role[2]))

    def _check_role(self, user: str, superuser: bool, bypass_rls: bool) -> None:
        if not self._read_only:
            return
        if superuser or bypass_rls:
            what = "a superuser" if superuser else "a BYPASSRLS role"
            if not self._allow_privileged:
                raise ConfigurationError(
                    f"postgres role {user!r} is {what}: connect the read-only facade as a "
                    "least-privilege role (see docs/backends/postgres.md), or pass "
                    "allow_privileged=True to accept the risk"
                )
            log.warning("postgres.privileged_role", role=user, privilege=what)
        writable = sorted(self._writable)
        if writable:
            log.warning(
                "postgres.role_can_write",
                role=user,
                tables=writable,
                hint="grant the read-only role SELECT only",
            )

    def close(self) -> None:
        """Close the pool; the backend may not be used afterwards."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    # --- catalog -------------------------------------------------------------------------------

    def _load_catalog(self, conn: psycopg.Connection[Any]) -> None:
        tables: dict[str, dict[str, ColumnType]] = {}
        writable: set[str] = set()
        for table, column, type_name, category, can_write in conn.execute(
            _CATALOG_SQL, (self._schema,)
        ):
            tables.setdefault(table, {})[column] = ColumnType(type_name, category)
            if can_write:
                writable.add(table)
        self._writable = frozenset(writable)
        # One snapshot, assigned once: a concurrent reader sees the old catalog or the new one.
        self._catalog = {
            table: _Table(MappingProxyType(columns), tuple(columns), frozenset(columns))
            for table, columns in tables.items()
        }
        self._statements = {}
        self._catalog_loaded_at = self._clock()

    def refresh_catalog(self) -> None:
        """Reload table and column names from the database (after a migration)."""
        self._run(lambda conn: self._load_catalog(conn), "catalog", read=True)

    def _table(self, table: str) -> _Table:
        self._ensure_pool()
        entry = self._catalog.get(table)
        if entry is None and self._clock() - self._catalog_loaded_at >= _CATALOG_RETRY_SECONDS:
            self.refresh_catalog()  # a table created since start-up
            entry = self._catalog.get(table)
        if entry is None:
            raise BackendError(
                f"postgres: table {self._schema}.{table} does not exist or is not readable",
                backend="postgres",
                operation="read",
            )
        return entry

    def columns(self, table: str) -> frozenset[str] | None:
        return self._table(table).column_set

    def _require_columns(self, table: str, names: Collection[str], operation: str) -> _Table:
        """``table``'s catalog entry; ``ColumnNotAllowedError`` names the first missing column.

        "First" is in the order given, or sorted when ``names`` is a set.
        """
        entry = self._table(table)
        if not entry.column_set.issuperset(names):
            ordered = sorted(names) if isinstance(names, AbstractSet) else names
            column = next(c for c in ordered if c not in entry.column_set)
            raise ColumnNotAllowedError(
                f"table {table!r} has no column {column!r}",
                table=table,
                column=column,
                operation=operation,
            )
        return entry

    def _checked_filters(
        self,
        table: str,
        filters: Sequence[Filter],
        operation: str,
        referenced: Collection[str] | None = None,
    ) -> _Table:
        """``table``'s catalog entry, once the filters' values suit their columns' types.

        Every ``referenced`` column (the filters' when ``None``) must exist.
        """
        names = [f.column for f in filters] if referenced is None else referenced
        entry = self._require_columns(table, names, operation)
        for flt in filters:
            _pg_sql.check_value(table, flt, entry.types[flt.column])
        return entry

    # --- reads ---------------------------------------------------------------------------------

    def read(self, query: Query) -> Page:
        # Filter, order and projected columns alike must exist.
        entry = self._checked_filters(
            query.table, query.filters, "read", query.referenced_columns()
        )
        columns = entry.names if query.columns is None else query.columns
        # Values never change the SQL text, so one statement serves every query of this shape.
        shape = (
            query.table,
            tuple((f.column, f.op, f.value is True) for f in query.filters),
            columns,
            query.order,
        )
        statement = self._statements.get(shape)
        if statement is None:
            if len(self._statements) >= _STATEMENT_CACHE_SIZE:
                self._statements = {}
            composed = _pg_sql.build_read(query, self._schema, columns, "id" in entry.column_set)
            statement = self._statements[shape] = composed.as_bytes(None)
        rows = self._select(statement, _pg_sql.read_params(query), "read")
        return Page(
            rows=[dict(zip(columns, row[2:], strict=True)) for row in rows if row[1] is not None],
            total_count=int(rows[0][0]) if rows else 0,
        )

    def count(self, table: str, filters: Sequence[Filter]) -> int:
        self._checked_filters(table, filters, "count")
        statement = _pg_sql.build_count(table, self._schema, filters).as_bytes(None)
        rows = self._select(statement, _pg_sql.filter_params(filters), "count")
        return int(rows[0][0])

    def _select(self, statement: bytes, params: list[Any], operation: str) -> list[Any]:
        def direct(conn: psycopg.Connection[Any]) -> list[Any]:
            # One statement in an implicit transaction, READ ONLY by the session's default.
            return _cursor(conn).execute(statement, params).fetchall()

        def pooled(conn: psycopg.Connection[Any]) -> list[Any]:
            # Four statements, one execute each, sent in one pipeline: one round trip.
            cursor = conn.cursor()
            with conn.pipeline():
                conn.execute(b"BEGIN READ ONLY")
                conn.execute(self._set_timeout)
                cursor.execute(statement, params)
                conn.execute(b"COMMIT")
            return cursor.fetchall()

        rows: list[Any] = self._run(pooled if self._pooled else direct, operation, read=True)
        return rows

    def _run(
        self, work: Callable[[psycopg.Connection[Any]], Any], operation: str, *, read: bool
    ) -> Any:
        """Run ``work`` on a pooled connection; translate errors; retry a read once if lost."""
        pool = self._ensure_pool()
        for attempt in (1, 2):
            try:
                conn = pool.getconn()
            except Exception as exc:
                raise translate(exc, operation) from exc
            clean = False
            try:
                result = work(conn)
                clean = True
                return result
            except PersistenceError:
                raise
            except Exception as exc:
                if read and attempt == 1 and is_connection_lost(exc):
                    log.info("postgres.retry", operation=operation, error=type(exc).__name__)
                    pool.check()  # drop the other idle connections the server may have lost
                    continue
                raise translate(exc, operation) from exc
            finally:
                _give_back(pool, conn, clean)
        raise AssertionError("unreachable")  # pragma: no cover

    # --- writes (PersistenceAgent only) ----------------------------------------------------------

    def _refuse_write(self, operation: str, table: str) -> None:
        if self._read_only:
            raise PersistencePermissionError(
                f"{operation} on {table!r} refused: this postgres backend is read-only",
                table=table,
                operation=operation,
            )

    def _checked_row(self, table: str, row: Mapping[str, Any], operation: str) -> Row:
        clean = {k: v for k, v in row.items() if not (k == "id" and v is None)}
        self._require_columns(table, list(clean), operation)
        return clean

    def _write(
        self,
        table: str,
        rows: Sequence[Mapping[str, Any]],
        operation: str,
        build: Callable[[Row], sql.Composed],
    ) -> list[Row]:
        self._refuse_write(operation, table)
        checked = [self._checked_row(table, row, operation) for row in rows]
        bump = "id" in self._table(table).column_set and any("id" in row for row in checked)

        def work(conn: psycopg.Connection[Any]) -> list[Row]:
            stored: list[Row] = []
            with conn.transaction(), conn.cursor(row_factory=dict_row) as cursor:
                cursor.execute(self._set_timeout)
                for row in checked:
                    cursor.execute(build(row), list(row.values()))
                    stored.extend(cursor.fetchall())
                if bump:
                    cursor.execute(
                        sql.SQL(_BUMP_SEQUENCE_SQL.decode()).format(
                            table=sql.Identifier(self._schema, table)
                        ),
                        (sql.Identifier(self._schema, table).as_string(None),),
                    )
            return stored

        result: list[Row] = self._run(work, operation, read=False)
        return result

    def insert(self, table: str, rows: Sequence[Mapping[str, Any]]) -> list[Row]:
        return self._write(
            table, rows, "insert", lambda row: _pg_sql.build_insert(table, self._schema, row)
        )

    def upsert(
        self, table: str, rows: Sequence[Mapping[str, Any]], on_conflict: str = "id"
    ) -> list[Row]:
        self._require_columns(table, (on_conflict,), "upsert")
        return self._write(
            table,
            rows,
            "upsert",
            lambda row: _pg_sql.build_upsert(table, self._schema, row, on_conflict),
        )

    def delete(self, table: str, filters: Sequence[Filter]) -> int:
        self._refuse_write("delete", table)
        self._checked_filters(table, filters, "delete")
        statement = _pg_sql.build_delete(table, self._schema, filters)
        params = _pg_sql.filter_params(filters)

        def work(conn: psycopg.Connection[Any]) -> int:
            with conn.transaction(), conn.cursor() as cursor:
                cursor.execute(self._set_timeout)
                cursor.execute(statement, params)
                return cursor.rowcount

        result: int = self._run(work, "delete", read=False)
        return result

    def __repr__(self) -> str:
        mode = "read-only" if self._read_only else "read-write"
        return f"PostgresBackend({mode}, schema={self._schema!r})"


_CURSORS: weakref.WeakKeyDictionary[psycopg.Connection[Any], psycopg.Cursor[Any]] = (
    weakref.WeakKeyDictionary()
)


def _cursor(conn: psycopg.Connection[Any]) -> psycopg.Cursor[Any]:
    """The connection's reusable cursor: creating one per call costs a fifth of a lookup."""
    cursor = _CURSORS.get(conn)
    if cursor is None or cursor.closed:
        cursor = _CURSORS[conn] = conn.cursor()
    return cursor


def _give_back(
    pool: ConnectionPool[psycopg.Connection[Any]], conn: psycopg.Connection[Any], clean: bool
) -> None:
    """Return ``conn`` to the pool, reset first unless the call ended cleanly.

    A clean read is one SELECT in an implicit transaction and leaves nothing behind, so it skips
    the reset's round trip; any failure may have left state, so the connection is reset, or
    closed (and replaced by the pool) when even that fails.
    """
    if not clean and not conn.closed:
        try:
            _reset_connection(conn)
        except psycopg.Error:
            conn.close()
    pool.putconn(conn)


def _end_transaction(conn: psycopg.Connection[Any]) -> None:
    """Roll back whatever a failed call left open, so the pool gets an idle connection."""
    if conn.closed or conn.pgconn.transaction_status == TransactionStatus.IDLE:
        return
    # If even this fails, the pool discards the connection it cannot bring back to IDLE.
    with contextlib.suppress(psycopg.Error):
        conn.execute(b"ROLLBACK")


# --- factory -----------------------------------------------------------------------------------

_INT_OPTIONS = ("pool_min_size", "pool_max_size", "statement_timeout_ms")
_FLOAT_OPTIONS = ("pool_timeout", "connect_timeout", "max_idle", "max_lifetime")
_BOOL_OPTIONS = ("prepared_statements", "transaction_pooler", "allow_privileged")
_OPTIONS = frozenset((*_INT_OPTIONS, *_FLOAT_OPTIONS, *_BOOL_OPTIONS, "schema", "clock"))


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
    ``transaction_pooler``), ``allow_privileged`` (False).
    """
    dsn = require_text(
        "postgres", "dsn", dsn, what="a connection string", variable="RAG_POSTGRES_DSN"
    )
    _check_options(options)
    return PostgresBackend(dsn, read_only=read_only, **options)
