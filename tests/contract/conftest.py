"""The backends and schemas the contract suite runs on.

Each entry of ``CONTRACT_BACKENDS`` names a fixture ``<name>_pair`` that yields a
``(PersistenceAgent, ReadOnlyPersistenceFacade)`` over the same, empty data, in each schema of
``CONTRACT_SCHEMAS``: the reference one (bigint keys) and the Supabase-style one (uuid keys,
``timestamptz``, ``numeric``, ``boolean``, ``date`` and ``timestamp`` columns). The memory store
is typed by the schema; the PostgREST emulator serves the schema's types as its API description.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any, cast

import httpx
import pytest

from persistence import (
    MemoryStore,
    PersistenceAgent,
    ReadOnlyPersistenceFacade,
    create_persistence_agent,
    create_read_only_facade,
)
from persistence.schema import REFERENCE, SUPABASE_STYLE, SchemaVariant
from tests.conftest import PostgresDatabase
from tests.support.postgrest import BASE_URL, PostgrestEmulator, fake_key

Pair = tuple[PersistenceAgent, ReadOnlyPersistenceFacade]
CONTRACT_BACKENDS = ["memory", "postgres", "supabase"]
CONTRACT_SCHEMAS = {"reference": REFERENCE, "supabase_style": SUPABASE_STYLE}


@pytest.fixture(params=sorted(CONTRACT_SCHEMAS))
def schema_variant(request: pytest.FixtureRequest) -> SchemaVariant:
    return CONTRACT_SCHEMAS[request.param]


@pytest.fixture
def memory_pair(schema_variant: SchemaVariant) -> Iterator[Pair]:
    store = MemoryStore(schema=schema_variant.types)
    yield (
        create_persistence_agent(kind="memory", store=store),
        create_read_only_facade(kind="memory", store=store),
    )


@pytest.fixture
def postgres_pair(schema_variant: SchemaVariant, request: pytest.FixtureRequest) -> Iterator[Pair]:
    """Writer as the read-write role; reader as the least-privilege (SELECT-only) role."""
    fixture = "postgres_clean" if schema_variant is REFERENCE else "postgres_supabase_clean"
    database: PostgresDatabase = request.getfixturevalue(fixture)
    writer = create_persistence_agent(kind="postgres", dsn=database.writer_dsn)
    reader = create_read_only_facade(kind="postgres", dsn=database.reader_dsn)
    with writer, reader:
        yield writer, reader


@pytest.fixture
def supabase_pair(schema_variant: SchemaVariant) -> Iterator[Pair]:
    """Both facades speak HTTP to an in-process PostgREST emulator over one memory store.

    The reader caps responses at 2 rows, as a server's ``db-max-rows`` would, so every
    multi-row read also exercises the adapter's refilling of capped pages.
    """
    store = MemoryStore(schema=schema_variant.types)
    writer_http = httpx.Client(transport=PostgrestEmulator(store).transport())
    reader_transport = PostgrestEmulator(store, max_rows=2).transport()
    reader_http = httpx.Client(transport=reader_transport)
    # The awaitable reads' client, over the same emulator (MockTransport serves both kinds).
    reader_async_http = httpx.AsyncClient(transport=reader_transport)
    options = {"url": BASE_URL, "key": fake_key("anon"), "sleep": lambda _: None}
    writer = create_persistence_agent(kind="supabase", http_client=writer_http, **options)
    reader = create_read_only_facade(
        kind="supabase", http_client=reader_http, async_http_client=reader_async_http, **options
    )
    with writer, reader, writer_http, reader_http:
        yield writer, reader


@pytest.fixture(params=CONTRACT_BACKENDS)
def pair(request: pytest.FixtureRequest, schema_variant: SchemaVariant) -> Pair:
    result: Pair = request.getfixturevalue(f"{request.param}_pair")
    return result


@pytest.fixture
def writer(pair: Pair) -> PersistenceAgent:
    return pair[0]


class AsyncFlavour:
    """A facade's awaitable reads behind the blocking names, so every contract test runs on
    them too: ``read`` is ``aread`` run to completion on one event loop per test (the loop the
    backend's awaitable pool belongs to); everything else is the facade's own."""

    def __init__(self, facade: ReadOnlyPersistenceFacade, runner: asyncio.Runner) -> None:
        self._facade = facade
        self._runner = runner

    def read(self, *args: Any, **kwargs: Any) -> Any:
        return self._runner.run(self._facade.aread(*args, **kwargs))

    def count(self, *args: Any, **kwargs: Any) -> Any:
        return self._runner.run(self._facade.acount(*args, **kwargs))

    def aggregate(self, *args: Any, **kwargs: Any) -> Any:
        return self._runner.run(self._facade.aaggregate(*args, **kwargs))

    def search(self, *args: Any, **kwargs: Any) -> Any:
        return self._runner.run(self._facade.asearch(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._facade, name)


@pytest.fixture(params=["sync", "async"])
def reader(pair: Pair, request: pytest.FixtureRequest) -> Iterator[ReadOnlyPersistenceFacade]:
    """The pair's reader, through its blocking methods or its awaitable ones."""
    if request.param == "sync":
        yield pair[1]
        return
    with asyncio.Runner() as runner:
        yield cast(ReadOnlyPersistenceFacade, AsyncFlavour(pair[1], runner))
        runner.run(pair[1].aclose())
