"""Scripted HTTP for wire-format tests: record every request, answer from a script."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import httpx

from persistence.backends.supabase import SupabaseBackend
from tests.support.postgrest import BASE_URL, decode_query, fake_key

__all__ = ["ScriptedServer", "backend_over", "rows_response"]

Reply = httpx.Response | Exception | Callable[[httpx.Request], httpx.Response]


def rows_response(
    rows: list[dict[str, Any]], content_range: str | None, status: int = 200
) -> httpx.Response:
    """A PostgREST-like JSON rows answer with the given ``Content-Range``."""
    headers = {} if content_range is None else {"Content-Range": content_range}
    return httpx.Response(status, json=rows, headers=headers)


class ScriptedServer:
    """An ``httpx.MockTransport`` handler answering with ``replies`` in order.

    A reply may be a response, an exception to raise (a timeout, a reset connection) or a
    function of the request. When the script runs out, the last reply repeats.
    """

    def __init__(self, replies: Iterable[Reply]) -> None:
        self.replies = list(replies)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        index = min(len(self.requests), len(self.replies)) - 1
        reply = self.replies[index]
        if isinstance(reply, Exception):
            raise reply
        if isinstance(reply, httpx.Response):
            return reply
        return reply(request)

    def params(self, index: int = -1) -> list[tuple[str, str]]:
        """The decoded query parameters of request ``index``."""
        return decode_query(self.requests[index].url.query)


def backend_over(
    handler: Callable[[httpx.Request], httpx.Response], **options: Any
) -> SupabaseBackend:
    """A read-only backend whose HTTP goes to ``handler``; retries never really sleep."""
    client = httpx.Client(transport=httpx.MockTransport(handler))
    options.setdefault("sleep", lambda _seconds: None)
    return SupabaseBackend(url=BASE_URL, key=fake_key("anon"), http_client=client, **options)
