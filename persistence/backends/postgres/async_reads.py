"""The PostgreSQL backend's awaitable connections: a ``psycopg_pool.AsyncConnectionPool`` with
the same session defaults, start-up check, retry and reset rules as the blocking pool
(:mod:`persistence.backends.postgres.pool`), whose settings it takes, and the same stash of idle
connections in front of it (:mod:`persistence.backends.postgres.stash`).

The SQL, its parameters and the parsing of its rows are the backend's, shared with the
blocking reads; only the round trip differs. The pool belongs to the event loop that opened it
(asyncio objects do); a call from another loop opens that loop's own pool.

Thread-safety: meant for one event loop at a time; each call borrows its own connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus
from psycopg_pool import AsyncConnectionPool

from persistence.backends.postgres.cursors import CursorCache
from persistence.backends.postgres.errors import is_connection_lost, translate
from persistence.backends.postgres.pool import Connections
from persistence.backends.postgres.stash import Stash, reusable
from persistence.errors import BackendError, PersistenceError
from persistence.logs import get_logger
from persistence.steps import Steps, adrive

__all__ = ["AsyncConnections"]

log = get_logger("persistence.postgres")

AsyncConnection = psycopg.AsyncConnection[Any]
AsyncPool = AsyncConnectionPool[AsyncConnection]
#: What start-up runs on its first connection: steps yielding ``(statement, params)``.
StartUp = Callable[[], Steps[tuple[bytes, Any], None]]

_RESET_STATEMENTS = (b"RESET ALL", b"SELECT pg_advisory_unlock_all()", b"UNLISTEN *")


class AsyncConnections:
    """The awaitable twin of a backend's :class:`~persistence.backends.postgres.pool.Connections`
    (reads only: writes stay with the blocking ``PersistenceAgent``)."""

    def __init__(self, blocking: Connections, start_up: StartUp) -> None:
        self._blocking = blocking
        self._start_up = start_up
        self._pool: AsyncPool | None = None
        self._stash: Stash[AsyncConnection] = blocking.new_stash()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None
        self._started = False
        self._closed = False

    async def pool(self) -> AsyncPool:
        """This loop's pool, opened (after start-up) on first use; ``BackendError`` once
        closed."""
        loop = asyncio.get_running_loop()
        if self._pool is not None and self._loop is loop:
            return self._pool
        if self._lock is None or self._loop is not loop:
            self._lock, self._loop, self._pool = asyncio.Lock(), loop, None
            # Another loop's connections are not this loop's to lend.
            self._stash = self._blocking.new_stash()
        async with self._lock:
            if self._closed or self._blocking.closed:
                raise BackendError("postgres backend is closed", backend="postgres")
            if self._pool is None:
                if not self._started:
                    await self._connect_once()
                pool: AsyncPool = AsyncConnectionPool(
                    self._blocking.dsn,
                    kwargs=self._blocking.connect_kwargs,
                    open=False,
                    name="readonly-rag-async",
                    **self._blocking.async_pool_options,
                )
                # Waiting for the first connection (which the first read needs anyway) leaves
                # no connection attempt in flight should this loop end before the next read.
                try:
                    await pool.open(wait=True, timeout=self._blocking.pool_timeout)
                except Exception as exc:
                    await pool.close()
                    raise translate(exc, "connect") from exc
                self._pool = pool
            return self._pool

    async def _connect_once(self) -> None:
        try:
            conn = await psycopg.AsyncConnection.connect(
                self._blocking.dsn, **self._blocking.connect_kwargs
            )
            async with conn:
                await adrive(self._start_up(), lambda statement: _fetch_all(conn, statement))
        except PersistenceError:
            raise
        except Exception as exc:
            raise translate(exc, "connect") from exc
        self._started = True

    async def select(self, statement: bytes, params: list[Any], operation: str) -> list[Any]:
        """The rows of one read-only ``statement``, as the blocking ``Connections.select``."""
        set_timeout = self._blocking.set_timeout

        async def direct(conn: AsyncConnection) -> list[Any]:
            # As the blocking reads: the connection's own cursor, not a new one per call.
            cursor = await _CURSORS.of(conn).execute(statement, params)
            return await cursor.fetchall()

        async def pooled(conn: AsyncConnection) -> list[Any]:
            cursor = conn.cursor()
            async with conn.pipeline():
                await conn.execute(b"BEGIN READ ONLY")
                await conn.execute(set_timeout)
                await cursor.execute(statement, params)
                await conn.execute(b"COMMIT")
            return await cursor.fetchall()

        work = pooled if self._blocking.transaction_pooler else direct
        rows: list[Any] = await self.run(work, operation)
        return rows

    async def run(
        self, work: Callable[[AsyncConnection], Coroutine[Any, Any, Any]], operation: str
    ) -> Any:
        """Run ``work`` on a pooled connection; translate errors; retry once if lost."""
        pool = await self.pool()
        stash = self._stash
        for attempt in (1, 2):
            conn, lent_at = await self._borrow(pool, stash, operation)
            clean = False
            try:
                result = await work(conn)
                clean = True
                return result
            except PersistenceError:
                raise
            except Exception as exc:
                if attempt == 1 and is_connection_lost(exc):
                    log.info("postgres.retry", operation=operation, error=type(exc).__name__)
                    for stashed in stash.drain():
                        await pool.putconn(stashed)
                    await pool.check()
                    continue
                raise translate(exc, operation) from exc
            finally:
                idle = clean and reusable(conn)
                if not (idle and stash.offer(conn, lent_at)):
                    await _give_back(pool, conn, idle)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _borrow(
        self, pool: AsyncPool, stash: Stash[AsyncConnection], operation: str
    ) -> tuple[AsyncConnection, float]:
        """The stash's most recent connection, else the pool's (as the blocking pool)."""
        taken, stale = stash.take()
        for conn in stale:
            await pool.putconn(conn)
        if taken is not None:
            return taken
        try:
            conn = await pool.getconn()
        except Exception as exc:
            raise translate(exc, operation) from exc
        finally:
            stash.waited()
        return conn, self._blocking.clock()

    async def close(self) -> None:
        """Close this loop's pool; no connection is lent afterwards."""
        self._closed = True
        pool, self._pool = self._pool, None
        stashed = self._stash.close()
        if pool is not None and self._loop is asyncio.get_running_loop():
            for conn in stashed:
                await pool.putconn(conn)
            await pool.close()


#: Each connection's reusable cursor, as the blocking reads keep theirs (a connection serves one
#: task at a time: the stash or the pool lends it whole).
_CURSORS: CursorCache[psycopg.AsyncCursor[Any]] = CursorCache()


async def _fetch_all(conn: AsyncConnection, statement: tuple[bytes, Any]) -> list[Any]:
    cursor = await conn.execute(*statement)
    return await cursor.fetchall()


async def _give_back(pool: AsyncPool, conn: AsyncConnection, clean: bool) -> None:
    """Return ``conn``, reset first unless the call ended cleanly (as the blocking pool)."""
    if not clean and not conn.closed:
        try:
            if conn.pgconn.transaction_status != TransactionStatus.IDLE:
                # rollback(), not ROLLBACK: it also empties the prepared-statement cache a
                # failed pipeline may have left naming a statement the server never created
                # (see the blocking pool's ``_end_transaction``).
                await conn.rollback()
            for statement in _RESET_STATEMENTS:
                await conn.execute(statement)
        except psycopg.Error:
            await conn.close()
    await pool.putconn(conn)
