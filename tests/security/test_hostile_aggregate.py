"""Every corpus line as a group-by column, a metric column, a metric function and a filter value
of an aggregate: a typed refusal before any backend, or a literal value, on every backend."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from persistence import (
    ColumnNotAllowedError,
    Filter,
    InvalidQueryError,
    MemoryStore,
    Op,
    ReadOnlyPersistenceFacade,
    create_persistence_agent,
    create_read_only_facade,
)
from tests.conftest import PostgresDatabase, corpus_lines
from tests.security.test_pg_hostile_values import _CHECKSUM, _SCHEMA_STATE, _seed_rows
from tests.support.postgrest import BASE_URL, PostgrestEmulator, fake_key

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def payloads() -> list[str]:
    """The corpus lines, each a hostile value."""
    return corpus_lines()


@pytest.fixture
def backends(
    postgres_clean: PostgresDatabase, payloads: list[str]
) -> Iterator[dict[str, ReadOnlyPersistenceFacade]]:
    """PostgreSQL (least-privilege role), memory and the PostgREST emulator over the same
    seeded leads, some of them payloads."""
    rows = _seed_rows(payloads)
    store = MemoryStore()
    create_persistence_agent(kind="memory", store=store).batch("leads", rows)
    emulator = PostgrestEmulator(store, aggregates=True)
    with (
        create_persistence_agent(kind="postgres", dsn=postgres_clean.writer_dsn) as writer,
        httpx.Client(transport=emulator.transport()) as http,
    ):
        writer.batch("leads", rows)
        with create_read_only_facade(kind="postgres", dsn=postgres_clean.reader_dsn) as pg:
            yield {
                "postgres": pg,
                "memory": create_read_only_facade(kind="memory", store=store),
                "supabase": create_read_only_facade(
                    kind="supabase", url=BASE_URL, key=fake_key(), http_client=http
                ),
            }


class TestHostileAggregates:
    def test_payload_names_are_refused_before_any_backend(
        self, payloads: list[str], backends: dict[str, ReadOnlyPersistenceFacade]
    ) -> None:
        """As a group-by column, a metric column or a metric function, each payload is a typed
        error (the name is malformed or unknown), the same on every backend."""
        wrong: list[str] = []
        for payload in payloads:
            for kind, facade in backends.items():
                for call in (
                    {"group_by": [payload]},
                    {"metrics": [f"sum:{payload}"]},
                    {"metrics": [f"{payload}:score"]},
                    {"metrics": [payload]},
                ):
                    try:
                        facade.aggregate("leads", **call)
                    except (InvalidQueryError, ColumnNotAllowedError):
                        continue
                    except Exception as exc:
                        wrong.append(f"{kind} {call!r}: {type(exc).__name__}")
                        continue
                    if payload not in {"count", "score"}:
                        wrong.append(f"{kind} {call!r}: accepted")
        assert wrong == []

    def test_payload_values_are_literals_and_change_nothing(
        self,
        postgres_clean: PostgresDatabase,
        payloads: list[str],
        backends: dict[str, ReadOnlyPersistenceFacade],
    ) -> None:
        """As filter values of a grouped count, each payload selects exactly what memory
        selects on PostgreSQL and over PostgREST, and nothing in the database changes."""
        roles = (postgres_clean.reader_role, postgres_clean.writer_role)
        before = postgres_clean.execute(_CHECKSUM), postgres_clean.execute(_SCHEMA_STATE, roles)
        memory = backends["memory"]
        mismatches: list[str] = []
        hits = 0
        for payload in payloads:
            if "\x00" in payload:
                continue
            for flt in (
                Filter("email", Op.EQ, payload),
                Filter("company_name", Op.ICONTAINS, payload),
            ):
                want = memory.aggregate("leads", [flt], group_by=["score"], metrics=["count"])
                hits += want.matched
                for kind in ("postgres", "supabase"):
                    got = backends[kind].aggregate(
                        "leads", [flt], group_by=["score"], metrics=["count"]
                    )
                    if (got.groups, got.matched) != (want.groups, want.matched):
                        mismatches.append(f"{kind} {flt!r}")
        after = postgres_clean.execute(_CHECKSUM), postgres_clean.execute(_SCHEMA_STATE, roles)
        assert mismatches == []
        assert hits >= 10  # the payloads stored as data were found, literally
        assert after == before
