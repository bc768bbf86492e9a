"""Totals from ``Content-Range``, pages refilled under a server row cap, literal ``*`` checks."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from persistence import BackendError, Filter, MemoryStore, Op, Order, Query
from persistence.backends.memory import MemoryBackend
from persistence.backends.supabase.postgrest.encoding import parse_content_range
from tests.support.http import ScriptedServer, backend_over, rows_response
from tests.support.postgrest import PostgrestEmulator, decode_query


def seeded_store(count: int) -> MemoryStore:
    store = MemoryStore()
    store.insert("leads", [{"email": f"u{i}@x.io", "score": i % 7} for i in range(count)])
    return store


class TestContentRange:
    @pytest.mark.parametrize(
        ("header", "first", "last", "total"),
        [
            ("0-24/3573458", 0, 24, 3573458),
            ("*/0", None, None, 0),
            ("0-14/*", 0, 14, None),
            ("*/*", None, None, None),
            (" 5-9/10 ", 5, 9, 10),
        ],
    )
    def test_parses_postgrest_forms(
        self, header: str, first: int | None, last: int | None, total: int | None
    ) -> None:
        """Ranges and totals parse; ``*`` means unknown."""
        parsed = parse_content_range(header)
        assert parsed is not None
        assert (parsed.first, parsed.last, parsed.total) == (first, last, total)

    @pytest.mark.parametrize("header", [None, "", "items 0-1/2", "0-1", "a-b/c", "0-1/-3"])
    def test_malformed_headers_are_none(self, header: str | None) -> None:
        """Anything else is treated as absent."""
        assert parse_content_range(header) is None


class TestRowCap:
    @pytest.mark.parametrize("cap", [1, 3, 1000])
    def test_capped_responses_are_refilled(self, cap: int) -> None:
        """A server that truncates silently still yields the full page and total."""
        store = seeded_store(10)
        emulator = PostgrestEmulator(store, max_rows=cap)
        backend = backend_over(emulator)
        page = backend.read(Query("leads", limit=8, offset=1))
        assert [r["id"] for r in page.rows] == list(range(2, 10))
        assert page.total_count == 10
        assert len(emulator.requests) == -(-8 // cap)

    def test_unbounded_read_under_cap_stops_at_the_total(self) -> None:
        """With an exact total, no request is made past the last row."""
        emulator = PostgrestEmulator(seeded_store(6), max_rows=2)
        page = backend_over(emulator).read(Query("leads"))
        assert len(page.rows) == 6
        assert len(emulator.requests) == 3
        only_first_counts = [r.headers.get("Prefer") for r in emulator.requests]
        assert only_first_counts == ["count=exact", None, None]

    def test_page_size_bounds_each_request(self) -> None:
        """``page_size`` is the most rows asked for in one request."""
        emulator = PostgrestEmulator(seeded_store(5))
        page = backend_over(emulator, page_size=2).read(Query("leads", limit=5))
        assert len(page.rows) == 5
        limits = [dict(decode_query(r.url.query)).get("limit") for r in emulator.requests]
        assert limits == ["2", "2", "1"]

    def test_estimated_totals_confirm_the_end_with_one_more_request(self) -> None:
        """Without an exact total, a short answer is confirmed by one more, empty, request."""
        emulator = PostgrestEmulator(seeded_store(3), max_rows=2)
        page = backend_over(emulator, count="planned").read(Query("leads"))
        assert len(page.rows) == 3
        assert len(emulator.requests) == 3

    def test_offset_past_the_end_is_an_empty_page(self) -> None:
        """PostgREST's 416 PGRST103 for an offset beyond the rows becomes an empty page."""
        emulator = PostgrestEmulator(seeded_store(3))
        page = backend_over(emulator).read(Query("leads", limit=2, offset=10))
        assert page.rows == []
        assert page.total_count == 3

    def test_more_rows_than_asked_is_an_error(self) -> None:
        """A server ignoring ``limit`` is a backend error, not silently accepted."""
        server = ScriptedServer([rows_response([{"id": 1}, {"id": 2}], "0-1/2")])
        with pytest.raises(BackendError):
            backend_over(server).read(Query("leads", limit=1))


class TestBoundedReads:
    def test_a_gateway_ignoring_offset_is_an_error_not_an_endless_read(self) -> None:
        """A server answering the first rows whatever the offset (Content-Range 0-1) ends the
        read with a BackendError at the second request."""
        server = ScriptedServer([rows_response([{"id": 1}, {"id": 2}], "0-1/*")])
        backend = backend_over(server, page_size=2)
        with pytest.raises(BackendError, match="ignore 'offset'"):
            backend.read(Query("leads"))
        assert len(server.requests) == 2

    def test_a_literal_star_over_a_large_table_is_bounded(self) -> None:
        """icontains '*' is re-checked on this side, so every candidate row is fetched: past the
        read bound (max_read_rows=) that is a BackendError, not a download of the whole table."""
        emulator = PostgrestEmulator(seeded_store(120))
        with pytest.raises(BackendError, match="more than 50 rows"):
            backend_over(emulator, page_size=20, max_read_rows=50).read(
                Query("leads", (Filter("email", Op.ICONTAINS, "*"),), limit=1)
            )


class TestStarTotals:
    def test_unknown_total_at_the_end_is_derived(self) -> None:
        """``*`` as total with the rows ending on this page: the total is what was read."""
        server = ScriptedServer(
            [rows_response([{"id": 1}, {"id": 2}], "0-1/*"), rows_response([], "*/*")]
        )
        page = backend_over(server).read(Query("leads", limit=5))
        assert page.rows == [{"id": 1}, {"id": 2}]
        assert page.total_count == 2
        assert len(server.requests) == 2  # the rows, then the empty answer that ends them

    def test_unknown_total_mid_table_is_counted_separately(self) -> None:
        """``*`` with the page full: one more request asks for the count alone."""
        server = ScriptedServer([rows_response([{"id": 1}], "0-0/*"), rows_response([], "*/9")])
        page = backend_over(server).read(Query("leads", limit=1))
        assert page.total_count == 9
        assert ("limit", "0") in server.params(1)

    def test_unknown_total_that_cannot_be_counted_is_an_error(self) -> None:
        """When even a count request answers ``*``, a BackendError names the likely cause."""
        server = ScriptedServer([rows_response([], "*/*")])
        with pytest.raises(BackendError, match="Prefer"):
            backend_over(server).count("leads", [])

    def test_missing_content_range_on_count_is_an_error(self) -> None:
        """No ``Content-Range`` at all is as unusable as ``*``."""
        server = ScriptedServer([rows_response([], None)])
        with pytest.raises(BackendError):
            backend_over(server).count("leads", [])


class TestLiteralStar:
    ROWS: ClassVar[list[dict[str, object]]] = [
        {"company_name": "a*b"},
        {"company_name": "axb"},
        {"company_name": "A*B corp"},
        {"company_name": None},
        {"company_name": "**"},
        {"company_name": "a*bc*d"},
    ]

    @pytest.fixture
    def store(self) -> MemoryStore:
        store = MemoryStore()
        store.insert("leads", self.ROWS)
        return store

    def test_star_matches_only_literally(self, store: MemoryStore) -> None:
        """``a*b`` matches rows with a real ``*``, never ``axb``, with correct counts."""
        backend = backend_over(PostgrestEmulator(store, max_rows=2))
        flt = Filter("company_name", Op.ICONTAINS, "a*b")
        page = backend.read(Query("leads", filters=(flt,), limit=2, offset=1))
        every = backend.read(Query("leads", filters=(flt,)))
        assert [r["company_name"] for r in every.rows] == ["a*b", "A*B corp", "a*bc*d"]
        assert [r["company_name"] for r in page.rows] == ["A*B corp", "a*bc*d"]
        assert page.total_count == every.total_count == 3
        assert backend.count("leads", [flt]) == 3

    def test_star_in_ilike_pattern_is_literal(self, store: MemoryStore) -> None:
        """In an ilike pattern ``*`` is an ordinary character too."""
        backend = backend_over(PostgrestEmulator(store))
        page = backend.read(Query("leads", filters=(Filter("company_name", Op.ILIKE, "a*b%"),)))
        assert [r["company_name"] for r in page.rows] == ["a*b", "A*B corp", "a*bc*d"]

    def test_projection_hides_the_checked_column(self, store: MemoryStore) -> None:
        """The column fetched for the check is dropped when it was not asked for."""
        backend = backend_over(PostgrestEmulator(store))
        flt = Filter("company_name", Op.ICONTAINS, "**")
        page = backend.read(Query("leads", filters=(flt,), columns=("id",)))
        assert page.rows == [{"id": 5}]

    def test_order_is_kept_through_the_check(self, store: MemoryStore) -> None:
        """Rows kept by the client check stay in the server's order."""
        backend = backend_over(PostgrestEmulator(store))
        flt = Filter("company_name", Op.ICONTAINS, "*")
        page = backend.read(
            Query("leads", filters=(flt,), order=(Order("company_name", descending=True),))
        )
        assert [r["company_name"] for r in page.rows] == ["a*bc*d", "a*b", "A*B corp", "**"]

    @given(
        needle=st.text(alphabet="ab*%_\\", min_size=1, max_size=4),
        limit=st.integers(0, 4),
        offset=st.integers(0, 4),
    )
    def test_agrees_with_memory_backend(self, needle: str, limit: int, offset: int) -> None:
        """Pages and totals equal the memory backend's for any literal with stars and escapes."""
        store = MemoryStore()
        store.insert(
            "leads",
            [{"company_name": v} for v in ["a*b", "ab", "a%b", "a_b", "a\\b", "*", "%", "b*a"]],
        )
        query = Query(
            "leads",
            filters=(Filter("company_name", Op.ICONTAINS, needle),),
            limit=limit,
            offset=offset,
        )
        expected = MemoryBackend(store).read(query)
        got = backend_over(PostgrestEmulator(store, max_rows=2)).read(query)
        assert got.rows == expected.rows
        assert got.total_count == expected.total_count


class TestThreads:
    def test_one_backend_serves_many_threads(self) -> None:
        """Concurrent reads through one backend each get their own correct, refilled page."""
        backend = backend_over(PostgrestEmulator(seeded_store(40), max_rows=3))

        def read(offset: int) -> tuple[list[object], int]:
            page = backend.read(Query("leads", limit=7, offset=offset))
            return [r["id"] for r in page.rows], page.total_count

        with ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(read, range(0, 40, 2)))
        for offset, (ids, total) in zip(range(0, 40, 2), results, strict=True):
            assert ids == list(range(offset + 1, min(offset + 7, 40) + 1))
            assert total == 40


class TestBoundedTotal:
    """``exact_total=False``: no count is asked for; one row past the page tells what follows."""

    @given(
        count=st.integers(0, 12),
        limit=st.integers(1, 6),
        offset=st.integers(0, 14),
        cap=st.sampled_from([2, 1000]),
    )
    def test_against_the_memory_backend(
        self, count: int, limit: int, offset: int, cap: int
    ) -> None:
        store = seeded_store(count)
        emulator = PostgrestEmulator(store, max_rows=cap)
        query = Query("leads", limit=limit, offset=offset, exact_total=False)
        page = backend_over(emulator).read(query)
        exact = MemoryBackend(store).read(query)
        assert page.rows == exact.rows
        if count <= offset + limit:  # past the end too: then counted
            assert (page.total_count, page.total_exact) == (count, True)
        else:
            assert (page.total_count, page.total_exact) == (offset + limit + 1, False)
        end = offset + len(page.rows)
        assert (page.total_count > end) == (count > end)
        # A count is asked for only past the end, where the page tells nothing.
        counted = [r for r in emulator.requests if r.headers.get("Prefer")]
        assert len(counted) == (1 if count <= offset and offset else 0)

    def test_a_page_as_long_as_one_read_may_fetch(self) -> None:
        """The row past the page does not count against the bound on rows per read."""
        emulator = PostgrestEmulator(seeded_store(12))
        backend = backend_over(emulator, max_read_rows=5)
        page = backend.read(Query("leads", limit=5, exact_total=False))
        assert (len(page.rows), page.total_count, page.total_exact) == (5, 6, False)
