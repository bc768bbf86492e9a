"""The exact HTTP requests the Supabase backend sends: filters, order, pages, counts, headers."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid

import httpx
import pytest

from persistence import Filter, Op, Order, Query
from persistence.backends.supabase.postgrest.encoding import (
    encode_query_string,
    filter_params,
    icontains_pattern,
    ilike_pattern,
    in_list,
    select_param,
)
from tests.support.http import ScriptedServer, backend_over, rows_response
from tests.support.postgrest import decode_query, fake_key, parse_in_list


def one_page() -> ScriptedServer:
    """One row at whatever offset is asked, with the Content-Range PostgREST would send."""

    def reply(request: httpx.Request) -> httpx.Response:
        offset = int(dict(decode_query(request.url.query)).get("offset", "0"))
        return rows_response([{"id": 1}], f"{offset}-{offset}/{offset + 1}")

    return ScriptedServer([reply])


class TestFilterEncoding:
    @pytest.mark.parametrize(
        ("flt", "expected"),
        [
            (Filter("email", Op.EQ, "a@x.io"), ("email", "eq.a@x.io")),
            (Filter("score", Op.NEQ, 20), ("score", "neq.20")),
            (Filter("score", Op.GT, 1.5), ("score", "gt.1.5")),
            (Filter("score", Op.GTE, decimal.Decimal("2.50")), ("score", "gte.2.50")),
            (Filter("created_at", Op.LT, dt.date(2024, 1, 2)), ("created_at", "lt.2024-01-02")),
            (
                Filter("created_at", Op.LTE, dt.datetime(2024, 1, 2, 3, 4, tzinfo=dt.UTC)),
                ("created_at", "lte.2024-01-02T03:04:00+00:00"),
            ),
            (Filter("status", Op.EQ, True), ("status", "eq.true")),
            (
                Filter("id", Op.EQ, uuid.UUID(int=1)),
                ("id", "eq.00000000-0000-0000-0000-000000000001"),
            ),
            (Filter("score", Op.IN, [10, 30]), ("score", 'in.("10","30")')),
            (Filter("email", Op.IN, ["a,b", 'q"t']), ("email", 'in.("a,b","q\\"t")')),
            (Filter("email", Op.IN, ["only"]), ("email", "eq.only")),
            (Filter("status", Op.IS_NULL, True), ("status", "is.null")),
            (Filter("status", Op.IS_NULL, False), ("status", "not.is.null")),
            (Filter("company_name", Op.ICONTAINS, "acme"), ("company_name", "ilike.*acme*")),
            (
                Filter("company_name", Op.ICONTAINS, "100%_\\"),
                ("company_name", "ilike.*100\\%\\_\\\\*"),
            ),
            (Filter("company_name", Op.ICONTAINS, "a*b"), ("company_name", "ilike.*a_b*")),
            (Filter("company_name", Op.ILIKE, "acme%"), ("company_name", "ilike.acme%")),
            (Filter("company_name", Op.ILIKE, "a\\*b*"), ("company_name", "ilike.a_b_")),
            (Filter("company_name", Op.ILIKE, "100\\%%"), ("company_name", "ilike.100\\%%")),
        ],
        ids=lambda v: repr(v) if isinstance(v, tuple) else None,
    )
    def test_every_operator_has_its_exact_parameter(
        self, flt: Filter, expected: tuple[str, str]
    ) -> None:
        """Each Op becomes one ``column=operator.value`` parameter, exactly."""
        assert filter_params(flt) == expected

    def test_scalar_values_are_never_quoted(self) -> None:
        """Outside ``in`` PostgREST takes the value verbatim, so quotes would become data."""
        assert filter_params(Filter("email", Op.EQ, 'a,b.c:(d)"e')) == (
            "email",
            'eq.a,b.c:(d)"e',
        )

    def test_in_list_round_trips_through_postgrest_list_grammar(self) -> None:
        """Quoted elements with ``\\`` and ``"`` escaped come back as the same values."""
        values = ['a"b', "c\\d", "e,f", "(g)", "", " h ", "i.j:k"]
        assert parse_in_list(in_list(values)) == values

    def test_icontains_pattern_escapes_like_metacharacters(self) -> None:
        """``%`` ``_`` ``\\`` are escaped; ``*`` becomes the one-character wildcard."""
        assert icontains_pattern("%_\\*") == "*\\%\\_\\\\_*"

    def test_postgrest_pattern_builds_on_the_same_escaper(self) -> None:
        """The PostgREST icontains pattern is the shared escape with ``*`` narrowed to ``_``."""
        assert icontains_pattern("a%_\\*") == "*" + "a\\%\\_\\\\_" + "*"

    def test_ilike_pattern_keeps_wildcards_and_narrows_stars(self) -> None:
        """A caller's ``%``/``_`` stay wildcards; bare or escaped ``*`` go out as ``_``."""
        assert ilike_pattern("a%b_c\\%d*e\\*") == "a%b_c\\%d_e_"

    def test_query_string_encodes_every_reserved_byte(self) -> None:
        """Spaces, ``+``, ``&``, ``=``, ``%`` and quotes are percent-encoded; nothing is bare."""
        raw = encode_query_string([("email", 'eq.a b+c&d=e%f"')])
        assert raw == b"email=eq.a%20b%2Bc%26d%3De%25f%22"
        assert decode_query(raw) == [("email", 'eq.a b+c&d=e%f"')]

    def test_reserved_parameter_names_are_refused(self) -> None:
        """A column named like a PostgREST parameter cannot become a filter."""
        with pytest.raises(ValueError):
            filter_params(Filter("or", Op.EQ, "x"))


class TestSelectParam:
    def test_all_columns(self) -> None:
        """No projection selects ``*``, whatever extra columns a client check needs."""
        assert select_param(None) == "*"
        assert select_param(None, ["name"]) == "*"

    def test_projection_plus_extra_columns_each_once(self) -> None:
        """The projected columns come first, then the extra ones, each named once."""
        assert select_param(("id", "email")) == "id,email"
        assert select_param(("id", "name"), ["name", "phone"]) == "id,name,phone"


class TestReadRequests:
    def test_plain_read(self) -> None:
        """A read asks for every column, in id order, with an exact count, on HTTP GET."""
        server = one_page()
        page = backend_over(server).read(Query("leads", limit=10))
        request = server.requests[0]
        assert request.method == "GET"
        assert request.url.path == "/rest/v1/leads"
        assert server.params() == [("select", "*"), ("order", "id.asc"), ("limit", "10")]
        assert request.headers["Prefer"] == "count=exact"
        assert page.rows == [{"id": 1}]
        assert page.total_count == 1

    def test_headers_carry_the_key_and_schema(self) -> None:
        """apikey, bearer Authorization, profile and JSON Accept headers go with every request."""
        server = one_page()
        backend_over(server, schema="sales").read(Query("leads", limit=1))
        headers = server.requests[0].headers
        assert headers["apikey"] == fake_key("anon")
        assert headers["Authorization"] == f"Bearer {fake_key('anon')}"
        assert headers["Accept-Profile"] == "sales"
        assert headers["Accept"] == "application/json"

    def test_filters_projection_order_and_offset(self) -> None:
        """Filters become separate ANDed parameters; order adds NULL placement and ``id``."""
        server = one_page()
        query = Query(
            "leads",
            filters=(
                Filter("company_name", Op.ICONTAINS, "acme"),
                Filter("score", Op.GT, 10),
            ),
            columns=("email", "score"),
            order=(Order("score", descending=True), Order("email")),
            limit=5,
            offset=20,
        )
        backend_over(server).read(query)
        assert server.params() == [
            ("select", "email,score"),
            ("company_name", "ilike.*acme*"),
            ("score", "gt.10"),
            ("order", "score.desc.nullsfirst,email.asc.nullslast,id.asc"),
            ("offset", "20"),
            ("limit", "5"),
        ]

    def test_order_on_id_adds_no_second_tie_breaker(self) -> None:
        """When ``id`` is already ordered, it is not appended again."""
        server = one_page()
        backend_over(server).read(Query("leads", order=(Order("id", descending=True),), limit=1))
        assert ("order", "id.desc.nullsfirst") in server.params()

    @pytest.mark.parametrize("mode", ["exact", "planned", "estimated"])
    def test_count_mode_is_sent_as_prefer(self, mode: str) -> None:
        """The configured count mode goes out as ``Prefer: count=<mode>``."""
        server = one_page()
        backend = backend_over(server, count=mode)
        backend.read(Query("leads", limit=1))
        assert server.requests[0].headers["Prefer"] == f"count={mode}"
        assert backend.count_mode == mode

    def test_count_asks_for_no_rows(self) -> None:
        """count() sends the filters, ``limit=0`` and a count preference, and reads the total."""
        server = ScriptedServer([rows_response([], "*/42")])
        total = backend_over(server).count("leads", [Filter("status", Op.EQ, "new")])
        assert total == 42
        assert server.params() == [("status", "eq.new"), ("limit", "0")]
        assert server.requests[0].headers["Prefer"] == "count=exact"

    def test_limit_zero_still_counts(self) -> None:
        """A zero-row page is one request that reports the total."""
        server = ScriptedServer([rows_response([], "*/7")])
        page = backend_over(server).read(Query("leads", limit=0))
        assert page.rows == []
        assert page.total_count == 7
        assert len(server.requests) == 1

    def test_no_logic_tree_parameter_is_ever_sent(self) -> None:
        """Even many filters never produce an ``or``/``and`` parameter."""
        server = one_page()
        filters = tuple(Filter("email", op, "x") for op in (Op.EQ, Op.NEQ, Op.ICONTAINS))
        backend_over(server).read(Query("leads", filters=filters, limit=1))
        keys = [key for key, _ in server.params()]
        assert not {"or", "and", "not.or", "not.and"} & set(keys)


class TestColumns:
    def test_columns_come_from_one_row_and_are_cached(self) -> None:
        """The first readable row's keys are the columns; a second call sends nothing."""
        server = ScriptedServer([rows_response([{"id": 1, "email": "a@x.io"}], "0-0/*")])
        backend = backend_over(server)
        assert backend.columns("leads") == frozenset({"id", "email"})
        assert backend.columns("leads") == frozenset({"id", "email"})
        assert len(server.requests) == 1
        assert server.params(0) == [("select", "*"), ("limit", "1")]

    @pytest.mark.parametrize(
        "reply",
        [
            rows_response([], "*/*"),
            httpx.Response(401, json={"code": "42501", "message": "permission denied"}),
            httpx.ReadTimeout("slow"),
        ],
        ids=["empty", "refused", "timeout"],
    )
    def test_unknown_columns_are_none_and_not_cached(
        self, reply: httpx.Response | Exception
    ) -> None:
        """Without a readable row the backend cannot tell, and asks again next time."""
        server = ScriptedServer([reply])
        backend = backend_over(server, retries=0)
        assert backend.columns("leads") is None
        assert backend.columns("leads") is None
        assert len(server.requests) == 2


class TestClientConstruction:
    def test_default_client_is_http1_with_explicit_timeout(self) -> None:
        """Without ``http_client=`` the backend builds HTTP/1.1 with the given timeout."""
        from persistence.backends.supabase.postgrest.client import default_http_client

        client = default_http_client(3.0)
        try:
            assert client.timeout.read == 3.0
            assert client.timeout.connect == 3.0
            transport = client._transport
            assert isinstance(transport, httpx.HTTPTransport)
            assert transport._pool._http2 is False
        finally:
            client.close()

    def test_callers_client_is_used_and_left_open(self) -> None:
        """A given ``http_client`` carries the requests and is not closed by ``close()``."""
        server = one_page()
        client = httpx.Client(transport=httpx.MockTransport(server))
        from persistence.backends.supabase import SupabaseBackend
        from tests.support.postgrest import BASE_URL

        backend = SupabaseBackend(url=BASE_URL, key=fake_key(), http_client=client)
        backend.read(Query("leads", limit=1))
        backend.close()
        assert not client.is_closed
        assert len(server.requests) == 1
        client.close()
