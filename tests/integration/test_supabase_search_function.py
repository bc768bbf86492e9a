"""The ranking function template of docs/search-supabase.md, installed for real on PostgreSQL 18
with pgvector and pg_trgm, called as PostgREST's GET calls it (the reader role, a read-only
transaction): it runs, keeps the filters inside every leg, honours the k-rows rule, fuses exactly
as :func:`persistence.search.fuse`, and ranks as the PostgreSQL backend's keyword search does."""

from __future__ import annotations

import contextlib
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
from persistence.admin.index_build import index_table
from persistence.backends.postgres import SearchSettings
from persistence.backends.postgres.vectors import EXACT_ROWS
from persistence.backends.supabase.postgrest.search import filtered_columns, ranked_columns
from persistence.search import fuse, weights_for
from persistence.search.embedder import Embedder
from persistence.search.model import MAX_K, MAX_OFFSET
from persistence.search.text import keyword_terms, topical_text
from tests.conftest import corpus_lines
from tests.support.pgvector import (
    HashEmbeddings,
    PgvectorDatabase,
    pgvector_database,
)

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


#: The btree the filter on ``client_id`` should use inside the function.
CLIENT_INDEX = "inquiries_client_id_idx"


@pytest.fixture(scope="module")
def world(pgvector_server: str) -> Iterator[World]:
    with _installed(pgvector_server, SHARES) as made:
        yield made


@contextlib.contextmanager
def _installed(server: str, shares: tuple[int, ...]) -> Iterator[World]:
    """A database of ``shares`` rows per client, indexed, with the function installed."""
    rng = random.Random(20)
    clients = [uuid.UUID(int=rng.getrandbits(128)) for _ in shares]
    with pgvector_database(server) as db:
        rows = []
        for client, share in zip(clients, shares, strict=True):
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
            conn.execute(f"CREATE INDEX {CLIENT_INDEX} ON inquiries (client_id)".encode())
            conn.execute(b"ANALYZE inquiries")
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
            b"SELECT * FROM public.search_inquiries(%s, %s::jsonb, %s, %s, "
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
        # The semantic leg ran (cut at 200 for the first tier, it need not rank every row).
        assert ranked and any(r[4] is not None for r in ranked)
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
    ) as facade:  # no embeddings: the keyword legs alone
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
        with pytest.raises(psycopg.errors.DataError):  # not a uuid: refused by the cast
            call(world, "refund", filters={"client_id": line}, k=3)


def test_the_comment_names_the_ranked_columns(world: World) -> None:
    """PostgREST shows the comment in the API description; the backend reads the columns."""
    (comment,) = world.db.execute(
        "SELECT obj_description('public.search_inquiries'::regproc, 'pg_proc')"
    )[0]
    assert isinstance(comment, str)
    assert ranked_columns(comment) == ("subject", "body")
    assert filtered_columns(comment) == ("client_id",)


def _backend_hits(world: World, text: str, *, mode: str, client: uuid.UUID | None, k: int) -> Any:
    with create_read_only_facade(
        kind="postgres", dsn=world.db.reader_dsn, embeddings=HashEmbeddings()
    ) as facade:
        filters = [] if client is None else [Filter("client_id", Op.EQ, client)]
        return facade.search("inquiries", text, filters=filters, k=k, mode=mode).hits


def _without_feedback(world: World, text: str, client: uuid.UUID | None) -> list[Any]:
    """The semantic order by the query's own vector, no feedback step."""
    vector = "[" + ",".join(map(repr, Embedder(HashEmbeddings()).embed_query(topical_text(text))))
    where = "" if client is None else " AND t.client_id = %s"
    rows = world.db.execute(
        "SELECT e.row_id FROM inquiries_embeddings e JOIN inquiries t ON t.id = e.row_id "
        f"WHERE true{where} ORDER BY e.embedding <=> (%s || ']')::vector, e.row_id",
        ((client,) if client is not None else ()) + (vector,),
    )
    return [r[0] for r in rows]


def test_the_semantic_leg_has_the_feedback_step_of_the_postgres_backend(world: World) -> None:
    """With one round of pseudo-relevance feedback, the function's semantic ranks are the
    PostgreSQL backend's, filtered or not; without it they would differ for some text."""
    moved = 0
    for client in (None, world.clients[0], world.clients[1]):
        for text in (*TEXTS, IDENTIFIER_TEXT):
            want = _backend_hits(world, text, mode="semantic", client=client, k=50)
            filters = None if client is None else {"client_id": str(client)}
            got = call(world, text, filters=filters, mode="semantic", k=50)
            assert [r[0] for r in got] == [h.row["id"] for h in want]
            assert [r[4] for r in got] == [h.ranks["semantic"] for h in want]
            unmoved = _without_feedback(world, text, client)[:50]
            if text == IDENTIFIER_TEXT:  # feedback.takes_feedback: none for it, on both
                assert [r[0] for r in got] == unmoved
            else:
                moved += [r[0] for r in got] != unmoved
    assert moved  # the step changes some order: the equality above is not vacuous


def test_without_a_filter_past_the_exact_rows_the_leg_ranks_one_scan_pool(
    pgvector_server: str,
) -> None:
    """More rows than ``EXACT_ROWS`` and no filter: the semantic leg ranks the pool of one HNSW
    scan by the moved query, as the PostgreSQL backend's pooled scan does: the same ids and
    ranks, on the first page and on the deepest (the deep tier's pool, the 1,100 rows nearest
    the query, leaves out rows a scan by the moved query would rank there: the test fails on a
    function whose leg scans on its own); the hybrid pages too."""
    with _installed(pgvector_server, (EXACT_ROWS + 300,)) as large:
        for text in TEXTS:
            for k, offset in ((50, 0), (MAX_K, MAX_OFFSET)):
                with create_read_only_facade(
                    kind="postgres", dsn=large.db.reader_dsn, embeddings=HashEmbeddings()
                ) as facade:
                    want = facade.search(
                        "inquiries", text, k=k, offset=offset, mode="semantic"
                    ).hits
                got = call(large, text, mode="semantic", k=k, offset=offset)
                assert len(got) == k  # the deepest page is full: the comparison is not vacuous
                assert [r[0] for r in got] == [h.row["id"] for h in want]
                assert [r[4] for r in got] == [h.ranks["semantic"] for h in want]
            want = _backend_hits(large, text, mode="hybrid", client=None, k=30)
            got = call(large, text, k=30)
            assert [(r[0], r[1]) for r in got] == [(h.row["id"], h.score) for h in want]


def test_hybrid_pages_are_the_postgres_backend_pages(world: World) -> None:
    """Ids, scores and ranks of every hybrid page equal the PostgreSQL backend's, which fuses
    with ``fuse()`` over the same rows."""
    for client in (None, world.clients[1]):
        for text in (*TEXTS, IDENTIFIER_TEXT):
            want = _backend_hits(world, text, mode="hybrid", client=client, k=30)
            filters = None if client is None else {"client_id": str(client)}
            got = call(world, text, filters=filters, k=30)
            assert [(r[0], r[1]) for r in got] == [(h.row["id"], h.score) for h in want]
            assert [r[2:5] for r in got] == [
                (h.ranks["keyword"], h.ranks["trigram"], h.ranks["semantic"]) for h in want
            ]


def _plans(
    world: World, text: str, filters: dict[str, Any], k: int = 10, offset: int = 0
) -> list[str]:
    """The plans of the statements the function runs, as the reader (auto_explain's notices)."""
    plans: list[str] = []
    with psycopg.connect(world.db.admin_dsn) as conn:
        conn.add_notice_handler(lambda diag: plans.append(diag.message_primary or ""))
        for statement in (
            b"LOAD 'auto_explain'",
            b"SET auto_explain.log_min_duration = 0",
            b"SET auto_explain.log_nested_statements = on",
            b"SET auto_explain.log_level = notice",
            b"SET auto_explain.log_format = json",
        ):
            conn.execute(statement)
        conn.execute(f"SET ROLE {world.db.reader_role}".encode())
        conn.execute(b"SET TRANSACTION READ ONLY")
        embedder = Embedder(HashEmbeddings())
        vector = "[" + ",".join(map(repr, embedder.embed_query(topical_text(text)))) + "]"
        conn.execute(
            b"SELECT * FROM public.search_inquiries(%s, %s::jsonb, %s, %s, %s::jsonb, "
            b"'hybrid', %s, %s)",
            (
                topical_text(text),
                json.dumps(list(keyword_terms(text))),
                vector,
                embedder.model_id,
                json.dumps(filters),
                k,
                offset,
            ),
        ).fetchall()
    return plans


def test_a_selective_filter_uses_its_index_in_every_leg(world: World) -> None:
    """Planned with the call's values, the function reads a small client's rows through the
    btree on ``client_id`` wherever it reads the table (the feedback step, every leg, the filler,
    the count), never by a sequential scan; with ``to_jsonb(row) @> filters`` it could not."""
    tiny = world.clients[2]
    plans = _plans(world, "refund invoice", {"client_id": str(tiny)})
    statements = [json.loads(p[p.index("{") :]) for p in plans if "{" in p]
    reads = '"Relation Name": "inquiries"'
    ranked = [s for s in statements if reads in json.dumps(s["Plan"])]
    # The feedback step, each tier (4 rows fill no first tier of 10) and the page.
    assert len(ranked) == 4
    for statement in ranked:
        nodes = json.dumps(statement["Plan"])
        # Each read of the table is an index scan of the btree, or a heap scan over one.
        assert nodes.count(f'"Index Name": "{CLIENT_INDEX}"') == nodes.count(reads)
        assert not re.search(r'"Node Type": "Seq Scan", [^{}]*' + reads, nodes)
    for tier in ranked[1:3]:
        assert json.dumps(tier["Plan"]).count(reads) >= 3  # keyword, trigram, nearest
    assert json.dumps(ranked[3]["Plan"]).count(reads) >= 2  # the filler, the count


def _tier_statements(plans: list[str]) -> list[str]:
    texts = [json.loads(p[p.index("{") :])["Query Text"] for p in plans if "{" in p]
    return [t for t in texts if "row_number() over (order by f.score desc" in t]


def test_the_deep_legs_run_only_for_a_page_past_the_first_tier(world: World) -> None:
    """A page inside the first 100 rows runs the legs once, cut at 200; a page ending past them
    runs them again, cut at 1,100 (the nested statements auto_explain saw executed)."""
    for k, offset, tiers in ((10, 0, 1), (45, 45, 1), (10, 90, 1), (45, 90, 2), (10, 100, 2)):
        run = _tier_statements(_plans(world, "refund invoice", {}, k, offset))
        assert len(run) == tiers, (k, offset)
        assert "o.position <= 100" in run[0]
        if tiers == 2:
            assert "o.id <> all" in run[1]


def test_without_a_filter_every_row_is_ranked(world: World) -> None:
    """The same function with no filter ranks every row: the folded predicate filters nothing."""
    rows = call(world, "refund invoice", k=100)
    assert len(rows) == 100 and rows[0][5] == sum(SHARES)


def test_a_column_it_does_not_filter_by_is_refused(world: World) -> None:
    """A key outside the function's filterable columns is an error, not a silent no-op."""
    with pytest.raises(psycopg.errors.RaiseException, match="filters may name only"):
        call(world, "refund", filters={"subject": "refund"}, k=3)


#: Pages across the tier boundary (``TIER_ROWS`` = 100): ``(k, offset)``.
TIER_PAGES = ((45, 0), (45, 45), (45, 90), (45, 100), (50, 150), (45, 200), (45, 340))


def _backend_page(
    world: World, text: str, client: uuid.UUID | None, k: int, offset: int
) -> tuple[Any, int]:
    with create_read_only_facade(
        kind="postgres", dsn=world.db.reader_dsn, embeddings=HashEmbeddings()
    ) as facade:
        filters = [] if client is None else [Filter("client_id", Op.EQ, client)]
        result = facade.search("inquiries", text, filters=filters, k=k, offset=offset)
        return result.hits, result.total_count


def test_pages_across_the_tiers_are_the_postgres_backend_pages(world: World) -> None:
    """The first 100 rows come from the legs cut at 200, later rows from the legs cut at
    1,100 without those, as the PostgreSQL backend orders them: every page equals the
    backend's, across the boundary, and holds k rows where that many match."""
    crossed = 0
    for client in (None, world.clients[0]):
        filters = None if client is None else {"client_id": str(client)}
        for text in (*TEXTS, IDENTIFIER_TEXT):
            seen: list[Any] = []
            for k, offset in TIER_PAGES:
                want, total = _backend_page(world, text, client, k, offset)
                got = call(world, text, filters=filters, k=k, offset=offset)
                assert [(r[0], r[1]) for r in got] == [(h.row["id"], h.score) for h in want]
                assert [r[2:5] for r in got] == [
                    (h.ranks["keyword"], h.ranks["trigram"], h.ranks["semantic"]) for h in want
                ]
                assert len(got) == min(k, max(total - offset, 0))
                assert all(r[5] == total for r in got)
                if offset in (0, 45, 90, 100):
                    seen[offset:] = [r[0] for r in got]
            whole = call(world, text, filters=filters, k=100)
            whole += call(world, text, filters=filters, k=100, offset=100)
            assert [r[0] for r in whole][: len(seen)] == seen  # pages never overlap
            scores = [r[1] for r in whole]
            # A deep row outscoring the 100th: one fusion at 1,100 would have ranked it
            # higher, so the order here is the tiered one (the test fails on a single tier).
            crossed += len(scores) > 100 and max(scores[100:]) > scores[99]
    assert crossed
