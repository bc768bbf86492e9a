"""``facade.search`` on the memory backend: filters are hard constraints, pages are exact, ranks
and scores have the fused shape, and what cannot run is said, never raised untyped."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from persistence import (
    AccessPolicy,
    Filter,
    InvalidQueryError,
    MemoryBackend,
    MemoryStore,
    Op,
    ReadOnlyPersistenceFacade,
    create_persistence_agent,
    create_read_only_facade,
)
from persistence.backends.memory.search import VectorCache, vector_cache
from persistence.search import RRF_K, SearchMode
from persistence.search.embedder import Embedder
from persistence.search.fusion import DEFAULT_WEIGHTS
from tests.support.search import HashEmbeddings, inquiries_store

#: Filters keeping 50 %, 10 %, 1 % and 0.1 % of the generated inquiries.
SELECTIVITIES = {
    "50%": Filter("lead_id", Op.LT, 500),
    "10%": Filter("lead_id", Op.LT, 100),
    "1%": Filter("lead_id", Op.LT, 10),
    "0.1%": Filter("lead_id", Op.EQ, 7),
}


@pytest.fixture(scope="module")
def generated() -> MemoryStore:
    return inquiries_store()


@pytest.fixture(scope="module")
def hybrid(generated: MemoryStore) -> Iterator[ReadOnlyPersistenceFacade]:
    with create_read_only_facade(
        kind="memory", store=generated, embeddings=HashEmbeddings()
    ) as facade:
        yield facade


@pytest.fixture(scope="module")
def keyword_only(generated: MemoryStore) -> Iterator[ReadOnlyPersistenceFacade]:
    with create_read_only_facade(kind="memory", store=generated) as facade:
        yield facade


def small_store(rows: list[dict[str, Any]]) -> MemoryStore:
    store = MemoryStore()
    create_persistence_agent(kind="memory", store=store).batch("inquiries", rows)
    return store


class TestExactlyKRows:
    """When at least ``offset + k`` rows match the filters, exactly ``k`` come back."""

    @pytest.mark.parametrize("selectivity", sorted(SELECTIVITIES))
    @pytest.mark.parametrize("k", [10, 50])
    @pytest.mark.parametrize("mode", ["hybrid", "keyword"])
    def test_pages_one_to_three(
        self,
        hybrid: ReadOnlyPersistenceFacade,
        selectivity: str,
        k: int,
        mode: str,
    ) -> None:
        """Each of pages 1-3 holds min(k, matching - offset) rows, all matching the filter,
        none repeated across pages, and total_count is the filtered count."""
        flt = SELECTIVITIES[selectivity]
        matching = hybrid.count("inquiries", [flt])
        seen: set[int] = set()
        for page in range(3):
            offset = page * k
            result = hybrid.search(
                "inquiries", "refund for a declined card", filters=[flt], k=k, offset=offset,
                mode=mode,
            )  # fmt: skip
            assert len(result.hits) == max(0, min(k, matching - offset))
            assert result.total_count == matching
            ids = [row["id"] for row in result.rows]
            assert all(row["lead_id"] < 500 for row in result.rows)
            if flt.op is Op.EQ:
                assert all(row["lead_id"] == 7 for row in result.rows)
            elif flt.op is Op.LT:
                assert all(row["lead_id"] < flt.value for row in result.rows)
            assert not seen & set(ids)
            seen.update(ids)

    def test_keyword_pages_are_filled_in_id_order(
        self, keyword_only: ReadOnlyPersistenceFacade
    ) -> None:
        """A word few rows hold ranks those first; the rest of the page is the other matching
        rows in id order, with score 0 and no rank."""
        flt = SELECTIVITIES["1%"]
        result = keyword_only.search("inquiries", "roadmap", filters=[flt], k=50, mode="keyword")
        assert len(result.hits) == 50
        ranked = [h for h in result.hits if h.score > 0]
        filled = [h for h in result.hits if h.score == 0]
        assert ranked and filled
        assert result.hits[: len(ranked)] == tuple(ranked)
        assert all("roadmap" in h.row["body"] for h in ranked)
        assert all(set(h.ranks.values()) == {None} for h in filled)
        filled_ids = [h.row["id"] for h in filled]
        assert filled_ids == sorted(filled_ids)

    def test_a_page_beyond_the_ranked_rows_is_still_full(
        self, keyword_only: ReadOnlyPersistenceFacade
    ) -> None:
        """The fill continues across pages: page 2 starts where page 1's fill stopped."""
        flt = SELECTIVITIES["1%"]
        first = keyword_only.search("inquiries", "roadmap", filters=[flt], k=30, mode="keyword")
        second = keyword_only.search(
            "inquiries", "roadmap", filters=[flt], k=30, offset=30, mode="keyword"
        )
        assert len(second.hits) == 20  # 50 rows match
        ids = [r["id"] for r in first.rows] + [r["id"] for r in second.rows]
        assert len(set(ids)) == 50


class TestTotals:
    @pytest.mark.parametrize("exact_total", [True, False])
    def test_the_memory_backend_counts_every_match_either_way(
        self, hybrid: ReadOnlyPersistenceFacade, exact_total: bool
    ) -> None:
        """A bounded total is the backend's choice: the memory backend counts exactly and says
        so, asked or not, and the page is the same."""
        flt = SELECTIVITIES["50%"]
        result = hybrid.search(
            "inquiries", "refund for a declined card", filters=[flt], exact_total=exact_total
        )
        exact = hybrid.search(
            "inquiries", "refund for a declined card", filters=[flt], exact_total=True
        )
        assert result.total_count == hybrid.count("inquiries", [flt])
        assert result.total_exact is True
        assert result.hits == exact.hits

    @pytest.mark.parametrize("bad", [None, 1, "yes"])
    def test_exact_total_must_be_a_bool(
        self, hybrid: ReadOnlyPersistenceFacade, bad: object
    ) -> None:
        with pytest.raises(InvalidQueryError, match="exact_total"):
            hybrid.search("inquiries", "refund", exact_total=bad)  # type: ignore[arg-type]


class TestRanksAndScores:
    def test_score_is_the_weighted_reciprocal_rank_sum(
        self, hybrid: ReadOnlyPersistenceFacade
    ) -> None:
        """Every hit's score equals the sum over its legs of weight / (60 + rank), and hits come
        best first."""
        result = hybrid.search("inquiries", "courier delivery late", k=20)
        assert result.legs == ("keyword", "trigram", "semantic")
        assert result.mode is SearchMode.HYBRID and result.degraded is None
        for hit in result.hits:
            assert set(hit.ranks) == set(result.legs)
            expected = sum(
                DEFAULT_WEIGHTS[leg] / (RRF_K + rank)
                for leg, rank in hit.ranks.items()
                if rank is not None
            )
            assert math.isclose(hit.score, expected, rel_tol=1e-12)
        scores = [hit.score for hit in result.hits]
        assert scores == sorted(scores, reverse=True)

    def test_equal_scores_break_by_id(self) -> None:
        """Rows with the same text rank in id order, in every leg and fused."""
        store = small_store([{"id": i, "subject": "Same", "body": "same words"} for i in (5, 2, 9)])
        facade = create_read_only_facade(kind="memory", store=store, embeddings=HashEmbeddings())
        result = facade.search("inquiries", "same words", k=3)
        assert [row["id"] for row in result.rows] == [2, 5, 9]
        assert [hit.ranks["keyword"] for hit in result.hits] == [1, 2, 3]

    def test_rows_carry_their_own_columns(self, hybrid: ReadOnlyPersistenceFacade) -> None:
        """A hit's row is the row's columns, id included; changing it changes nothing stored."""
        hit = hybrid.search("inquiries", "invoice", k=1).hits[0]
        assert {"id", "subject", "body", "lead_id", "client_id"} <= set(hit.row)
        hit.row["body"] = "changed"
        again = hybrid.search("inquiries", "invoice", k=1).hits[0]
        assert again.row["body"] != "changed"

    def test_a_typo_in_a_short_field_is_found_by_trigram(self) -> None:
        """``Globx`` finds the row whose subject says ``Globex``, through the trigram leg."""
        store = small_store(
            [
                {"subject": "Question from Globex Industries", "body": "hello"},
                {"subject": "Other", "body": "hello"},
            ]
        )
        result = create_read_only_facade(kind="memory", store=store).search(
            "inquiries", "Globx", mode="keyword", k=1
        )
        assert result.rows[0]["id"] == 1
        assert result.hits[0].ranks == {"keyword": None, "trigram": 1}

    def test_no_short_column_no_trigram_leg(self) -> None:
        """Messages have no short text column: the keyword mode runs the keyword leg only."""
        store = MemoryStore()
        create_persistence_agent(kind="memory", store=store).write("messages", {"body": "hi"})
        result = create_read_only_facade(kind="memory", store=store).search(
            "messages", "hi", mode="keyword"
        )
        assert result.legs == ("keyword",)


class TestDegraded:
    def test_hybrid_without_embeddings_runs_keyword_and_says_so(
        self, keyword_only: ReadOnlyPersistenceFacade
    ) -> None:
        result = keyword_only.search("inquiries", "refund")
        assert result.mode is SearchMode.KEYWORD
        assert result.legs == ("keyword", "trigram")
        assert result.degraded is not None and "semantic" in result.degraded

    def test_semantic_without_embeddings_is_a_typed_error(
        self, keyword_only: ReadOnlyPersistenceFacade
    ) -> None:
        with pytest.raises(InvalidQueryError, match="embeddings"):
            keyword_only.search("inquiries", "refund", mode="semantic")

    @pytest.mark.parametrize("text", ["!!! ???", "—", "___"])
    def test_text_without_words_ranks_nothing_by_keyword(
        self, hybrid: ReadOnlyPersistenceFacade, text: str
    ) -> None:
        """No words: the keyword leg does not run, the page is still full, and it is said."""
        result = hybrid.search("inquiries", text, mode="keyword", k=5)
        assert "keyword" not in result.legs
        assert result.degraded is not None and "keyword" in result.degraded
        assert len(result.hits) == 5

    def test_stop_words_only_still_search(self, keyword_only: ReadOnlyPersistenceFacade) -> None:
        """A text of framing words alone keeps them (nothing else is left) and never fails."""
        result = keyword_only.search("inquiries", "show me the records of these", k=5)
        assert len(result.hits) == 5

    @pytest.mark.parametrize("mode", ["semantic", "hybrid"])
    def test_a_zero_query_vector_is_a_typed_error(self, mode: str) -> None:
        """A text the model maps to the zero vector has no direction to rank by."""
        store = small_store([{"subject": "a", "body": "b"}])
        facade = create_read_only_facade(kind="memory", store=store, embeddings=HashEmbeddings())
        with pytest.raises(InvalidQueryError, match="zero vector"):
            facade.search("inquiries", "!!!", mode=mode)

    def test_a_nan_query_vector_is_a_typed_error(self) -> None:
        class NaNEmbeddings(HashEmbeddings):
            def embed_query(self, text: str) -> list[float]:
                return [math.nan] * 16

        store = small_store([{"subject": "a", "body": "b"}])
        facade = create_read_only_facade(kind="memory", store=store, embeddings=NaNEmbeddings())
        with pytest.raises(InvalidQueryError, match="NaN"):
            facade.search("inquiries", "anything", mode="semantic")

    def test_a_row_without_direction_is_ranked_nowhere(self) -> None:
        """A row whose text embeds to the zero vector is not ranked by the semantic leg, and
        the search does not fail."""
        store = small_store([{"subject": "???", "body": "!!!"}, {"subject": "refund", "body": "x"}])
        facade = create_read_only_facade(kind="memory", store=store, embeddings=HashEmbeddings())
        result = facade.search("inquiries", "refund", mode="semantic", k=2)
        assert [h.ranks["semantic"] for h in result.hits] == [1, None]

    def test_a_dimension_change_is_a_typed_error(self) -> None:
        """Documents of another dimension than the query's are refused, not ranked."""

        class Shifting(HashEmbeddings):
            def embed_documents(self, texts: list[str]) -> list[list[float]]:
                return [[*v, 1.0] for v in super().embed_documents(texts)]

        store = small_store([{"subject": "refund", "body": "x"}])
        facade = create_read_only_facade(kind="memory", store=store, embeddings=Shifting())
        with pytest.raises(InvalidQueryError, match="dimensions"):
            facade.search("inquiries", "refund", mode="semantic")


class TestPolicy:
    def test_a_disallowed_column_is_neither_searched_nor_returned(self) -> None:
        """With ``body`` outside the policy, a word only the body holds finds nothing by
        keyword, the model never sees a body, and rows have no ``body``."""
        store = small_store(
            [{"subject": "Invoice", "body": "secretword"}, {"subject": "Other", "body": "x"}]
        )
        embeddings = HashEmbeddings()
        facade = create_read_only_facade(
            kind="memory",
            store=store,
            columns={"inquiries": ("id", "subject", "lead_id")},
            embeddings=embeddings,
        )
        result = facade.search("inquiries", "secretword", k=2)
        assert all("body" not in row for row in result.rows)
        assert all(hit.ranks["keyword"] is None for hit in result.hits)
        assert embeddings.documents and not any("secretword" in t for t in embeddings.documents)


class TestRowVectors:
    def test_vectors_are_computed_once_and_kept_current_on_writes(self) -> None:
        """The first search embeds every row; the next embeds none; after an update through
        PersistenceAgent only the changed row; a deleted row's vector is forgotten."""
        store = small_store([{"subject": f"s{i}", "body": f"body {i}"} for i in range(20)])
        writer = create_persistence_agent(kind="memory", store=store)
        embeddings = HashEmbeddings()
        facade = create_read_only_facade(kind="memory", store=store, embeddings=embeddings)
        facade.search("inquiries", "body", mode="semantic")
        assert len(embeddings.documents) == 20
        facade.search("inquiries", "another body", mode="semantic")
        assert len(embeddings.documents) == 20
        writer.upsert("inquiries", [{"id": 3, "body": "refund now"}])
        result = facade.search("inquiries", "s2 refund now", mode="semantic", k=1)
        assert embeddings.documents[20:] == ["s2\nrefund now"]
        assert result.rows[0]["id"] == 3
        writer.delete("inquiries", [Filter("id", Op.EQ, 3)])
        facade.search("inquiries", "refund", mode="semantic")
        assert len(vector_cache(store)) == 19

    def test_another_model_re_embeds(self) -> None:
        """Vectors of one model are never ranked against another's query."""
        store = small_store([{"subject": "a", "body": "refund"} for _ in range(5)])
        first, second = HashEmbeddings("m1"), HashEmbeddings("m2", dimension=8)
        create_read_only_facade(kind="memory", store=store, embeddings=first).search(
            "inquiries", "refund", mode="semantic"
        )
        create_read_only_facade(kind="memory", store=store, embeddings=second).search(
            "inquiries", "refund", mode="semantic"
        )
        assert len(first.documents) == len(second.documents) == 5

    def test_only_filtered_rows_are_embedded(self) -> None:
        store = small_store([{"subject": "a", "body": "b", "lead_id": i % 2} for i in range(10)])
        embeddings = HashEmbeddings()
        facade = create_read_only_facade(kind="memory", store=store, embeddings=embeddings)
        facade.search("inquiries", "b", filters=[Filter("lead_id", Op.EQ, 1)], mode="semantic")
        assert len(embeddings.documents) == 5

    def test_the_cache_is_bounded(self) -> None:
        """A cache smaller than the table keeps what fits; searches stay correct (the rest are
        embedded again)."""
        store = small_store([{"subject": "a", "body": f"refund {i}"} for i in range(10)])
        cache = VectorCache(store, max_bytes=4 * 16 * 4)  # four 16-dimension vectors
        embedder = Embedder(HashEmbeddings())
        rows = store.rows("inquiries")
        texts = [row["body"] for row in rows]
        query = embedder.embed_query("refund 3")
        first = sorted(cache.cosines("inquiries", rows, texts, embedder, 16)(query))
        assert len(cache) == 4 and cache.nbytes <= 4 * 16 * 4
        unbounded = VectorCache(store).cosines("inquiries", rows, texts, embedder, 16)
        assert sorted(unbounded(query)) == first
        assert sorted(cache.cosines("inquiries", rows, texts, embedder, 16)(query)) == first

    def test_concurrent_searches_and_writes(self) -> None:
        """Searches in eight threads while a writer updates rows: no error, and once writes
        stop every thread sees the same ranking as a fresh facade."""
        store = small_store([{"subject": f"s{i}", "body": f"refund {i}"} for i in range(200)])
        writer = create_persistence_agent(kind="memory", store=store)
        facade = create_read_only_facade(kind="memory", store=store, embeddings=HashEmbeddings())
        errors: list[BaseException] = []

        def search() -> None:
            try:
                for _ in range(5):
                    facade.search("inquiries", "refund 7", k=5)
            except BaseException as exc:  # pragma: no cover - the failure being tested for
                errors.append(exc)

        threads = [threading.Thread(target=search) for _ in range(8)]
        for thread in threads:
            thread.start()
        for i in range(20):
            writer.upsert("inquiries", [{"id": i + 1, "body": f"changed {i}"}])
        for thread in threads:
            thread.join()
        assert not errors
        expected = create_read_only_facade(
            kind="memory",
            store=small_store(list(store.rows("inquiries"))),
            embeddings=HashEmbeddings(),
        ).search("inquiries", "refund 7", k=5)
        assert facade.search("inquiries", "refund 7", k=5).rows == expected.rows

    def test_searches_are_deterministic(self, generated: MemoryStore) -> None:
        """Two facades over one store give the same hits for the same request."""
        first, second = (
            create_read_only_facade(kind="memory", store=generated, embeddings=HashEmbeddings())
            for _ in range(2)
        )
        request = {"text": "late parcel", "filters": [SELECTIVITIES["10%"]], "k": 20}
        assert first.search("inquiries", **request) == second.search("inquiries", **request)


def test_text_columns_reach_the_backend_in_table_order() -> None:
    """Whatever order a column policy lists them in, the backend ranks over the table's text
    columns in table order: the keyword leg's text is them joined, and only that order is served
    by the expression index doctor prints."""
    seen: list[tuple[str, ...]] = []

    class Recording(MemoryBackend):
        def search(self, query: Any, request: Any, text_columns: Any, embedder: Any) -> Any:
            seen.append(text_columns)
            return super().search(query, request, text_columns, embedder)

    store = small_store([{"subject": "cancel", "body": "stop paying", "client_id": 1}])
    policy = AccessPolicy.read_only(["inquiries"], {"inquiries": ["body", "id", "subject"]})
    facade = ReadOnlyPersistenceFacade(Recording(store), policy)
    assert facade.search("inquiries", "paying", mode="keyword").rows[0]["body"] == "stop paying"
    assert seen == [("subject", "body")]
