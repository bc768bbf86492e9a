"""The PostgREST emulator used by the Supabase tests answers, and refuses, as PostgREST does."""

from __future__ import annotations

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from persistence import MemoryStore
from persistence.backends.supabase.postgrest.encoding import encode_query_string, in_list
from tests.support.postgrest import BASE_URL, PostgrestEmulator, parse_in_list


@pytest.fixture
def client() -> httpx.Client:
    store = MemoryStore()
    store.insert(
        "leads",
        [
            {"email": "a@x.io", "score": 1},
            {"email": "b@x.io", "score": None},
            {"email": "c@x.io", "score": 3},
        ],
    )
    return httpx.Client(transport=PostgrestEmulator(store).transport(), base_url=BASE_URL)


def get(
    client: httpx.Client, params: list[tuple[str, str]], method: str = "GET", **headers: str
) -> httpx.Response:
    url = httpx.URL(f"{BASE_URL}/rest/v1/leads").copy_with(query=encode_query_string(params))
    return client.request(method, url, headers=headers)


class TestGrammarIsStrict:
    @pytest.mark.parametrize(
        "params",
        [
            [("or", "(email.eq.a@x.io,score.gt.0)")],
            [("and", "(email.eq.a@x.io)")],
            [("not.or", "(email.eq.a@x.io)")],
            [("email", "like")],
            [("email", "regex.a")],
            [("email", 'in.("a@x.io"')],
            [("email", 'in.("a@x.io"x)')],
            [("email", "in.(a@x.io)junk")],
            [("email", "is.maybe")],
            [("order", "email.sideways")],
            [("limit", "-1")],
            [("limit", "1"), ("limit", "2")],
            [("select", "email;drop")],
        ],
        ids=str,
    )
    def test_outside_grammar_is_a_parse_error(
        self, client: httpx.Client, params: list[tuple[str, str]]
    ) -> None:
        """Logic trees, unknown operators and malformed lists are PGRST100 400s."""
        response = get(client, params)
        assert response.status_code == 400
        assert response.json()["code"] == "PGRST100"

    def test_unknown_column_and_table(self, client: httpx.Client) -> None:
        """An unknown column is 42703; an unknown table is PGRST205 (404)."""
        response = get(client, [("password", "eq.x")])
        assert (response.status_code, response.json()["code"]) == (400, "42703")
        assert "leads.password" in response.json()["message"]
        missing = client.get(f"{BASE_URL}/rest/v1/users")
        assert (missing.status_code, missing.json()["code"]) == (404, "PGRST205")

    def test_bad_literal_for_the_column_type(self, client: httpx.Client) -> None:
        """A value PostgreSQL cannot cast is 22P02."""
        response = get(client, [("score", "eq.ten")])
        assert response.json()["code"] == "22P02"


class TestAnswers:
    def test_content_range_and_status(self, client: httpx.Client) -> None:
        """Partial pages are 206 with ``first-last/total``; a count-less answer ends in ``*``."""
        counted = get(client, [("order", "id.asc"), ("limit", "2")], Prefer="count=exact")
        assert counted.status_code == 206
        assert counted.headers["Content-Range"] == "0-1/3"
        plain = get(client, [("offset", "1")])
        assert plain.status_code == 200
        assert plain.headers["Content-Range"] == "1-2/*"

    def test_empty_page_and_range_error(self, client: httpx.Client) -> None:
        """At the end the range is ``*/total``; past it, 416 PGRST103."""
        at_end = get(client, [("offset", "3")], Prefer="count=exact")
        assert at_end.headers["Content-Range"] == "*/3"
        past = get(client, [("offset", "4")], Prefer="count=exact")
        assert (past.status_code, past.json()["code"]) == (416, "PGRST103")

    def test_head_has_headers_but_no_body(self, client: httpx.Client) -> None:
        """HEAD answers with the same range and no rows."""
        response = get(client, [("limit", "1")], "HEAD", Prefer="count=exact")
        assert response.headers["Content-Range"] == "0-0/3"
        assert response.content == b""

    def test_row_cap_truncates_silently(self) -> None:
        """``max_rows`` shortens answers without saying so, as ``db-max-rows`` does."""
        store = MemoryStore()
        store.insert("leads", [{"email": f"{i}@x.io"} for i in range(5)])
        client = httpx.Client(transport=PostgrestEmulator(store, max_rows=2).transport())
        response = get(client, [("limit", "4")], Prefer="count=exact")
        assert len(response.json()) == 2
        assert response.headers["Content-Range"] == "0-1/5"

    def test_not_and_nulls(self, client: httpx.Client) -> None:
        """``not.`` negates with SQL's NULL logic; ``is.null`` finds NULLs."""
        negated = get(client, [("score", "not.eq.1")]).json()
        assert [r["email"] for r in negated] == ["c@x.io"]
        nulls = get(client, [("score", "is.null")]).json()
        assert [r["email"] for r in nulls] == ["b@x.io"]

    def test_order_places_nulls_as_postgresql(self, client: httpx.Client) -> None:
        """Default placement: NULLs last ascending, first descending; explicit wins."""
        asc = [r["score"] for r in get(client, [("order", "score.asc")]).json()]
        desc = [r["score"] for r in get(client, [("order", "score.desc")]).json()]
        first = [r["score"] for r in get(client, [("order", "score.asc.nullsfirst")]).json()]
        assert asc == [1, 3, None]
        assert desc == [None, 3, 1]
        assert first == [None, 1, 3]


class TestListGrammar:
    @given(st.lists(st.text(max_size=8).filter(lambda t: "\x00" not in t), min_size=1))
    def test_quoted_lists_round_trip(self, values: list[str]) -> None:
        """Any values, quoted by the adapter, parse back to themselves."""
        assert parse_in_list(in_list(values)) == values

    def test_bare_elements_stop_at_commas(self) -> None:
        """Unquoted, a comma splits a value: why the adapter quotes every element."""
        assert parse_in_list("(a,b)") == ["a", "b"]
        assert parse_in_list('("a,b")') == ["a,b"]
