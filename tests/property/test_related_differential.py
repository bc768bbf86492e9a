"""Differential test: related rows (``include``) are identical on memory, PostgreSQL and the
PostgREST emulator over the same random leads, conversations and messages.

Rows refer only to rows that exist (the PostgreSQL tables have foreign keys); values are ints
and short ASCII texts, which every backend returns alike once in JSON form (the emulator answers
JSON, as PostgREST does).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from persistence import (
    Filter,
    MemoryStore,
    Op,
    Page,
    PersistenceAgent,
    ReadOnlyPersistenceFacade,
    create_persistence_agent,
    create_read_only_facade,
)
from persistence.relations import Include
from tests.conftest import PostgresDatabase
from tests.support.postgrest import BASE_URL, PostgrestEmulator, fake_key

pytestmark = pytest.mark.postgres

CHANNELS = ["email", "phone", "sms"]
WORDS = st.sampled_from(["new", "open", "won", "lost"])


@st.composite
def worlds(draw: st.DrawFn) -> dict[str, list[dict[str, Any]]]:
    leads = [
        {"id": i, "email": f"l{i}@x.io", "status": draw(st.none() | WORDS)}
        for i in range(1, draw(st.integers(0, 6)) + 1)
    ]
    conversations = [
        {
            "id": i,
            "lead_id": draw(st.sampled_from([lead["id"] for lead in leads])),
            "channel": draw(st.none() | st.sampled_from(CHANNELS)),
            "status": draw(st.none() | WORDS),
        }
        for i in range(1, (draw(st.integers(0, 14)) if leads else 0) + 1)
    ]
    messages = [
        {
            "id": i,
            "conversation_id": draw(st.sampled_from([c["id"] for c in conversations])),
            "direction": draw(st.sampled_from(["in", "out"])),
            "body": draw(st.text(alphabet="ab ", max_size=3)),
        }
        for i in range(1, (draw(st.integers(0, 14)) if conversations else 0) + 1)
    ]
    return {"leads": leads, "conversations": conversations, "messages": messages}


CHILD_FILTERS = st.lists(
    st.sampled_from(
        [
            Filter("channel", Op.EQ, "email"),
            Filter("channel", Op.IN, ["phone", "sms"]),
            Filter("status", Op.IS_NULL, False),
            Filter("status", Op.ICONTAINS, "O"),
        ]
    ),
    max_size=2,
    unique=True,
)
READS = st.fixed_dictionaries(
    {
        "filters": st.lists(
            st.sampled_from(
                [
                    Filter("status", Op.IS_NULL, False),
                    Filter("id", Op.GT, "2"),
                    Filter("id", Op.LTE, 4),
                ]
            ),
            max_size=2,
            unique=True,
        ),
        "limit": st.integers(0, 6),
        "offset": st.integers(0, 3),
        "include": st.lists(
            st.one_of(
                st.builds(
                    Include,
                    st.just("conversations"),
                    filters=CHILD_FILTERS,
                    limit=st.integers(1, 4),
                ),
                st.builds(Include, st.just("conversations.messages"), limit=st.integers(1, 3)),
                st.just("inquiries"),
            ),
            min_size=1,
            max_size=2,
            unique_by=lambda item: item if isinstance(item, str) else item.path,
        ),
    }
)


def _json(page: Page) -> Any:
    """The page as JSON sees it, with each related list's cut flag next to it."""

    def shown(row: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in row.items():
            if isinstance(value, list):
                out[key] = {"cut": getattr(value, "cut", None), "rows": [shown(r) for r in value]}
            else:
                out[key] = value
        return out

    return json.loads(
        json.dumps(
            {
                "rows": [shown(r) for r in page.rows],
                "total": page.total_count,
                "capped": page.related_capped,
            },
            default=str,
        )
    )


class TestRelatedRowsDifferential:
    @given(world=worlds(), reads=st.lists(READS, min_size=1, max_size=4))
    def test_same_related_rows_on_every_backend(
        self,
        pg: tuple[PostgresDatabase, PersistenceAgent, ReadOnlyPersistenceFacade],
        world: dict[str, list[dict[str, Any]]],
        reads: list[dict[str, Any]],
    ) -> None:
        """Parents, children per parent, cut flags and the total cap agree on memory,
        PostgreSQL and PostgREST embedding, nested levels included."""
        database, writer, reader = pg
        database.truncate()
        store = MemoryStore()
        seeder = create_persistence_agent(kind="memory", store=store)
        for table in ("leads", "conversations", "messages"):
            if world[table]:
                seeder.batch(table, world[table])
                writer.batch(table, world[table])
        memory = create_read_only_facade(kind="memory", store=store)
        with httpx.Client(transport=PostgrestEmulator(store, max_rows=4).transport()) as http:
            supabase = create_read_only_facade(
                kind="supabase", url=BASE_URL, key=fake_key("anon"), http_client=http
            )
            for read in reads:
                note(repr(read))
                options = {**read, "columns": ["id", "email", "status"], "order": ["id"]}
                want = _json(memory.read("leads", **options))
                assert _json(reader.read("leads", **options)) == want
                assert _json(supabase.read("leads", **options)) == want

    @given(world=worlds())
    def test_the_total_cap_cuts_alike(
        self,
        pg: tuple[PostgresDatabase, PersistenceAgent, ReadOnlyPersistenceFacade],
        world: dict[str, list[dict[str, Any]]],
    ) -> None:
        """With a small total, the same lists are cut at the same rows on every backend."""
        database, writer, reader = pg
        database.truncate()
        store = MemoryStore()
        seeder = create_persistence_agent(kind="memory", store=store)
        for table in ("leads", "conversations", "messages"):
            if world[table]:
                seeder.batch(table, world[table])
                writer.batch(table, world[table])
        memory = create_read_only_facade(kind="memory", store=store)
        options: dict[str, Any] = {"include": ["conversations.messages"], "limit": 6}
        with (
            pytest.MonkeyPatch.context() as patch,
            httpx.Client(transport=PostgrestEmulator(store).transport()) as http,
        ):
            patch.setattr("persistence.relations.RELATED_TOTAL_LIMIT", 5)
            supabase = create_read_only_facade(
                kind="supabase", url=BASE_URL, key=fake_key("anon"), http_client=http
            )
            want = _json(memory.read("leads", **options))
            assert _json(reader.read("leads", **options)) == want
            assert _json(supabase.read("leads", **options)) == want
            related = sum(
                len(r["conversations"]["rows"])
                + sum(len(c["messages"]["rows"]) for c in r["conversations"]["rows"])
                for r in want["rows"]
            )
            assert related <= 5
            assert want["capped"] is (len(world["conversations"]) + len(world["messages"]) > 5)
