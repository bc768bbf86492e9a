"""The PostgreSQL backend's connections: session defaults fixed at connect, a ``psycopg_pool``
pool opened on first use behind a stash of idle connections
(:mod:`persistence.backends.postgres.stash`), and one :meth:`Connections.run` that lends a
connection, translates failures (:mod:`persistence.backends.postgres.errors`), retries a read once
when the connection was lost, and resets a connection a failed call may have left dirty before
it goes back.

Thread-safety: safe to share between threads; the stash or the pool hands each call its own
connection, and opening or closing them takes a lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool

from persistence.backends.postgres.cursors import CursorCache
from persistence.backends.postgres.errors import is_connection_lost, translate
from persistence.backends.postgres.stash import MAX_HOLD, Stash, reusable
from persistence.errors import BackendError, PersistenceError
from persistence.logs import get_logger

__all__ = ["DEFAULT_STATEMENT_TIMEOUT_MS", "Connections"]

log = get_logger("persistence.postgres")

#: Milliseconds a statement may run before the server cancels it.
DEFAULT_STATEMENT_TIMEOUT_MS = 5000

Connection = psycopg.Connection[Any]
Pool = ConnectionPool[Connection]

_RESET_STATEMENTS = (b"RESET ALL", b"SELECT pg_advisory_unlock_all()", b"UNLISTEN *")


class Connections:
    """The pool of one backend, opened on first use after ``start_up`` ran on a direct
    connection (to fail fast when the server is unreachable, check the role, load the catalog).

    Without ``transaction_pooler``, every transaction on these connections is ``READ ONLY`` with
    the statement timeout by the session's defaults, unless a write explicitly begins ``READ
    WRITE`` (``read_only=False`` makes ``transaction()`` blocks do so): a read is then a single
    statement. A transaction pooler keeps no session state, so there each read sends its own
    ``BEGIN READ ONLY`` and ``SET LOCAL statement_timeout``, and prepared statements are off
    unless ``prepared_statements`` says otherwise.
    """

    def __init__(
        self,
        dsn: str,
        *,
        read_only: bool,
        statement_timeout_ms: int,
        connect_timeout: float,
        prepared_statements: bool | None,
        transaction_pooler: bool,
        start_up: Callable[[Connection], None],
        clock: Callable[[], float] = time.monotonic,
        **pool_options: float,
    ) -> None:
        self.dsn = dsn
        self._clock = clock
        self._pooled = transaction_pooler
        self._start_up = start_up
        # ``ConnectionPool``'s own: min_size, max_size, timeout, max_idle, max_lifetime.
        self._pool_options: dict[str, Any] = {
            **pool_options,
            "configure": None if read_only else _read_write_transactions,
        }
        if prepared_statements is None:
            prepared_statements = not transaction_pooler
        self._connect_kwargs: dict[str, Any] = {
            "autocommit": True,
            "connect_timeout": max(1, round(connect_timeout)),
            # None turns server-side prepared statements off (PgBouncer/Supavisor transaction mode).
            "prepare_threshold": 5 if prepared_statements else None,
        }
        if not transaction_pooler:
            # The session's defaults, fixed at connect (see the class docstring and the docs'
            # figures: no BEGIN/SET/COMMIT round trips for a read).
            base = conninfo_to_dict(dsn).get("options") or ""
            # search_path=pg_catalog: statements name their tables with the schema, and no
            # function or operator of a schema the role's own search_path lists first can stand
            # in for the catalog's (a role's settings are the attacker's to choose).
            self._connect_kwargs["options"] = (
                f"{base} -c default_transaction_read_only=on "
                f"-c statement_timeout={int(statement_timeout_ms)} -c search_path=pg_catalog"
            ).strip()
        #: ``SET LOCAL statement_timeout`` for transactions that begin explicitly.
        self.set_timeout = (
            sql.SQL("SET LOCAL statement_timeout = {}")
            .format(sql.Literal(int(statement_timeout_ms)))
            .as_bytes(None)
        )
        self._lock = threading.Lock()
        self._pool: Pool | None = None
        self._stash: Stash[Connection] = self.new_stash()
        self._closed = False

    def new_stash(self) -> Stash[Any]:
        """An empty stash for a pool of these options (see :mod:`~._pg_stash`): as many
        connections as the pool's ``max_size``, each held at most half its ``max_idle`` and
        ``max_lifetime`` (and never more than ``MAX_HOLD``) before it goes back to the pool."""
        options = self._pool_options
        hold = min(
            MAX_HOLD,
            float(options.get("max_idle", MAX_HOLD * 2)) / 2,
            float(options.get("max_lifetime", MAX_HOLD * 2)) / 2,
        )
        return Stash(int(options.get("max_size", 10)), hold, self._clock)

    @property
    def clock(self) -> Callable[[], float]:
        """Seconds, for how long a connection has been lent (``time.monotonic`` by default)."""
        return self._clock

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._closed

    @property
    def transaction_pooler(self) -> bool:
        """True behind a transaction pooler (each read begins its own transaction)."""
        return self._pooled

    @property
    def connect_kwargs(self) -> dict[str, Any]:
        """What every connection is opened with (the session defaults among them)."""
        return dict(self._connect_kwargs)

    @property
    def pool_timeout(self) -> float:
        """Seconds to wait for a pooled connection."""
        return float(self._pool_options.get("timeout", 30.0))

    @property
    def async_pool_options(self) -> dict[str, Any]:
        """The pool's sizes and timeouts, for the awaitable pool, which only reads."""
        return {k: v for k, v in self._pool_options.items() if k != "configure"}

    def pool(self) -> Pool:
        """The pool, opened (after ``start_up``) on first use; ``BackendError`` once closed."""
        pool = self._pool
        if pool is not None:
            return pool
        with self._lock:
            if self._closed:
                raise BackendError("postgres backend is closed", backend="postgres")
            if self._pool is None:
                self._connect_once()
                pool = ConnectionPool(
                    self.dsn,
                    kwargs=self._connect_kwargs,
                    open=False,
                    name="readonly-rag",
                    **self._pool_options,
                )
                pool.open(wait=False)
                self._pool = pool
            return self._pool

    def _connect_once(self) -> None:
        try:
            with psycopg.connect(self.dsn, **self._connect_kwargs) as conn:
                self._start_up(conn)
        except PersistenceError:
            raise
        except Exception as exc:
            raise translate(exc, "connect") from exc

    def select(self, statement: bytes, params: list[Any], operation: str) -> list[Any]:
        """The rows of one read-only ``statement``, in one round trip."""

        def direct(conn: Connection) -> list[Any]:
            # One statement in an implicit transaction, READ ONLY by the session's default.
            return _CURSORS.of(conn).execute(statement, params).fetchall()

        def pooled(conn: Connection) -> list[Any]:
            # Four statements, one execute each, sent in one pipeline: one round trip.
            cursor = conn.cursor()
            with conn.pipeline():
                conn.execute(b"BEGIN READ ONLY")
                conn.execute(self.set_timeout)
                cursor.execute(statement, params)
                conn.execute(b"COMMIT")
            return cursor.fetchall()

        rows: list[Any] = self.run(pooled if self._pooled else direct, operation, read=True)
        return rows

    def run(self, work: Callable[[Connection], Any], operation: str, *, read: bool) -> Any:
        """Run ``work`` on a lent connection; translate errors; retry a read once if lost."""
        pool = self.pool()
        for attempt in (1, 2):
            conn, lent_at = self._borrow(pool, operation)
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
                    # The other idle connections the server may have lost: stashed ones too.
                    for stashed in self._stash.drain():
                        pool.putconn(stashed)
                    pool.check()
                    continue
                raise translate(exc, operation) from exc
            finally:
                self._return(pool, conn, lent_at, clean)
        raise AssertionError("unreachable")  # pragma: no cover

    def _borrow(self, pool: Pool, operation: str) -> tuple[Connection, float]:
        """A connection and when the pool lent it: the stash's most recent, else the pool's."""
        stash = self._stash
        taken, stale = stash.take()
        for conn in stale:
            pool.putconn(conn)
        if taken is not None:
            return taken
        try:
            conn = pool.getconn()
        except Exception as exc:
            raise translate(exc, operation) from exc
        finally:
            stash.waited()
        return conn, self._clock()

    def _return(self, pool: Pool, conn: Connection, lent_at: float, clean: bool) -> None:
        """Stash ``conn`` when the call ended cleanly and left it idle, else give it back to the
        pool (reset unless clean and idle)."""
        idle = clean and reusable(conn)
        if not (idle and self._stash.offer(conn, lent_at)):
            _give_back(pool, conn, idle)

    def close(self) -> None:
        """Close the pool; no connection is lent afterwards."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        stashed = self._stash.close()
        if pool is not None:
            for conn in stashed:
                pool.putconn(conn)
            pool.close()


def _read_write_transactions(conn: Connection) -> None:
    """A writer's ``transaction()`` blocks begin READ WRITE (its session default is READ ONLY)."""
    conn.read_only = False


#: Each connection's reusable cursor: creating one per call costs a fifth of a lookup.
_CURSORS: CursorCache[psycopg.Cursor[Any]] = CursorCache()


def _give_back(pool: Pool, conn: Connection, clean: bool) -> None:
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


def _reset_connection(conn: Connection) -> None:
    """Bring a connection back to its session defaults: no transaction, SET or advisory lock."""
    _end_transaction(conn)
    for statement in _RESET_STATEMENTS:
        conn.execute(statement)


def _end_transaction(conn: Connection) -> None:
    """Roll back whatever a failed call left open, so the pool gets an idle connection.

    ``rollback()``, not an executed ``ROLLBACK``: it also empties psycopg's cache of prepared
    statements (and the server's, ``DEALLOCATE ALL``). A statement psycopg prepared in a
    pipeline that an error aborted (a statement timeout in a search) was never created on the
    server, yet the cache names it, and every later execute of it on this connection would fail
    with "prepared statement does not exist"; an executed ``ROLLBACK`` empties that cache only
    the first time it runs after the cache was last emptied. Every pipeline of this backend runs
    inside a transaction, so a failed one leaves its transaction open and failed, never idle:
    it always comes through here. Should the rollback fail, the caller closes the connection and
    the pool replaces it.
    """
    if conn.closed or conn.pgconn.transaction_status == TransactionStatus.IDLE:
        return
    conn.rollback()
