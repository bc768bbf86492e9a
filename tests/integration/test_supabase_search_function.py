"""The ranking function template of docs/search-supabase.md, installed for real on PostgreSQL 18
with pgvector and pg_trgm, called as PostgREST's GET calls it (the reader role, a read-only
transaction): it runs, keeps the filters inside every leg, honours the k-rows rule, fuses exactly
as :func:`persistence.search.fuse`, and ranks as the PostgreSQL backend's keyword search does."""

from __future__ import annotations

import json
import random
import re
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from persistence import Filter, Op, create_read_only_facade
from persistence.backends._postgrest_search import ranked_columns
from persistence.backends.pg_index import index_table
from persistence.backends.postgres import SearchSettings
from persistence.search import fuse, weights_for
from persistence.search.embedder import Embedder
from persistence.search.text import keyword_terms, topical_text
from tests.conftest import corpus_lines
from tests.support.pgvector import (
    HashEmbeddings,
    PgvectorDatabase,
    pgvector_database,
    pgvector_server,
)

__all__ = ["pgvector_server"]  # the session fixture, used by name below

DOC = Path(__file__).resolve().parents[2] / "docs" / "search-supabase.md"
_TOPICS = {
    "billing": "refund invoice charge payment billing overcharged",
    "access": "login password locked signin reset twofactor",
    "shipping": "delivery parcel courier delayed tracking shipment",
    "cancel": "cancel subscription stop paying terminate contract downgrade",
}
_FILLER = ["please", "thanks", "hello", "regards", "team", "question", "update"]
#: rows per client: a large, a middle and a tiny share.
SHARES = (300, 60, 4)


@dataclass
class World:
    db: PgvectorDatabase
    clients: list[uuid.UUID]


def template() -> str:
    found = re.search(r"```sql\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert found is not None
    # Supabase keeps pgvector in the "extensions" schema; this server has it in "public".
    return found.group(1).replace("extensions.vector", "public.vector")


@pytest.fixture(scope="module")
def world(pgvector_server: str) -> Iterator[World]:
    rng = random.Random(20)
    clients = [uuid.UUID(int=rng.getrandbits(128)) for _ in SHARES]
    with pgvector_database(pgvector_server) as db:
        rows = []
        for client, share in zip(clients, SHARES, strict=True):
            for _ in range(share):
                words = _TOPICS[rng.choice(sorted(_TOPICS))].split()
                subject = " ".join(rng.sample(words, 2))
                body = " ".join(rng.sample(words, 3) + rng.sample(_FILLER, 3))
                rows.append((uuid.uuid4(), client, subject, body))
        with psycopg.connect(db.admin_dsn, autocommit=True) as conn:
            cursor = conn.cursor()
            cursor.executemany(
                "INSERT INTO clients (id, name) VALUES (%s, 'c')", [(c,) for c in clients]
            )
            cursor.executemany(
                "INSERT INTO inquiries (id, client_id, subject, body) VALUES (%s, %s, %s, %s)", rows
            )
            for role in ("anon", "authenticated"):
                if not conn.execute(
                    b"SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)
                ).fetchall():
                    conn.execute(f"CREATE ROLE {role} NOLOGIN".encode())
        index_table(
            db.writer_dsn,
            "inquiries",
            ["subject", "body"],
            HashEmbeddings(),
            grant_to=[db.reader_role],
        )
        with psycopg.connect(db.admin_dsn, autocommit=True) as conn:
            conn.execute(template().encode())  # no parameters: its "<%" stays an operator
            conn.execute(
                f"GRANT EXECUTE ON FUNCTION public.search_inquiries TO {db.reader_role}".encode()
            )
        yield World(db, clients)


def call(
    world: World,
    text: str,
    *,
    filters: dict[str, Any] | None = None,
    mode: str = "hybrid",
    k: int = 10,
    offset: int = 0,
    embed: bool = True,
    weights: Mapping[str, float] | None = None,
) -> list[tuple[Any, ...]]:
    """The function as PostgREST's GET runs it: as the reader, in a read-only transaction."""
    embedder = Embedder(HashEmbeddings())
    query = topical_text(text)
    vector = (
        "[" + ",".join(map(repr, embedder.embed_query(query))) + "]"
        if embed and mode != "keyword"
        else None
    )
    with psycopg.connect(world.db.reader_dsn) as conn:
        conn.execute(b"SET TRANSACTION READ ONLY")
        return conn.execute(
            b"SELECT * FROM public.search_inquiries(%s, %s::jsonb, %s::public.vector, %s, "
            b"%s::jsonb, %s, %s, %s, %s::jsonb)",
            (
                query,
                json.dumps(list(keyword_terms(text))),
                vector,
                embedder.model_id,
                json.dumps(filters or {}, default=str),
                mode,
                k,
                offset,
                json.dumps(dict(weights_for(text) if weights is None else weights)),
            ),
        ).fetchall()


TEXTS = ["refund invoice", "cannot login password", "parcel delayed", "stop paying"]
#: A text naming an identifier: fused with the keyword leg leading (``weights_for``).
IDENTIFIER_TEXT = "refund for invoice INV48213"


def test_filters_hold_in_every_leg_and_pages_are_full(world: World) -> None:
    for client, share in zip(world.clients, SHARES, strict=True):
        ids_of_client = {
            row[0]
            for row in world.db.execute("SELECT id FROM inquiries WHERE client_id = %s", (client,))
        }
        for text in TEXTS:
            for k in (10, 50):
                seen: list[Any] = []
                for page in range(3):
                    rows = call(
                        world, text, filters={"client_id": str(client)}, k=k, offset=page * k
                    )
                    assert len(rows) == max(0, min(k, share - page * k))
                    assert {r[0] for r in rows} <= ids_of_client
                    assert all(r[5] == share for r in rows)
                    seen += [r[0] for r in rows]
                assert len(seen) == len(set(seen))  # pages do not overlap


def test_fusion_is_the_library_fusion(world: World) -> None:
    """Scores and order equal ``fuse`` over the ranks the function reports (ranks of rows
    beyond the page are stand-in keys, dropped afterwards)."""
    for text in (*TEXTS, IDENTIFIER_TEXT):
        rows = call(world, text, k=100)
        ranked = [r for r in rows if any(x is not None for x in r[2:5])]
        assert ranked and all(r[4] is not None for r in ranked)  # the semantic leg ran
        legs = {}
        for name, i in (("keyword", 2), ("trigram", 3), ("semantic", 4)):
            at = {r[i]: r[0] for r in ranked if r[i] is not None}
            legs[name] = [
                at.get(rank, uuid.UUID(int=i * 100_000 + rank))
                for rank in range(1, max(at, default=0) + 1)
            ]
        shown = {r[0] for r in ranked}
        fused = [(key, score) for key, score, _ in fuse(legs, weights_for(text)) if key in shown]
        assert fused == [(r[0], r[1]) for r in ranked]


def test_keyword_legs_rank_as_the_postgres_backend(world: World) -> None:
    """The keyword and trigram legs give the PostgreSQL backend's ranks."""
    with create_read_only_facade(
        kind="postgres", dsn=world.db.reader_dsn, search=SearchSettings(exact_rows=200)
    ) as facade:
        for text in TEXTS:
            client = world.clients[1]
            want = facade.search(
                "inquiries",
                text,
                filters=[Filter("client_id", Op.EQ, client)],
                k=10,
                mode="keyword",
            )
            got = call(world, text, filters={"client_id": str(client)}, mode="keyword", k=10)
            # The backend's legs are k deep, the function's deeper (the same on every page):
            # the first k of each leg agree; the fused pages may differ beyond them.
            for leg, i in (("keyword", 2), ("trigram", 3)):
                mine = {r[0]: r[i] for r in got if r[i] is not None and r[i] <= 10}
                theirs = {
                    h.row["id"]: h.ranks[leg] for h in want.hits if h.ranks.get(leg) is not None
                }
                assert mine == {key: rank for key, rank in theirs.items() if key in mine}


def test_semantic_mode_runs_the_semantic_leg_alone(world: World) -> None:
    client = world.clients[1]
    rows = call(world, "refund invoice", filters={"client_id": str(client)}, mode="semantic", k=20)
    assert len(rows) == 20
    assert all(r[2] is None and r[3] is None and r[4] is not None for r in rows)
    assert [r[4] for r in rows] == list(range(1, 21))


def test_payloads_are_values(world: World) -> None:
    """Every corpus line as the text and as a filter value: rows or a clean refusal."""
    for line in corpus_lines()[::7]:
        call(world, line, k=3)
        assert call(world, "refund", filters={"subject": line}, k=3) == []


def test_the_comment_names_the_ranked_columns(world: World) -> None:
    """PostgREST shows the comment in the API description; the backend reads the columns."""
    (comment,) = world.db.execute(
        "SELECT obj_description('public.search_inquiries'::regproc, 'pg_proc')"
    )[0]
    assert isinstance(comment, str)
    assert ranked_columns(comment) == ("subject", "body")
