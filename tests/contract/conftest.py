"""The backends the contract suite runs on.

Each entry of ``CONTRACT_BACKENDS`` names a fixture ``<name>_pair`` that yields a
``(PersistenceAgent, ReadOnlyPersistenceFacade)`` over the same, empty data.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from persistence import (
    MemoryStore,
    PersistenceAgent,
    ReadOnlyPersistenceFacade,
    create_persistence_agent,
    create_read_only_facade,
)
from tests.conftest import PostgresDatabase
from tests.support.postgrest import BASE_URL, PostgrestEmulator, fake_key

Pair = tuple[PersistenceAgent, ReadOnlyPersistenceFacade]
CONTRACT_BACKENDS = ["memory", "postgres", "supabase"]


@pytest.fixture
def memory_pair() -> Iterator[Pair]:
    store = MemoryStore()
    yield (
        create_persistence_agent(kind="memory", store=store),
        create_read_only_facade(kind="memory", store=store),
    )


@pytest.fixture
def postgres_pair(postgres_clean: PostgresDatabase) -> Iterator[Pair]:
    """Writer as the read-write role; reader as the least-privilege (SELECT-only) role."""
    writer = create_persistence_agent(kind="postgres", dsn=postgres_clean.writer_dsn)
    reader = create_read_only_facade(kind="postgres", dsn=postgres_clean.reader_dsn)
    with writer, reader:
        yield writer, reader


@pytest.fixture
def supabase_pair() -> Iterator[Pair]:
    """Both facades speak HTTP to an in-process PostgREST emulator over one memory store.

    The reader caps responses at 2 rows, as a server's ``db-max-rows`` would, so every
    multi-row read also exercises the adapter's refilling of capped pages.
    """
    store = MemoryStore()
    writer_http = httpx.Client(transport=PostgrestEmulator(store).transport())
    reader_http = httpx.Client(transport=PostgrestEmulator(store, max_rows=2).transport())
    options = {"url": BASE_URL, "key": fake_key("anon"), "sleep": lambda _: None}
    writer = create_persistence_agent(kind="supabase", http_client=writer_http, **options)
    reader = create_read_only_facade(kind="supabase", http_client=reader_http, **options)
    with writer, reader, writer_http, reader_http:
        yield writer, reader


@pytest.fixture(params=CONTRACT_BACKENDS)
def pair(request: pytest.FixtureRequest) -> Pair:
    result: Pair = request.getfixturevalue(f"{request.param}_pair")
    return result


@pytest.fixture
def writer(pair: Pair) -> PersistenceAgent:
    return pair[0]


@pytest.fixture
def reader(pair: Pair) -> ReadOnlyPersistenceFacade:
    return pair[1]
