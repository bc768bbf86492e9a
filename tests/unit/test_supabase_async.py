"""The Supabase backend's awaitable reads: over ``httpx.AsyncClient``, the very requests of the
blocking reads, the same retries (the pause awaited), on the loop's own thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from persistence import BackendUnavailableError, ConfigurationError, Filter, Op, Order, Query
from persistence.aggregate import Metric
from persistence.backends.supabase import SupabaseBackend
from tests.support.http import ScriptedServer, rows_response
from tests.support.postgrest import BASE_URL, decode_query, fake_key


def _backend(handler: Callable[[httpx.Request], httpx.Response], **options: Any) -> SupabaseBackend:
    transport = httpx.MockTransport(handler)
    return SupabaseBackend(
        url=BASE_URL,
        key=fake_key("anon"),
        http_client=httpx.Client(transport=transport),
        async_http_client=httpx.AsyncClient(transport=transport),
        **options,
    )


def _page(request: httpx.Request) -> httpx.Response:
    offset = int(dict(decode_query(request.url.query)).get("offset", "0"))
    return rows_response([{"id": offset + 1, "email": "a@x.io"}], f"{offset}-{offset}/9")


def _wire(server: ScriptedServer) -> list[tuple[str, str, str | None]]:
    return [(r.method, str(r.url), r.headers.get("prefer")) for r in server.requests]


QUERY = Query(
    "leads",
    filters=(Filter("company_name", Op.ICONTAINS, "acme"), Filter("score", Op.GTE, 5)),
    columns=("id", "email"),
    order=(Order("email"),),
    limit=3,
    offset=2,
)


class TestSameRequests:
    @pytest.mark.parametrize(
        ("method", "args"),
        [
            ("read", (QUERY,)),
            ("count", ("leads", QUERY.filters)),
            ("read", (Query("leads", filters=(Filter("email", Op.ICONTAINS, "a*b"),)),)),
        ],
    )
    def test_awaited_reads_send_what_blocking_reads_send(
        self, method: str, args: tuple[Any, ...]
    ) -> None:
        """aread/acount send the same requests, in the same order, and answer the same."""
        blocking_server, awaited_server = ScriptedServer([_page]), ScriptedServer([_page])
        blocking = getattr(_backend(blocking_server), method)(*args)
        awaited_backend = _backend(awaited_server)
        awaited = asyncio.run(getattr(awaited_backend, "a" + method)(*args))
        assert awaited == blocking
        assert _wire(awaited_server) == _wire(blocking_server)
        assert len(awaited_server.requests) >= 1

    def test_awaited_aggregate_sends_what_aggregate_sends(self) -> None:
        """aaggregate sends the aggregate request (and the total) aggregate sends."""

        def groups(request: httpx.Request) -> httpx.Response:
            return httpx.Response(200, json=[{"g0": "new", "m0": 3}])

        shape = (("status",), (Metric("count"),), 10)
        query = Query("leads", filters=(Filter("score", Op.GTE, 5),))
        blocking_server, awaited_server = ScriptedServer([groups]), ScriptedServer([groups])
        blocking = _backend(blocking_server).aggregate(query, *shape)
        awaited = asyncio.run(_backend(awaited_server).aaggregate(query, *shape))
        assert awaited == blocking
        assert _wire(awaited_server) == _wire(blocking_server)


class TestAwaitedRetries:
    def test_a_503_is_retried_with_an_awaited_pause(self) -> None:
        """A 503 then a page: aread retries as read does, pausing with asyncio, never with the
        blocking sleep."""
        slept: list[float] = []
        server = ScriptedServer([httpx.Response(503), _page])
        backend = _backend(server, sleep=slept.append)
        page = asyncio.run(backend.aread(Query("leads", limit=1)))
        assert page.rows == [{"id": 1, "email": "a@x.io"}]
        assert len(server.requests) == 2
        assert slept == []

    def test_a_network_failure_is_translated_alike(self) -> None:
        """A refused connection is the same BackendUnavailableError for aread and read."""
        server = ScriptedServer([httpx.ConnectError("refused")])
        backend = _backend(server, retries=0)
        with pytest.raises(BackendUnavailableError) as blocking:
            backend.read(Query("leads", limit=1))
        with pytest.raises(BackendUnavailableError) as awaited:
            asyncio.run(backend.aread(Query("leads", limit=1)))
        assert str(awaited.value) == str(blocking.value)


class TestLoopThread:
    def test_requests_are_sent_from_the_loop_thread(self) -> None:
        """The awaitable client sends from the loop's thread: no executor."""
        threads: list[int] = []

        def noting(request: httpx.Request) -> httpx.Response:
            threads.append(threading.get_ident())
            return _page(request)

        backend = _backend(noting)

        async def main() -> int:
            await backend.aread(Query("leads", limit=2))
            return threading.get_ident()

        loop_thread = asyncio.run(main())
        assert threads and set(threads) == {loop_thread}


def test_async_http_client_must_be_an_async_client() -> None:
    """A blocking client given as async_http_client is a ConfigurationError."""
    with pytest.raises(ConfigurationError, match="async_http_client"):
        SupabaseBackend(
            url=BASE_URL,
            key=fake_key("anon"),
            async_http_client=httpx.Client(),  # type: ignore[arg-type]
        )
