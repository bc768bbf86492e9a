"""``facade.search`` over the Supabase API (the PostgREST emulator): the owner's ranking
function is called with GET and nothing after it; without it, full-text candidates through
``wfts`` are ranked here, as the memory backend ranks, and the k-rows rule holds either way."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from persistence import (
    Filter,
    MemoryStore,
    Op,
    PersistenceError,
    ReadOnlyPersistenceFacade,
    create_persistence_agent,
    create_read_only_facade,
)
from persistence.backends.supabase.postgrest.search import CANDIDATE_ROWS, wfts_condition
from persistence.search import SearchResult
from tests.conftest import corpus_lines
from tests.support.postgrest import (
    BASE_URL,
    PostgrestEmulator,
    RpcFunction,
    decode_query,
    fake_key,
)
from tests.support.postgrest_search import ARGUMENTS, ranking_function
from tests.support.search import HashEmbeddings, inquiries_store

TEXTS = ["card declined", "cannot sign in", "refund for my order", "invoice overdue payment"]
TEXT_COLUMNS = ("subject", "body")


class Recorder:
    """The emulator, recording every answer's status (a 400 means grammar reached it)."""

    def __init__(self, emulator: PostgrestEmulator) -> None:
        self.emulator = emulator
        self.statuses: list[int] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        response = self.emulator(request)
        self.statuses.append(response.status_code)
        return response

    @property
    def requests(self) -> list[httpx.Request]:
        return self.emulator.requests


@pytest.fixture(scope="module")
def store() -> MemoryStore:  # 600 rows: unfiltered beyond the fallback's bound, filtered within
    return inquiries_store(rows=600)


def supabase(
    store: MemoryStore,
    *,
    function: bool | RpcFunction,
    embeddings: Any = None,
    **options: Any,
) -> tuple[ReadOnlyPersistenceFacade, Recorder]:
    functions: dict[str, RpcFunction] = {}
    if isinstance(function, RpcFunction):
        functions["search_inquiries"] = function
    elif function:
        functions["search_inquiries"] = ranking_function(
            store, "inquiries", TEXT_COLUMNS, HashEmbeddings()
        )
    recorder = Recorder(PostgrestEmulator(store, functions=functions))
    transport = httpx.MockTransport(recorder)
    facade = create_read_only_facade(
        kind="supabase",
        url=BASE_URL,
        key=fake_key("anon"),
        http_client=httpx.Client(transport=transport),
        async_http_client=httpx.AsyncClient(transport=transport),
        embeddings=embeddings,
        **options,
    )
    return facade, recorder


@pytest.fixture(scope="module")
def memory(store: MemoryStore) -> Iterator[ReadOnlyPersistenceFacade]:
    with create_read_only_facade(kind="memory", store=store, embeddings=HashEmbeddings()) as f:
        yield f


def ranked(result: SearchResult) -> list[tuple[Any, float, dict[str, int | None]]]:
    return [(hit.row["id"], hit.score, dict(hit.ranks)) for hit in result.hits]


def rpc_requests(recorder: Recorder) -> list[httpx.Request]:
    return [r for r in recorder.requests if "/rpc/" in r.url.path]


class TestRankingFunction:
    def test_called_with_get_and_only_its_parameters(self, store: MemoryStore) -> None:
        facade, recorder = supabase(store, function=True, embeddings=HashEmbeddings())
        result = facade.search(
            "inquiries", "card declined", filters=[Filter("client_id", Op.EQ, 1)], k=7
        )
        calls = rpc_requests(recorder)
        assert [r.method for r in calls] == ["GET"]
        params = dict(decode_query(calls[0].url.query))
        assert set(params) <= ARGUMENTS  # no PostgREST filter on the function's result
        assert params["filters"] == '{"client_id":1}'
        assert "query_embedding" in params
        assert len(result.hits) == 7
        assert all(hit.row["client_id"] == 1 for hit in result.hits)
        assert result.legs == ("keyword", "trigram", "semantic")
        assert result.degraded is None

    def test_ranks_as_the_function_answers(
        self, store: MemoryStore, memory: ReadOnlyPersistenceFacade
    ) -> None:
        facade, _ = supabase(store, function=True, embeddings=HashEmbeddings())
        for text in TEXTS:
            for offset in (0, 10):
                flt = [Filter("client_id", Op.EQ, 2)]
                got = facade.search("inquiries", text, filters=flt, k=10, offset=offset)
                want = memory.search("inquiries", text, filters=flt, k=10, offset=offset)
                assert ranked(got) == ranked(want)
                assert got.total_count == want.total_count == 200

    def test_a_function_not_naming_its_columns_is_not_called(self, store: MemoryStore) -> None:
        """Without ``{"columns": [...]}`` in its comment, the function could rank by a column
        the policy hides: the fallback runs, and says why."""
        silent = ranking_function(store, "inquiries", TEXT_COLUMNS, HashEmbeddings())
        silent.comment = "Ranked search"
        facade, recorder = supabase(store, function=silent)
        result = facade.search("inquiries", "card", filters=[Filter("client_id", Op.EQ, 1)])
        assert rpc_requests(recorder) == []
        assert result.degraded is not None
        assert "does not name the columns it ranks by" in result.degraded

    def test_a_function_ranking_by_a_hidden_column_is_not_called(self, store: MemoryStore) -> None:
        facade, recorder = supabase(
            store, function=True, columns={"inquiries": ("id", "subject", "client_id")}
        )
        result = facade.search("inquiries", "card", filters=[Filter("client_id", Op.EQ, 1)])
        assert rpc_requests(recorder) == []
        assert result.degraded is not None
        assert "ranks by a column this search may not read" in result.degraded
        assert all(set(row) == {"id", "subject", "client_id"} for row in result.rows)
        searched = [dict(decode_query(r.url.query)) for r in recorder.requests]
        assert all("body" not in p.get("or", "") for p in searched)

    def test_an_empty_page_still_counts_the_matching_rows(self, store: MemoryStore) -> None:
        facade, _ = supabase(store, function=True)
        none = facade.search("inquiries", "card", filters=[Filter("client_id", Op.EQ, 9)])
        assert (none.hits, none.total_count) == ((), 0)
        past = facade.search("inquiries", "card", filters=[Filter("lead_id", Op.EQ, 7)], offset=5)
        assert (past.hits, past.total_count) == ((), 1)

    def test_the_function_is_looked_up_once(self, store: MemoryStore) -> None:
        facade, recorder = supabase(store, function=True)
        for text in TEXTS:
            facade.search("inquiries", text, k=3)
        described = [r for r in recorder.requests if r.url.path == "/rest/v1/"]
        assert len(described) == 1
        assert len(rpc_requests(recorder)) == len(TEXTS)

    def test_keyword_mode_sends_no_embedding(self, store: MemoryStore) -> None:
        facade, recorder = supabase(store, function=True, embeddings=HashEmbeddings())
        result = facade.search("inquiries", "card declined", mode="keyword")
        params = dict(decode_query(rpc_requests(recorder)[0].url.query))
        assert "query_embedding" not in params and params["match_mode"] == "keyword"
        assert result.legs == ("keyword", "trigram")

    def test_a_range_filter_takes_the_fallback_and_says_so(self, store: MemoryStore) -> None:
        facade, recorder = supabase(store, function=True)
        result = facade.search("inquiries", "card", filters=[Filter("lead_id", Op.LT, 50)], k=5)
        assert rpc_requests(recorder) == []
        assert result.degraded is not None
        assert "takes equality filters only" in result.degraded
        assert all(hit.row["lead_id"] < 50 for hit in result.hits)

    def test_a_function_declaring_its_filters_is_called_for_them(self, store: MemoryStore) -> None:
        """A comment with ``"filters": [...]`` (the generated function): a filter on one of
        them is sent as before, and the function's answer is used."""
        declared = ranking_function(
            store, "inquiries", TEXT_COLUMNS, HashEmbeddings(), filterable=("client_id",)
        )
        facade, recorder = supabase(store, function=declared, embeddings=HashEmbeddings())
        result = facade.search("inquiries", "card", filters=[Filter("client_id", Op.EQ, 1)], k=5)
        assert len(rpc_requests(recorder)) == 1
        assert result.degraded is None and len(result.hits) == 5

    def test_a_filter_the_function_does_not_take_takes_the_fallback(
        self, store: MemoryStore
    ) -> None:
        """An equality on a column the comment does not list is not sent (the function would
        refuse it): the fallback ranks, filters hold, and ``degraded`` names the column."""
        declared = ranking_function(
            store, "inquiries", TEXT_COLUMNS, HashEmbeddings(), filterable=("client_id",)
        )
        facade, recorder = supabase(store, function=declared)
        flt = [Filter("client_id", Op.EQ, 1), Filter("lead_id", Op.EQ, 7)]
        result = facade.search("inquiries", "card", filters=flt, k=5)
        assert rpc_requests(recorder) == []
        assert result.degraded is not None
        assert "search_inquiries does not filter by lead_id" in result.degraded
        assert all(hit.row["lead_id"] == 7 for hit in result.hits)

    def test_awaited_search_equals_blocking(self, store: MemoryStore) -> None:
        facade, _ = supabase(store, function=True, embeddings=HashEmbeddings())
        flt = [Filter("client_id", Op.EQ, 0)]
        blocking = facade.search("inquiries", "refund order", filters=flt, k=12, offset=3)
        awaited = asyncio.run(
            facade.asearch("inquiries", "refund order", filters=flt, k=12, offset=3)
        )
        assert ranked(awaited) == ranked(blocking)
        assert awaited.degraded == blocking.degraded


class TestFallback:
    def test_full_text_goes_through_wfts_with_the_filters(self, store: MemoryStore) -> None:
        facade, recorder = supabase(store, function=False)
        result = facade.search(
            "inquiries", "card declined", filters=[Filter("client_id", Op.EQ, 1)], k=5
        )
        searched = [dict(decode_query(r.url.query)) for r in recorder.requests]
        with_or = [p for p in searched if "or" in p]
        assert len(with_or) == 1
        assert with_or[0]["or"] == (
            '(subject.wfts."card",subject.wfts."declined",body.wfts."card",body.wfts."declined")'
        )
        assert with_or[0]["client_id"] == "eq.1"
        assert result.degraded is not None
        assert result.degraded.startswith(
            "keyword-only: the ranking function search_inquiries is not installed"
        )
        assert result.legs == ("keyword", "trigram")
        assert all(hit.row["client_id"] == 1 for hit in result.hits)

    def test_ranks_as_memory_when_every_filtered_row_is_fetched(
        self, store: MemoryStore, memory: ReadOnlyPersistenceFacade
    ) -> None:
        facade, _ = supabase(store, function=False, embeddings=HashEmbeddings())
        for text in TEXTS:
            flt = [Filter("client_id", Op.EQ, 0)]
            got = facade.search("inquiries", text, filters=flt, k=10, offset=5)
            want = memory.search("inquiries", text, filters=flt, k=10, offset=5)
            assert ranked(got) == ranked(want)
            assert got.degraded is not None and "every filtered row" in got.degraded
            assert got.degraded.startswith("ranked in process")

    def test_bounded_when_more_rows_match(self, store: MemoryStore) -> None:
        facade, recorder = supabase(store, function=False)
        result = facade.search("inquiries", "card declined", k=10)
        assert result.degraded is not None
        assert f"at most {CANDIDATE_ROWS} full-text candidates" in result.degraded
        assert result.total_count == 600
        limits = [
            int(dict(decode_query(r.url.query)).get("limit", 0))
            for r in recorder.requests
            if r.url.path.endswith("/inquiries")
        ]
        assert limits and max(limits) <= CANDIDATE_ROWS

    def test_a_literal_star_filter_is_checked_here(self) -> None:
        store = MemoryStore()
        rows = [
            {"id": i, "lead_id": 0, "client_id": 0, "subject": s, "body": "card declined"}
            for i, s in enumerate(["a*b card", "axb card", "a*b refund", "other"], start=1)
        ]
        create_persistence_agent(kind="memory", store=store).batch("inquiries", rows)
        facade, _ = supabase(store, function=True)
        result = facade.search(
            "inquiries", "card", filters=[Filter("subject", Op.ICONTAINS, "a*b")], k=10
        )
        assert sorted(hit.row["id"] for hit in result.hits) == [1, 3]
        assert result.total_count == 2

    def test_or_is_never_sent_as_a_word(self) -> None:
        assert wfts_condition(("body",), ("or",)) is None
        assert wfts_condition(("body",), ("cats", "or", "dogs")) == (
            '(body.wfts."cats",body.wfts."dogs")'
        )
        assert wfts_condition(("body",), ("admin'or", "o'brien")) == (
            '(body.wfts."admin",body.wfts."o",body.wfts."brien")'
        )

    def test_awaited_search_equals_blocking(self, store: MemoryStore) -> None:
        facade, _ = supabase(store, function=False, embeddings=HashEmbeddings())
        flt = [Filter("client_id", Op.EQ, 0)]
        blocking = facade.search("inquiries", "cannot sign in", filters=flt, k=9, offset=2)
        awaited = asyncio.run(
            facade.asearch("inquiries", "cannot sign in", filters=flt, k=9, offset=2)
        )
        assert ranked(awaited) == ranked(blocking)
        assert awaited.degraded == blocking.degraded


class TestAwaitedIsNative:
    @pytest.mark.parametrize("function", [True, False])
    def test_awaited_search_uses_only_the_awaitable_client(
        self, store: MemoryStore, function: bool
    ) -> None:
        """The blocking client refuses every request: the awaited search never needs it."""
        functions = (
            {
                "search_inquiries": ranking_function(
                    store, "inquiries", TEXT_COLUMNS, HashEmbeddings()
                )
            }
            if function
            else {}
        )
        emulator = PostgrestEmulator(store, functions=functions)

        def refuse(request: httpx.Request) -> httpx.Response:
            raise AssertionError(f"blocking request {request.url}")

        facade = create_read_only_facade(
            kind="supabase",
            url=BASE_URL,
            key=fake_key("anon"),
            http_client=httpx.Client(transport=httpx.MockTransport(refuse)),
            async_http_client=httpx.AsyncClient(transport=httpx.MockTransport(emulator)),
            embeddings=HashEmbeddings(),
        )
        result = asyncio.run(
            facade.asearch("inquiries", "card", filters=[Filter("client_id", Op.EQ, 1)], k=4)
        )
        assert len(result.hits) == 4
        assert any("/rpc/" in r.url.path for r in emulator.requests) is function


class TestExactlyKRows:
    @settings(max_examples=25, deadline=None)
    @given(
        function=st.booleans(),
        lead_below=st.sampled_from([1, 3, 30, 300]),
        k=st.sampled_from([1, 10, 50]),
        page=st.integers(min_value=0, max_value=2),
        mode=st.sampled_from(["keyword", "hybrid"]),
    )
    def test_k_rows_when_enough_match(
        self, store: MemoryStore, function: bool, lead_below: int, k: int, page: int, mode: str
    ) -> None:
        facade, _ = supabase(store, function=function, embeddings=HashEmbeddings())
        filters = (
            [Filter("lead_id", Op.EQ, lead_below)]
            if function
            else [Filter("lead_id", Op.LT, lead_below)]
        )
        matching = [r for r in store.rows("inquiries") if all(_holds(f, r) for f in filters)]
        result = facade.search(
            "inquiries", "login password", filters=filters, k=k, offset=page * k, mode=mode
        )
        expected = max(0, min(k, len(matching) - page * k))
        assert len(result.hits) == expected
        ids = [hit.row["id"] for hit in result.hits]
        assert len(set(ids)) == len(ids)
        assert set(ids) <= {r["id"] for r in matching}


def _holds(flt: Filter, row: dict[str, Any]) -> bool:
    value = row[flt.column]
    return value == flt.value if flt.op is Op.EQ else value < flt.value


class TestPayloads:
    def test_corpus_through_text_and_filters_on_both_paths(self, store: MemoryStore) -> None:
        """Every payload line as the search text and as a filter value: a result or a typed
        error, and the emulator (which refuses websearch syntax and stray grammar) never
        answers 400."""
        lines = corpus_lines()
        for function in (True, False):
            facade, recorder = supabase(store, function=function)
            untyped = []
            for line in lines:
                for filters in ([], [Filter("subject", Op.EQ, line)]):
                    try:
                        facade.search("inquiries", line, filters=filters, k=3)
                    except PersistenceError:
                        pass
                    except Exception as exc:  # pragma: no cover - the failure it reports
                        untyped.append((line, repr(exc)))
            assert untyped == []
            assert 400 not in recorder.statuses
