"""The memory backend's row vectors (:mod:`persistence.backends.memory.vectors`): kept current
incrementally (a store searched between writes ranks as a fresh one), embedded in bounded
batches, bounded in memory, safe under concurrent writers and readers, the same without numpy."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from persistence import Filter, MemoryStore, Op, create_persistence_agent, create_read_only_facade
from persistence.backends.memory import vectors as _memory_vectors
from persistence.backends.memory.vectors import VectorCache, vector_cache
from persistence.search.embedder import Embedder
from tests.support.search import HashEmbeddings

WORDS = ["refund", "invoice", "parcel", "late", "login", "password", "cancel", "plan", "hello"]
TEXTS = ["refund late parcel", "cannot login", "cancel my plan", "invoice"]


class Batches(HashEmbeddings):
    """Records the size of every batch of documents it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.batches.append(len(texts))
        return super().embed_documents(texts)


def store_of(rows: list[dict[str, Any]]) -> MemoryStore:
    store = MemoryStore()
    if rows:
        create_persistence_agent(kind="memory", store=store).batch("inquiries", rows)
    return store


def ranking(store: MemoryStore, text: str, **options: Any) -> list[tuple[Any, Any]]:
    facade = create_read_only_facade(kind="memory", store=store, embeddings=HashEmbeddings())
    result = facade.search("inquiries", text, mode="semantic", k=50, **options)
    return [(hit.row["id"], hit.ranks["semantic"]) for hit in result.hits]


def fresh(store: MemoryStore) -> MemoryStore:
    return store_of(list(store.rows("inquiries")))


body = st.lists(st.sampled_from(WORDS), min_size=0, max_size=4).map(" ".join)
write = st.one_of(
    st.tuples(st.just("insert"), body),
    st.tuples(st.just("update"), st.integers(1, 30), body),
    st.tuples(st.just("delete"), st.integers(1, 30)),
    st.tuples(st.just("search"), st.sampled_from(TEXTS)),
)


class TestIncremental:
    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        st.lists(body, min_size=1, max_size=20),
        st.lists(write, max_size=25),
        st.sampled_from(TEXTS),
    )
    def test_searched_between_writes_ranks_as_a_fresh_store(
        self, initial: list[str], writes: list[Any], text: str
    ) -> None:
        """Any sequence of inserts, updates, deletes and searches (some filtered) leaves vectors
        that rank exactly as a fresh store of the same rows does."""
        store = store_of([{"subject": "s", "body": b} for b in initial])
        writer = create_persistence_agent(kind="memory", store=store)
        for step in writes:
            if step[0] == "insert":
                writer.write("inquiries", {"subject": "s", "body": step[1]})
            elif step[0] == "update":
                writer.upsert("inquiries", [{"id": step[1], "body": step[2]}])
            elif step[0] == "delete":
                writer.delete("inquiries", [Filter("id", Op.EQ, step[1])])
            else:
                ranking(store, step[1], filters=[Filter("id", Op.LT, 15)])
        if not store.rows("inquiries"):
            return
        assert ranking(store, text) == ranking(fresh(store), text)
        ids = {row["id"] for row in store.rows("inquiries")}
        assert len(vector_cache(store)) <= len(ids)

    def test_only_changed_rows_are_embedded_again(self) -> None:
        """An edit, a delete and an insert between two searches: the next search embeds the
        edited and the inserted row, nothing else, and ranks as a fresh store."""
        store = store_of([{"subject": "s", "body": f"refund {i}"} for i in range(30)])
        writer = create_persistence_agent(kind="memory", store=store)
        embeddings = HashEmbeddings()
        facade = create_read_only_facade(kind="memory", store=store, embeddings=embeddings)
        facade.search("inquiries", "refund", mode="semantic")
        writer.upsert("inquiries", [{"id": 4, "body": "late parcel"}])
        writer.delete("inquiries", [Filter("id", Op.EQ, 9)])
        writer.write("inquiries", {"subject": "s", "body": "cancel my plan"})
        embeddings.documents.clear()
        facade.search("inquiries", "refund", mode="semantic")
        assert sorted(embeddings.documents) == ["s\ncancel my plan", "s\nlate parcel"]
        assert len(vector_cache(store)) == 30
        assert ranking(store, "late parcel") == ranking(fresh(store), "late parcel")

    def test_deleting_most_rows_compacts_the_matrix(self) -> None:
        """Once half the slots are free the matrix shrinks to the rows left, which still rank
        as a fresh store's."""
        store = store_of([{"subject": "s", "body": f"refund {i} parcel"} for i in range(40)])
        ranking(store, "refund")
        cache = vector_cache(store)
        before = cache.nbytes
        create_persistence_agent(kind="memory", store=store).delete(
            "inquiries", [Filter("id", Op.GT, 10)]
        )
        assert ranking(store, "parcel") == ranking(fresh(store), "parcel")
        assert len(cache) == 10 and cache.nbytes == before // 4


class TestBatches:
    def test_rows_are_embedded_in_bounded_batches(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The first search over a table embeds it in batches of at most EMBED_BATCH rows, every
        row once."""
        monkeypatch.setattr(_memory_vectors, "EMBED_BATCH", 16)
        store = store_of([{"subject": "s", "body": f"refund {i}"} for i in range(100)])
        embeddings = Batches()
        facade = create_read_only_facade(kind="memory", store=store, embeddings=embeddings)
        facade.search("inquiries", "refund", mode="semantic")
        assert max(embeddings.batches) <= 16 and sum(embeddings.batches) == 100

    def test_rows_beyond_the_bound_rank_as_if_kept(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A bound smaller than the table: the rows that do not fit are embedded per search in
        batches, not kept, and the ranking is the unbounded one."""
        monkeypatch.setattr(_memory_vectors, "EMBED_BATCH", 8)
        rows = [{"subject": "s", "body": f"{WORDS[i % 9]} {WORDS[i % 7]} {i}"} for i in range(60)]
        store = store_of(rows)
        small = VectorCache(store, max_bytes=20 * 16 * 4)
        embedder = Embedder(HashEmbeddings())
        every = store.rows("inquiries")
        texts = [f"s\n{row['body']}" for row in every]
        query = embedder.embed_query("refund parcel")
        expected = sorted(
            VectorCache(store).cosines("inquiries", every, texts, embedder, 16)(query)
        )
        for _ in range(2):
            assert sorted(small.cosines("inquiries", every, texts, embedder, 16)(query)) == expected
        assert len(small) == 20 and small.nbytes <= 20 * 16 * 4

    def test_the_least_recently_searched_table_goes_first(self) -> None:
        """Two tables over a bound that holds one: searching the second evicts the first."""
        store = MemoryStore()
        agent = create_persistence_agent(kind="memory", store=store)
        agent.batch("inquiries", [{"subject": "s", "body": f"refund {i}"} for i in range(10)])
        agent.batch("messages", [{"body": f"refund {i}"} for i in range(10)])
        cache = VectorCache(store, max_bytes=10 * 16 * 4)
        embedder = Embedder(HashEmbeddings())
        for table in ("inquiries", "messages"):
            rows = store.rows(table)
            cache.cosines(table, rows, [str(r["body"]) for r in rows], embedder, 16)
        assert len(cache) == 10 and [key[0] for key in cache._matrices] == ["messages"]


class TestWithoutNumpy:
    def test_the_same_ranking(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without numpy the vectors are a flat array('f') and the cosines a loop: the same
        semantic ranking, and a compaction keeps it."""
        rows = [{"subject": "s", "body": f"{WORDS[i % 9]} {WORDS[i % 5]} {i}"} for i in range(80)]
        with_numpy = [ranking(store_of(rows), text) for text in TEXTS]
        monkeypatch.setattr(_memory_vectors, "numpy_or_none", lambda: None)
        store = store_of(rows)
        assert [ranking(store, text) for text in TEXTS] == with_numpy
        assert vector_cache(store)._np is None
        create_persistence_agent(kind="memory", store=store).delete(
            "inquiries", [Filter("id", Op.GT, 20)]
        )
        assert ranking(store, "refund") == ranking(fresh(store), "refund")


class TestConcurrency:
    def test_writers_and_readers(self) -> None:
        """Readers search (some filtered) in six threads while a writer inserts, updates and
        deletes through PersistenceAgent, over a bound smaller than the table: no error, and
        once writes stop every ranking is a fresh store's."""
        store = store_of([{"subject": "s", "body": f"refund {WORDS[i % 9]}"} for i in range(150)])
        vector_cache(store)._max_bytes = 100 * 16 * 4
        writer = create_persistence_agent(kind="memory", store=store)
        facade = create_read_only_facade(kind="memory", store=store, embeddings=HashEmbeddings())
        errors: list[BaseException] = []

        def search(n: int) -> None:
            try:
                for i in range(6):
                    filters = [Filter("id", Op.LT, 40 + n * 10)] if i % 2 else []
                    facade.search("inquiries", TEXTS[(i + n) % 4], filters=filters, k=5)
            except BaseException as exc:  # pragma: no cover - the failure being tested for
                errors.append(exc)

        threads = [threading.Thread(target=search, args=(n,)) for n in range(6)]
        for thread in threads:
            thread.start()
        for i in range(30):
            writer.upsert("inquiries", [{"id": i + 1, "body": f"changed {WORDS[i % 9]}"}])
            writer.write("inquiries", {"subject": "s", "body": f"new {WORDS[i % 7]}"})
            writer.delete("inquiries", [Filter("id", Op.EQ, 100 + i)])
        for thread in threads:
            thread.join()
        assert not errors
        for text in TEXTS:
            assert ranking(store, text) == ranking(fresh(store), text)

    def test_a_search_keeps_its_rows_when_another_moves_the_slots(self) -> None:
        """A search's vectors stay its rows' own when another search, after writes, rewrites,
        frees and compacts the slots in between (its deleted and older rows are embedded
        again)."""
        store = store_of([{"subject": "s", "body": f"{WORDS[i % 9]} {i}"} for i in range(20)])
        cache = VectorCache(store)
        embedder = Embedder(HashEmbeddings())

        def search() -> Any:
            rows = store.rows("inquiries")
            texts = [f"s\n{row['body']}" for row in rows]
            return cache.cosines("inquiries", rows, texts, embedder, 16)

        query = embedder.embed_query("refund parcel")
        earlier = search()
        expected = sorted(earlier(query))
        writer = create_persistence_agent(kind="memory", store=store)
        writer.upsert("inquiries", [{"id": 1, "body": "refund parcel"}])
        writer.delete("inquiries", [Filter("id", Op.GT, 6)])
        search()
        assert sorted(earlier(query)) == expected
        assert earlier.vector(0) == tuple(float(v) for v in earlier.vector(0))
