"""The fused order in two tiers (:func:`persistence.search.fusion.fuse_tiers`): one order whatever
the page, never a row twice, the deep legs asked for only when a page ends past the first tier;
and the memory backend's pages across the tier boundary."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from persistence import Filter, Op, ReadOnlyPersistenceFacade, create_read_only_facade
from persistence.search.fusion import DEFAULT_WEIGHTS, fuse, fuse_tiers
from persistence.search.model import TIER_DEPTH, TIER_ROWS
from tests.support.search import HashEmbeddings, inquiries_store

_leg = st.lists(st.integers(0, 60), max_size=40, unique=True)
_legs = st.fixed_dictionaries({"keyword": _leg, "trigram": _leg, "semantic": _leg})


def _cut(legs: Mapping[str, Sequence[int]], depth: int) -> dict[str, list[int]]:
    return {name: list(keys[:depth]) for name, keys in legs.items()}


@settings(max_examples=300, deadline=None)
@given(_legs, st.integers(1, 12), st.integers(1, 20), st.integers(0, 50), st.integers(1, 30))
def test_every_depth_is_a_prefix_of_one_order(
    legs: dict[str, list[int]], first_depth: int, tier_rows: int, offset: int, k: int
) -> None:
    """Any page is the same window of the order a deeper request gives; the first ``tier_rows``
    come from the shallow legs' fusion, no row is listed twice, and the deep legs are asked for
    only when the page ends past the first tier."""
    first = _cut(legs, first_depth)
    asked: list[int] = []

    def deeper() -> dict[str, list[int]]:
        asked.append(1)
        return legs

    page = fuse_tiers(first, deeper, DEFAULT_WEIGHTS, offset + k, tier_rows=tier_rows)
    whole = fuse_tiers(first, lambda: legs, DEFAULT_WEIGHTS, 10**6, tier_rows=tier_rows)
    assert page[offset : offset + k] == whole[offset : offset + k]
    keys = [key for key, _, _ in whole]
    assert len(keys) == len(set(keys))
    assert set(keys) == {key for leg in legs.values() for key in leg}
    head = fuse(first, DEFAULT_WEIGHTS)[:tier_rows]
    assert whole[: len(head)] == head
    assert bool(asked) == (offset + k > len(head))


@pytest.fixture(scope="module")
def facade() -> Iterator[ReadOnlyPersistenceFacade]:
    with create_read_only_facade(
        kind="memory", store=inquiries_store(rows=3_000), embeddings=HashEmbeddings()
    ) as facade:
        yield facade


@pytest.mark.parametrize("mode", ["hybrid", "keyword", "semantic"])
@pytest.mark.parametrize("k", [30, 45])
def test_memory_pages_across_the_tier_boundary(
    facade: ReadOnlyPersistenceFacade, mode: str, k: int
) -> None:
    """Pages of ``k`` rows from offset 0 to past the first tier: none overlaps, each is full,
    and together they are the pages of 100 rows (the first ending at the boundary)."""
    text = "refund for a declined card"
    pages = [
        [h.row["id"] for h in facade.search("inquiries", text, k=k, offset=o, mode=mode).hits]
        for o in range(0, 3 * TIER_ROWS, k)
    ]
    flat = [key for page in pages for key in page]
    assert all(len(page) == k for page in pages)
    assert len(flat) == len(set(flat))
    deep = [
        h.row["id"]
        for offset in range(0, 3 * TIER_ROWS + k, TIER_ROWS)
        for h in facade.search("inquiries", text, k=TIER_ROWS, offset=offset, mode=mode).hits
    ]
    assert flat == deep[: len(flat)]


def test_first_tier_fuses_legs_cut_at_its_depth(facade: ReadOnlyPersistenceFacade) -> None:
    """The first page is the fusion of the legs' first TIER_DEPTH rows, rebuilt from deep pages
    of each leg alone (a single leg's fused order is the leg itself)."""
    text = "refund for a declined card"
    legs = {}
    for mode, leg in (("keyword", "keyword"), ("semantic", "semantic")):
        hits = [
            h
            for offset in range(0, 1_000, 100)
            for h in facade.search("inquiries", text, k=100, offset=offset, mode=mode).hits
        ]
        legs[leg] = [h.row["id"] for h in hits if h.ranks.get(leg) is not None]
    trigram = [
        h
        for offset in range(0, 1_000, 100)
        for h in facade.search("inquiries", text, k=100, offset=offset, mode="keyword").hits
    ]
    ranked = sorted((h.ranks["trigram"], h.row["id"]) for h in trigram if h.ranks["trigram"])
    assert not ranked, "the generated subjects hold no word this similar"
    hybrid = facade.search("inquiries", text, k=TIER_ROWS, mode="hybrid")
    first = _cut(
        {"keyword": legs["keyword"], "trigram": [], "semantic": legs["semantic"]}, TIER_DEPTH
    )
    expected = [key for key, _, _ in fuse(first, DEFAULT_WEIGHTS)[:TIER_ROWS]]
    assert [h.row["id"] for h in hybrid.hits] == expected


def test_filtered_pages_across_the_boundary_are_full(facade: ReadOnlyPersistenceFacade) -> None:
    flt = Filter("lead_id", Op.LT, 100)  # 10 %: 300 rows
    seen: list[int] = []
    for offset in range(0, 300, 40):
        result = facade.search("inquiries", "refund", filters=[flt], k=40, offset=offset)
        assert len(result.hits) == min(40, 300 - offset)
        seen += [h.row["id"] for h in result.hits]
    assert len(seen) == len(set(seen)) == 300
