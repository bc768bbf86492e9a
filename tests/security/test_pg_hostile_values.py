"""Every SQL-injection payload of the shared corpus stays a literal value on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from persistence import (
    Filter,
    InvalidQueryError,
    MemoryStore,
    Op,
    ReadOnlyPersistenceFacade,
    create_persistence_agent,
    create_read_only_facade,
)
from tests.conftest import PostgresDatabase, corpus_lines

pytestmark = pytest.mark.postgres

_CHECKSUM = (
    "SELECT count(*), md5(coalesce(string_agg(t::text, '|' ORDER BY id), '')) FROM leads AS t"
)
_SCHEMA_STATE = (
    "SELECT (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
    "        WHERE n.nspname = 'public'),"
    # Roles other test sessions and benchmarks create and drop meanwhile (``rag_test_*``,
    # ``rag_bench_*``, ``rag_rel_*``) are left out; any other role appearing, or a change to one,
    # is a side effect of a payload.
    "       (SELECT md5(coalesce(string_agg(concat_ws(':', rolname, rolsuper, rolbypassrls,"
    "                   rolcreaterole, rolcreatedb, rolcanlogin), ',' ORDER BY rolname), ''))"
    "        FROM pg_roles WHERE rolname !~ '^rag_(test|bench|rel)_' OR rolname IN (%s, %s))"
)


def _seed_rows(payloads: list[str]) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = [
        {"email": "ann@acme.io", "company_name": "Acme Inc.", "score": 1},
        {"email": "bob@acme.io", "company_name": '100% O\'Reilly_\\ "quoted"', "score": 2},
    ]
    # A few payloads stored as data, so that literal matches exist and must be found exactly.
    for index, payload in enumerate(payloads[:: max(1, len(payloads) // 12)]):
        if "\x00" not in payload:
            rows.append({"email": payload, "company_name": payload, "score": index})
    return rows


@pytest.fixture(scope="module")
def payloads() -> list[str]:
    """The corpus lines, each a hostile value."""
    return corpus_lines()


@pytest.fixture
def readers(
    postgres_clean: PostgresDatabase, payloads: list[str]
) -> Iterator[tuple[ReadOnlyPersistenceFacade, ReadOnlyPersistenceFacade]]:
    """(PostgreSQL as the least-privilege role, memory) over the same seeded leads."""
    rows = _seed_rows(payloads)
    store = MemoryStore()
    create_persistence_agent(kind="memory", store=store).batch("leads", rows)
    with create_persistence_agent(kind="postgres", dsn=postgres_clean.writer_dsn) as writer:
        writer.batch("leads", rows)
    with create_read_only_facade(kind="postgres", dsn=postgres_clean.reader_dsn) as pg:
        yield pg, create_read_only_facade(kind="memory", store=store)


def _ids(facade: ReadOnlyPersistenceFacade, flt: Filter) -> tuple[list[object], int] | str:
    try:
        page = facade.read("leads", [flt], columns=["id"])
    except InvalidQueryError as exc:
        return f"InvalidQueryError: {exc.field}"
    return [row["id"] for row in page.rows], page.total_count


class TestHostileValues:
    def test_every_payload_is_a_literal_and_changes_nothing(
        self,
        postgres_clean: PostgresDatabase,
        payloads: list[str],
        readers: tuple[ReadOnlyPersistenceFacade, ReadOnlyPersistenceFacade],
    ) -> None:
        """As icontains, eq, ieq and in values, each payload matches exactly what memory
        matches."""
        pg, memory = readers
        roles = (postgres_clean.reader_role, postgres_clean.writer_role)
        before = postgres_clean.execute(_CHECKSUM), postgres_clean.execute(_SCHEMA_STATE, roles)
        mismatches: list[str] = []
        literal_hits = {Op.EQ: 0, Op.IEQ: 0}
        for payload in payloads:
            for flt in (
                (
                    Filter("company_name", Op.ICONTAINS, payload),
                    Filter("email", Op.EQ, payload),
                    Filter("email", Op.IEQ, payload),
                    Filter("email", Op.IN, [payload, "ann@acme.io"]),
                )
                if "\x00" not in payload
                else ()
            ):
                got, want = _ids(pg, flt), _ids(memory, flt)
                if got != want:
                    mismatches.append(f"{flt.op.value} {payload!r}: postgres {got}, memory {want}")
                elif flt.op in literal_hits and not isinstance(got, str) and got[1]:
                    literal_hits[flt.op] += 1
        after = postgres_clean.execute(_CHECKSUM), postgres_clean.execute(_SCHEMA_STATE, roles)
        assert mismatches == []
        # The payloads stored as data were found, literally.
        assert literal_hits[Op.EQ] >= 5
        assert literal_hits[Op.IEQ] >= literal_hits[Op.EQ]
        assert after == before

    def test_payload_against_an_integer_column_is_a_typed_error(
        self,
        payloads: list[str],
        readers: tuple[ReadOnlyPersistenceFacade, ReadOnlyPersistenceFacade],
    ) -> None:
        """A payload compared with ``id`` is InvalidQueryError, never a driver error."""
        pg, _ = readers
        for payload in payloads[:200]:
            if "\x00" in payload:
                continue
            with pytest.raises(InvalidQueryError):
                pg.read("leads", [Filter("id", Op.EQ, payload)])

    def test_payloads_with_a_nul_are_refused_before_the_backend(self) -> None:
        """Text with a NUL character cannot even be made into a filter."""
        with pytest.raises(InvalidQueryError):
            Filter("email", Op.EQ, "x\x00' OR 1=1 --")
