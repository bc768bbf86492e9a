"""Related rows on PostgreSQL: relations from the catalog's foreign keys, and one statement per
level whatever the number of parents."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from persistence import ReadOnlyPersistenceFacade, create_persistence_agent, create_read_only_facade
from persistence.backends.postgres.pool import Connections
from persistence.relations import Include
from persistence.schema import REFERENCE, SUPABASE_STYLE
from tests.conftest import PostgresDatabase

pytestmark = pytest.mark.postgres


@pytest.fixture
def seeded(postgres_clean: PostgresDatabase) -> Iterator[ReadOnlyPersistenceFacade]:
    """Fifty leads, three conversations each, two messages per conversation."""
    with create_persistence_agent(kind="postgres", dsn=postgres_clean.writer_dsn) as writer:
        writer.batch("leads", [{"id": i, "email": f"l{i}@x.io"} for i in range(1, 51)])
        writer.batch(
            "conversations",
            [{"id": i, "lead_id": (i - 1) // 3 + 1, "channel": "email"} for i in range(1, 151)],
        )
        writer.batch(
            "messages", [{"id": i, "conversation_id": (i - 1) // 2 + 1} for i in range(1, 301)]
        )
    with create_read_only_facade(kind="postgres", dsn=postgres_clean.reader_dsn) as facade:
        yield facade


class TestPostgresRelations:
    def test_relations_are_the_catalogs_foreign_keys(
        self, seeded: ReadOnlyPersistenceFacade
    ) -> None:
        """Every foreign key of the reference schema is a relation, named after the child."""
        got = {r for table in seeded.tables() for r in seeded.relations(table)}
        assert got == set(REFERENCE.relations)

    def test_one_statement_per_level(
        self, seeded: ReadOnlyPersistenceFacade, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Fifty leads with their conversations and messages take three statements: the page,
        then one per level, never one per parent."""
        statements: list[bytes] = []
        select = Connections.select

        def counted(self: Connections, statement: bytes, params: list[Any], op: str) -> Any:
            statements.append(statement)
            return select(self, statement, params, op)

        monkeypatch.setattr(Connections, "select", counted)
        page = seeded.read(
            "leads", include=[Include("conversations", limit=2), "conversations.messages"], limit=50
        )
        assert len(statements) == 3
        assert len(page.rows) == 50
        assert all(len(row["conversations"]) == 2 and row["conversations"].cut for row in page.rows)
        first = page.rows[0]["conversations"][0]
        assert [m["id"] for m in first["messages"]] == [1, 2]
        assert b"row_number() OVER (PARTITION BY" in statements[1]

    def test_uuid_keys(self, postgres_supabase_clean: PostgresDatabase) -> None:
        """Parents keyed by uuid find their children (the key list is a uuid array)."""
        with create_persistence_agent(
            kind="postgres", dsn=postgres_supabase_clean.writer_dsn
        ) as writer:
            (lead,) = writer.batch("leads", [{"email": "u@x.io"}])
            writer.batch("conversations", [{"lead_id": lead["id"]}, {"lead_id": lead["id"]}])
        with create_read_only_facade(
            kind="postgres", dsn=postgres_supabase_clean.reader_dsn
        ) as facade:
            (row,) = facade.read("leads", include=["conversations"]).rows
            assert {r for t in facade.tables() for r in facade.relations(t)} == set(
                SUPABASE_STYLE.relations
            )
        assert [c["lead_id"] for c in row["conversations"]] == [lead["id"], lead["id"]]
