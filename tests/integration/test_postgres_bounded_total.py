"""``exact_total=False`` on PostgreSQL: the total counted only up to the page's end plus one.

The page is the exact read's page; the total is exact below the bound and the bound itself at
it (``total_exact`` false), in both statement forms (plain, and probing where no index serves a
filter); and the statement no longer counts every match.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from persistence import Filter, Op, Order, Query, create_read_only_facade
from persistence.facade import ReadOnlyPersistenceFacade
from rag_agent import RAGAgent, RAGSettings, create_rag_agent
from rag_agent.runtime.cache import QueryCache
from tests.conftest import PostgresDatabase
from tests.support.explain import executed_nodes

pytestmark = pytest.mark.postgres

MATCHES = 90
OTHERS = 400
#: An unindexed filter (the probing form), an indexed one and none (both plain), each with its
#: number of matches.
READS = [
    ((Filter("company_name", Op.EQ, "Bound"),), MATCHES),
    ((Filter("email", Op.EQ, "user7@example.com"),), 1),
    ((), MATCHES + OTHERS),
]


@pytest.fixture(scope="module")
def db(postgres_supabase_db: PostgresDatabase) -> Iterator[PostgresDatabase]:
    with postgres_supabase_db.leads(
        "INSERT INTO leads (email, company_name, score) "
        "SELECT 'user' || g || '@example.com', "
        "CASE WHEN g <= %s THEN 'Bound' ELSE 'Other ' || g END, g %% 5 "
        "FROM generate_series(1, %s) AS g",
        (MATCHES, MATCHES + OTHERS),
    ) as db:
        yield db


@pytest.fixture(scope="module")
def facade(db: PostgresDatabase) -> Iterator[ReadOnlyPersistenceFacade]:
    with create_read_only_facade(kind="postgres", dsn=db.reader_dsn) as reader:
        yield reader


@settings(max_examples=60, deadline=None)
@given(
    read=st.sampled_from(READS),
    limit=st.one_of(st.none(), st.integers(1, 2 * MATCHES)),
    offset=st.integers(0, MATCHES + OTHERS + 10),
)
def test_bounded_total_against_the_exact_read(
    facade: ReadOnlyPersistenceFacade,
    read: tuple[tuple[Filter, ...], int],
    limit: int | None,
    offset: int,
) -> None:
    filters, matches = read
    window: dict[str, Any] = {"order": (Order("score"),), "limit": limit, "offset": offset}
    exact = facade.read("leads", filters, columns=("id", "score"), **window)
    bounded = facade.read("leads", filters, columns=("id", "score"), exact_total=False, **window)
    assert exact.total_count == matches and exact.total_exact
    assert bounded.rows == exact.rows
    if limit is None or matches <= offset + limit:
        assert (bounded.total_count, bounded.total_exact) == (matches, True)
    else:
        assert (bounded.total_count, bounded.total_exact) == (offset + limit + 1, False)
    # Whether another page follows reads the same off either total.
    end = offset + len(bounded.rows)
    assert (bounded.total_count > end) == (exact.total_count > end)


def counting_scans(dsn: str, query: Query, probe: bool) -> list[int]:
    """Rows each executed aggregate in the read statement of ``query`` counted."""
    return [
        int(child["Actual Rows"])
        for node in executed_nodes(dsn, query, ("id",), probe=probe)
        if node.get("Node Type") == "Aggregate"
        for child in node.get("Plans", ())
    ]


@pytest.mark.parametrize("probe", [False, True])
def test_the_count_stops_at_the_bound(db: PostgresDatabase, probe: bool) -> None:
    """Counting every match reads all of them; the bounded count reads the page's end plus one."""
    filters = (Filter("company_name", Op.EQ, "Bound"),)
    exact = counting_scans(db.reader_dsn, Query("leads", filters, limit=10), probe)
    bounded = counting_scans(
        db.reader_dsn, Query("leads", filters, limit=10, exact_total=False), probe
    )
    assert MATCHES in exact
    assert bounded and max(bounded) == 11


def test_flag_is_checked(facade: ReadOnlyPersistenceFacade) -> None:
    from persistence.errors import InvalidQueryError

    for _ in range(2):  # the first read plans the shape, the second takes its plan
        with pytest.raises(InvalidQueryError, match="exact_total"):
            facade.read("leads", limit=5, exact_total="no")  # type: ignore[arg-type]
        facade.read("leads", limit=5)


@pytest.fixture(scope="module")
def agent(db: PostgresDatabase) -> Iterator[RAGAgent]:
    settings = RAGSettings.from_env({"RAG_EXACT_TOTALS": "0"}, cache_disabled=True, llm=False)
    rag = create_rag_agent(kind="postgres", dsn=db.reader_dsn, settings=settings)
    yield rag
    rag.facade.close()


class TestAgentWithBoundedTotals:
    """``RAG_EXACT_TOTALS=0``: a page's total is a lower bound past the page; counts stay exact."""

    def test_a_page_short_of_the_matches(self, agent: RAGAgent) -> None:
        meta = agent.run("leads at Bound", limit=20, return_json=True)["metadata"]
        assert (meta["total_count"], meta["total_exact"]) == (21, False)
        assert (meta["has_more"], meta["next_offset"]) == (True, 20)

    def test_the_last_page_is_exact(self, agent: RAGAgent) -> None:
        meta = agent.run("leads at Bound", limit=20, offset=80, return_json=True)["metadata"]
        assert meta["total_count"] == MATCHES and "total_exact" not in meta
        assert meta["has_more"] is False

    def test_a_count_is_exact(self, agent: RAGAgent) -> None:
        meta = agent.run("how many leads at Bound", return_json=True)["metadata"]
        assert meta["total_count"] == MATCHES and "total_exact" not in meta


def test_aread_bounds_the_total_as_read_does(db: PostgresDatabase) -> None:
    filters = [Filter("company_name", Op.EQ, "Bound")]
    with create_read_only_facade(kind="postgres", dsn=db.reader_dsn) as reader:
        blocking = reader.read("leads", filters, limit=10, offset=5, exact_total=False)

        async def main() -> Any:
            try:
                return await reader.aread("leads", filters, limit=10, offset=5, exact_total=False)
            finally:
                await reader.aclose()

        awaited = asyncio.run(main())
    assert awaited == blocking
    assert (blocking.total_count, blocking.total_exact) == (16, False)


def test_a_shared_cache_keeps_each_way_of_counting(db: PostgresDatabase) -> None:
    """Two agents sharing one result cache, one counting exactly and one bounded, never answer
    with the other's total."""
    shared = QueryCache(64, 300)
    with create_read_only_facade(kind="postgres", dsn=db.reader_dsn) as reader:
        bounded = RAGAgent(reader, settings=RAGSettings(exact_totals=False), cache=shared)
        exact = RAGAgent(reader, settings=RAGSettings(), cache=shared)
        first = bounded.run("leads at Bound", limit=20, return_json=True)["metadata"]
        second = exact.run("leads at Bound", limit=20, return_json=True)["metadata"]
    assert (first["total_count"], first["cache"]) == (21, "miss")
    assert (second["total_count"], second["cache"]) == (MATCHES, "miss")
