"""PostgREST error shapes, gateway pages, timeouts and broken connections → typed errors."""

from __future__ import annotations

import httpx
import pytest

from persistence import (
    BackendError,
    BackendUnavailableError,
    ColumnNotAllowedError,
    Filter,
    MemoryStore,
    Op,
    PersistenceError,
    Query,
    QueryTimeoutError,
    create_read_only_facade,
)
from tests.support.http import ScriptedServer, backend_over, rows_response
from tests.support.postgrest import BASE_URL, PostgrestEmulator, fake_key


def error(status: int, code: str, message: str, details: str | None = None) -> httpx.Response:
    return httpx.Response(
        status, json={"code": code, "message": message, "details": details, "hint": None}
    )


OK = rows_response([{"id": 1}], "0-0/1")


class TestPostgrestErrors:
    @pytest.mark.parametrize(
        ("response", "expected"),
        [
            (
                error(
                    404, "PGRST205", "Could not find the table 'public.leads' in the schema cache"
                ),
                BackendError,
            ),
            (error(404, "42P01", 'relation "public.leads" does not exist'), BackendError),
            (
                error(500, "57014", "canceling statement due to statement timeout"),
                QueryTimeoutError,
            ),
            (
                error(503, "PGRST000", "Could not connect with the database"),
                BackendUnavailableError,
            ),
            (error(504, "PGRST003", "Timed out acquiring connection"), BackendUnavailableError),
            (error(503, "08006", "connection failure"), BackendUnavailableError),
            (error(401, "42501", "permission denied for table leads"), BackendError),
            (error(401, "PGRST301", "JWSError JWSInvalidSignature"), BackendError),
            (error(400, "22P02", 'invalid input syntax for type bigint: "x"'), BackendError),
            (error(400, "PGRST100", '"failed to parse filter"'), BackendError),
        ],
        ids=lambda v: v.json()["code"] if isinstance(v, httpx.Response) else v.__name__,
    )
    def test_codes_map_to_typed_errors(
        self, response: httpx.Response, expected: type[PersistenceError]
    ) -> None:
        """Each PostgREST/PostgreSQL code becomes the matching error, code in the message."""
        server = ScriptedServer([response])
        with pytest.raises(expected) as info:
            backend_over(server, retries=0).read(Query("leads", limit=1))
        assert type(info.value) is expected
        assert response.json()["code"] in str(info.value)
        assert isinstance(info.value, BackendError)
        assert info.value.backend == "supabase"
        assert info.value.operation == "read"

    def test_unknown_column_names_the_column(self) -> None:
        """42703 becomes ColumnNotAllowedError with the table and the offending column."""
        server = ScriptedServer([error(400, "42703", "column leads.password does not exist")])
        query = Query("leads", filters=(Filter("password", Op.EQ, "x"),), limit=1)
        with pytest.raises(ColumnNotAllowedError) as info:
            backend_over(server).read(query)
        assert (info.value.table, info.value.column) == ("leads", "password")

    def test_unknown_write_column_names_the_column(self) -> None:
        """PGRST204 on a write becomes ColumnNotAllowedError naming the column."""
        message = "Could not find the 'secret' column of 'leads' in the schema cache"
        server = ScriptedServer([error(400, "PGRST204", message)])
        with pytest.raises(ColumnNotAllowedError) as info:
            backend_over(server, read_only=False).insert("leads", [{"secret": 1}])
        assert info.value.column == "secret"

    def test_range_error_outside_a_read_is_an_error(self) -> None:
        """PGRST103 is only an empty page for a read; elsewhere it is a BackendError."""
        server = ScriptedServer([error(416, "PGRST103", "Requested range not satisfiable")])
        with pytest.raises(BackendError):
            backend_over(server).count("leads", [])

    @pytest.mark.parametrize(
        ("status", "body", "expected"),
        [
            (502, b"<html><body>502 Bad Gateway</body></html>", BackendUnavailableError),
            (520, b"<html>cloudflare</html>", BackendUnavailableError),
            (500, b"Internal Server Error", BackendUnavailableError),
            (404, b"Not Found", BackendError),
            (400, b"", BackendError),
            (400, b'["not", "an", "error", "object"]', BackendError),
        ],
    )
    def test_non_json_bodies_are_mapped(
        self, status: int, body: bytes, expected: type[PersistenceError]
    ) -> None:
        """Gateway pages and plain text become typed errors quoting a short snippet."""
        server = ScriptedServer([httpx.Response(status, content=body)])
        with pytest.raises(expected) as info:
            backend_over(server, retries=0).read(Query("leads", limit=1))
        assert type(info.value) is expected
        assert f"HTTP {status}" in str(info.value)

    def test_long_gateway_pages_are_truncated_in_messages(self) -> None:
        """An error message quotes at most a short, single-line snippet of an HTML body."""
        page = b"<html>\n" + b"x" * 5000 + b"\n</html>"
        server = ScriptedServer([httpx.Response(502, content=page)])
        with pytest.raises(BackendUnavailableError) as info:
            backend_over(server, retries=0).read(Query("leads", limit=1))
        assert len(str(info.value)) < 400
        assert "\n" not in str(info.value)

    @pytest.mark.parametrize(
        "body", [b"not json", b'{"rows": []}', b"[1, 2]"], ids=["text", "object", "scalars"]
    )
    def test_successful_response_without_rows_is_an_error(self, body: bytes) -> None:
        """A 200 whose body is not a JSON list of objects is a BackendError."""
        server = ScriptedServer([httpx.Response(200, content=body)])
        with pytest.raises(BackendError):
            backend_over(server).read(Query("leads", limit=1))


class TestTransportFailures:
    @pytest.mark.parametrize(
        ("exc", "expected"),
        [
            (httpx.ReadTimeout("read timed out"), QueryTimeoutError),
            (httpx.PoolTimeout("pool timed out"), QueryTimeoutError),
            (httpx.ConnectTimeout("connect timed out"), BackendUnavailableError),
            (httpx.ConnectError("connection refused"), BackendUnavailableError),
            (httpx.ReadError("connection reset by peer"), BackendUnavailableError),
            (httpx.RemoteProtocolError("server disconnected"), BackendUnavailableError),
        ],
        ids=lambda v: type(v).__name__ if isinstance(v, Exception) else v.__name__,
    )
    def test_httpx_exceptions_are_mapped_with_cause(
        self, exc: Exception, expected: type[PersistenceError]
    ) -> None:
        """httpx failures become typed errors with the httpx exception on ``__cause__``."""
        server = ScriptedServer([exc])
        with pytest.raises(expected) as info:
            backend_over(server, retries=0).read(Query("leads", limit=1))
        assert info.value.__cause__ is exc


class TestRetries:
    @pytest.mark.parametrize(
        "failure",
        [
            httpx.Response(503, content=b"unavailable"),
            httpx.Response(520, content=b"cloudflare"),
            httpx.ReadError("connection reset by peer"),
            httpx.ConnectError("connection refused"),
        ],
        ids=["503", "520", "reset", "refused"],
    )
    def test_reads_retry_transient_failures(self, failure: httpx.Response | Exception) -> None:
        """A read retries 503/520 and broken connections, backing off between attempts."""
        delays: list[float] = []
        server = ScriptedServer([failure, failure, OK])
        page = backend_over(server, retries=2, sleep=delays.append).read(Query("leads", limit=1))
        assert page.rows == [{"id": 1}]
        assert len(server.requests) == 3
        assert delays == [0.2, 0.4]

    def test_retries_are_bounded(self) -> None:
        """After ``retries`` extra attempts the failure is raised."""
        delays: list[float] = []
        server = ScriptedServer([httpx.Response(503, content=b"down")])
        with pytest.raises(BackendUnavailableError):
            backend_over(server, retries=3, sleep=delays.append).read(Query("leads", limit=1))
        assert len(server.requests) == 4
        assert delays == [0.2, 0.4, 0.8]

    def test_timeouts_are_not_retried(self) -> None:
        """A timed-out read is not repeated: the statement may still be running."""
        server = ScriptedServer([httpx.ReadTimeout("slow"), OK])
        with pytest.raises(QueryTimeoutError):
            backend_over(server, retries=2).read(Query("leads", limit=1))
        assert len(server.requests) == 1

    def test_other_errors_are_not_retried(self) -> None:
        """A 400 or 500 answer is final."""
        server = ScriptedServer([error(500, "XX000", "internal error"), OK])
        with pytest.raises(BackendError):
            backend_over(server, retries=2).read(Query("leads", limit=1))
        assert len(server.requests) == 1

    def test_writes_are_never_retried(self) -> None:
        """An insert that met a 503 or a reset connection is not sent twice."""
        for failure in (httpx.Response(503, content=b"down"), httpx.ReadError("reset")):
            server = ScriptedServer([failure, OK])
            with pytest.raises(BackendUnavailableError):
                backend_over(server, read_only=False).insert("leads", [{"email": "a@x.io"}])
            assert len(server.requests) == 1


class TestThroughTheFacade:
    def test_unknown_column_through_facade_and_emulator(self) -> None:
        """Over the emulator, the facade reports an unknown column as ColumnNotAllowedError."""
        http = httpx.Client(transport=PostgrestEmulator(MemoryStore()).transport())
        facade = create_read_only_facade(
            kind="supabase", url=BASE_URL, key=fake_key(), http_client=http
        )
        with pytest.raises(ColumnNotAllowedError) as info:
            facade.count("leads", [Filter("password", Op.EQ, "x")])
        assert info.value.column == "password"
        http.close()
