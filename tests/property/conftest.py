"""The differential tests' PostgreSQL pairs: a writer and a reader over each schema's database."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from persistence import PersistenceAgent, ReadOnlyPersistenceFacade
from tests.conftest import PostgresDatabase

Pair = tuple[PostgresDatabase, PersistenceAgent, ReadOnlyPersistenceFacade]


@pytest.fixture(scope="module")
def pg(postgres_db: PostgresDatabase) -> Iterator[Pair]:
    """A writer (read-write role) and a reader (least-privilege role) over the reference
    database, kept for the module."""
    with postgres_db.writer_and_reader() as (writer, reader):
        yield postgres_db, writer, reader


@pytest.fixture(scope="module")
def pg_typed(postgres_supabase_db: PostgresDatabase) -> Iterator[Pair]:
    """A writer and a reader over the uuid-keyed Supabase-style database, kept for the
    module."""
    with postgres_supabase_db.writer_and_reader() as (writer, reader):
        yield postgres_supabase_db, writer, reader
