"""A statement timeout inside a pipelined transaction leaves the connection usable, on the real
server with server-side prepared statements on.

psycopg prepares a statement on its sixth execute and records it as prepared when it sends the
``Parse``; in a pipeline that an error aborts, the server skips that ``Parse``, yet psycopg's
cache still names the statement, and every later execute of it on that connection failed with
"prepared statement does not exist" (``BackendError`` 26000), for good. The failed call's
connection must go back with its cache emptied.

The timeouts are forced, not raced: the admin role holds an ``ACCESS EXCLUSIVE`` lock on the
table, so the first statement that reads it waits until the statement timeout cancels it, and
the statements queued after it in the same pipeline are skipped. Calls alternate between locked
(a typed ``QueryTimeoutError``) and free (the same answer every time), on one connection, led by
none or by one free call: a statement executed once per call then reaches its sixth execute in
a locked call under one of the two leads.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import psycopg
import pytest

from persistence import ReadOnlyPersistenceFacade, create_read_only_facade
from persistence.errors import QueryTimeoutError
from tests.conftest import PostgresDatabase
from tests.support.read_plans import holding_leads

pytestmark = pytest.mark.postgres

#: Long enough that a free call on a dozen rows never meets it; each locked call waits it out.
TIMEOUT_MS = 400
#: Locked calls per run: enough for every statement to reach its sixth execute in one of them.
LOCKED_CALLS = 6


@pytest.fixture(scope="module")
def db(postgres_db: PostgresDatabase) -> Iterator[PostgresDatabase]:
    """The session database with the plan tests' leads, written once for the module."""
    with holding_leads(postgres_db) as database:
        yield database


@contextlib.contextmanager
def _locked(db: PostgresDatabase) -> Iterator[None]:
    """The leads table locked against every reader until the block ends."""
    with psycopg.connect(db.admin_dsn) as conn:
        conn.execute("LOCK TABLE leads IN ACCESS EXCLUSIVE MODE")
        yield
        conn.rollback()


def _facade(db: PostgresDatabase, **options: Any) -> ReadOnlyPersistenceFacade:
    # One connection, so every call runs on the connection the locked calls failed on.
    return create_read_only_facade(
        kind="postgres",
        dsn=db.reader_dsn,
        statement_timeout_ms=TIMEOUT_MS,
        pool_min_size=1,
        pool_max_size=1,
        **options,
    )


def _alternate(db: PostgresDatabase, call: Callable[[], Any], lead: int) -> None:
    """``call`` times out while the table is locked and answers as before once it is free."""
    answers = [call() for _ in range(lead)]
    for _ in range(LOCKED_CALLS):
        with _locked(db), pytest.raises(QueryTimeoutError):
            call()
        answers.append(call())
    assert answers[0] and all(answer == answers[0] for answer in answers)


def _search(facade: ReadOnlyPersistenceFacade) -> Any:
    return [hit.row for hit in facade.search("leads", "acme globex", k=5).hits]


def _read(facade: ReadOnlyPersistenceFacade) -> Any:
    return facade.read("leads", order=["id"], limit=5).rows


async def _aread(facade: ReadOnlyPersistenceFacade) -> Any:
    return (await facade.aread("leads", order=["id"], limit=5)).rows


async def _asearch(facade: ReadOnlyPersistenceFacade) -> Any:
    return [hit.row for hit in (await facade.asearch("leads", "acme globex", k=5)).hits]


@pytest.mark.parametrize("lead", [0, 1])
class TestAfterATimeout:
    def test_search(self, db: PostgresDatabase, lead: int) -> None:
        """The search's first pipeline (begin, timeout, count, probes) fails on the count."""
        with _facade(db) as facade:
            facade.count("leads")  # opens the pool (the catalog is read before any lock)
            _alternate(db, lambda: _search(facade), lead)

    def test_read_behind_a_transaction_pooler(self, db: PostgresDatabase, lead: int) -> None:
        """A pooled read is one pipeline (begin, timeout, select, commit); the commit queued
        after the select that timed out is skipped."""
        with _facade(db, transaction_pooler=True, prepared_statements=True) as facade:
            facade.count("leads")
            _alternate(db, lambda: _read(facade), lead)

    def test_direct_read(self, db: PostgresDatabase, lead: int) -> None:
        """A read of one statement, no pipeline."""
        with _facade(db) as facade:
            facade.count("leads")  # opens the pool (the catalog is read before any lock)
            _alternate(db, lambda: _read(facade), lead)


@pytest.mark.parametrize("lead", [0, 1])
@pytest.mark.parametrize("pooler", [False, True])
def test_awaited_calls(db: PostgresDatabase, lead: int, pooler: bool) -> None:
    """The awaitable pool's reads and the awaited search, on one loop."""
    options = {"transaction_pooler": True, "prepared_statements": True} if pooler else {}

    async def main() -> None:
        with _facade(db, **options) as facade:
            facade.count("leads")
            await facade.acount("leads")  # the awaitable pool's, too
            for call in (_aread, _asearch):
                await _alternate_async(db, lambda c=call: c(facade), lead)
            await facade.aclose()

    asyncio.run(main())


async def _alternate_async(
    db: PostgresDatabase, call: Callable[[], Awaitable[Any]], lead: int
) -> None:
    answers = [await call() for _ in range(lead)]
    for _ in range(LOCKED_CALLS):
        with _locked(db), pytest.raises(QueryTimeoutError):
            await call()
        answers.append(await call())
    assert answers[0] and all(answer == answers[0] for answer in answers)
