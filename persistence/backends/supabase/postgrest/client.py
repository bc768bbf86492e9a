"""The Supabase backend's HTTP side: one :meth:`PostgrestClient.request` that sends, retries and
translates, and JSON rows in and out.

Every PostgREST error document, gateway page and httpx failure becomes one of the library's errors
in :meth:`PostgrestClient.request` (by way of :mod:`persistence.backends.supabase.postgrest.errors`)
and nowhere else; a caller holding a response holds a successful one. Idempotent reads (``GET``) are
retried a bounded number of times on 503/520 and broken connections; writes never are.

Thread-safety: a client is safe to share between threads when its ``httpx.Client`` is (HTTP/1.1).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import decimal
import json
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

import httpx

from persistence.backends.supabase.postgrest.encoding import encode_query_string
from persistence.backends.supabase.postgrest.errors import (
    PostgrestErrorBody,
    error_from_exception,
    error_from_response,
    is_retryable,
)
from persistence.errors import BackendError, InvalidQueryError
from persistence.steps import Steps, adrive, drive

__all__ = [
    "Backoff",
    "Exchange",
    "PostgrestClient",
    "Send",
    "default_async_http_client",
    "default_http_client",
    "json_body",
    "json_default",
    "json_rows",
]

T = TypeVar("T")

Row = dict[str, Any]
_BACKOFF_SECONDS = 0.2
_MAX_BACKOFF_SECONDS = 2.0
_RETRYABLE_EXCEPTIONS = (httpx.NetworkError, httpx.RemoteProtocolError)


def default_async_http_client(timeout: float) -> httpx.AsyncClient:
    """The awaitable twin of :func:`default_http_client`: same protocol, timeouts, redirects."""
    return httpx.AsyncClient(
        http2=False,
        timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)),
        follow_redirects=False,
    )


def default_http_client(timeout: float) -> httpx.Client:
    """HTTP/1.1 (the library's HTTP/2 default is not thread-safe with a sync client), ``timeout``
    seconds for a request and at most 5 to connect, no redirects."""
    return httpx.Client(
        http2=False,
        timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)),
        follow_redirects=False,
    )


class PostgrestClient:
    """Requests to one PostgREST endpoint with fixed headers (``apikey``, profile, ...)."""

    __slots__ = (
        "_ahttp",
        "_ahttp_loop",
        "_base_url",
        "_headers",
        "_http",
        "_owns_ahttp",
        "_owns_http",
        "_retries",
        "_sleep",
        "_timeout",
    )

    def __init__(
        self,
        http: httpx.Client,
        base_url: str,
        headers: Mapping[str, str],
        *,
        owns_http: bool,
        retries: int,
        sleep: Callable[[float], None],
        async_http: httpx.AsyncClient | None = None,
        timeout: float = 10.0,
    ) -> None:
        self._http = http
        self._ahttp = async_http
        self._owns_ahttp = False
        self._ahttp_loop: asyncio.AbstractEventLoop | None = None
        self._timeout = timeout
        self._owns_http = owns_http
        self._base_url = base_url.rstrip("/")
        self._headers = httpx.Headers(headers)
        self._headers["Accept"] = "application/json"
        self._retries = retries
        self._sleep = sleep

    def request(
        self,
        method: str,
        table: str,
        operation: str,
        params: Sequence[tuple[str, str]],
        *,
        headers: Mapping[str, str] | None = None,
        content: bytes | None = None,
        columns: Iterable[str] = (),
        past_end_ok: bool = False,
    ) -> httpx.Response:
        """The successful response to one request (blocking); see :meth:`request_steps`."""
        steps = self.request_steps(
            method,
            table,
            operation,
            params,
            headers=headers,
            content=content,
            columns=columns,
            past_end_ok=past_end_ok,
        )
        return self.drive(steps)

    def drive(self, steps: Steps[Exchange, T]) -> T:
        """Run ``steps`` (requests made of :meth:`request_steps`) over the blocking client."""
        return drive(steps, self._perform)

    async def adrive(self, steps: Steps[Exchange, T]) -> T:
        """Run ``steps`` over the awaitable client (``httpx.AsyncClient``), on the running
        loop: the same requests, retries and errors as :meth:`drive`."""
        return await adrive(steps, self._aperform)

    def perform(self, exchange: Exchange) -> httpx.Response | None:
        """Perform one exchange (blocking): for drivers of steps that ask for more than HTTP."""
        return self._perform(exchange)

    async def aperform(self, exchange: Exchange) -> httpx.Response | None:
        """Perform one exchange on the running loop; see :meth:`perform`."""
        return await self._aperform(exchange)

    def _perform(self, exchange: Exchange) -> httpx.Response | None:
        if isinstance(exchange, Backoff):
            self._sleep(exchange.seconds)
            return None
        return self._http.request(
            exchange.method, exchange.url, headers=exchange.headers, content=exchange.content
        )

    async def _aperform(self, exchange: Exchange) -> httpx.Response | None:
        if isinstance(exchange, Backoff):
            await asyncio.sleep(exchange.seconds)
            return None
        response = await self._async_http().request(
            exchange.method, exchange.url, headers=exchange.headers, content=exchange.content
        )
        return response

    def _async_http(self) -> httpx.AsyncClient:
        # The caller's, else one of our own, made on first use (it belongs to this loop).
        loop = asyncio.get_running_loop()
        if self._ahttp is None or (self._owns_ahttp and self._ahttp_loop is not loop):
            self._ahttp = default_async_http_client(self._timeout)
            self._ahttp_loop = loop
            self._owns_ahttp = True
        return self._ahttp

    def request_steps(
        self,
        method: str,
        table: str,
        operation: str,
        params: Sequence[tuple[str, str]],
        *,
        headers: Mapping[str, str] | None = None,
        content: bytes | None = None,
        columns: Iterable[str] = (),
        past_end_ok: bool = False,
    ) -> Steps[Exchange, httpx.Response]:
        """The successful response to one request; any failure raises the library's error.

        ``columns`` are those the request names (an unknown-column error names the one the
        server means). With ``past_end_ok``, an offset past the last row (``416``/``PGRST103``)
        comes back as that response: the caller reads it as an empty page.
        """
        try:
            url = httpx.URL(f"{self._base_url}/{table}").copy_with(
                query=encode_query_string(params)
            )
        except httpx.InvalidURL as exc:
            # httpx refuses a query string over 64 KiB (servers refuse far less): too many or too
            # long values for one GET, which is the caller's query, not a server failure.
            raise InvalidQueryError(
                f"{operation} on {table!r} does not fit in a PostgREST URL ({exc})",
                field="filters",
            ) from exc
        merged = httpx.Headers(self._headers)
        if headers:
            merged.update(headers)
        response = yield from self._send(method, url, merged, content, table, operation)
        if response.is_success or (past_end_ok and is_past_end(response)):
            return response
        raise error_from_response(response, table=table, operation=operation, columns=columns)

    def _send(
        self,
        method: str,
        url: httpx.URL,
        headers: httpx.Headers,
        content: bytes | None,
        table: str,
        operation: str,
    ) -> Steps[Exchange, httpx.Response]:
        retries = self._retries if method == "GET" else 0
        attempt = 0
        while True:
            try:
                response: httpx.Response = yield Send(method, url, headers, content)
            except httpx.HTTPError as exc:
                if attempt < retries and isinstance(exc, _RETRYABLE_EXCEPTIONS):
                    yield _backoff(attempt)
                    attempt += 1
                    continue
                raise error_from_exception(exc, table=table, operation=operation) from exc
            if attempt < retries and is_retryable(response):
                if isinstance(response.stream, httpx.SyncByteStream):
                    response.close()  # read in full already: an awaited one holds nothing
                yield _backoff(attempt)
                attempt += 1
                continue
            return response

    def close(self) -> None:
        """Close the HTTP client if this client's owner created it (a caller's stays open)."""
        if self._owns_http:
            self._http.close()

    async def aclose(self) -> None:
        """Close the awaitable HTTP client if this client made it (a caller's stays open)."""
        ahttp, self._ahttp = self._ahttp, None
        if (
            ahttp is not None
            and self._owns_ahttp
            and self._ahttp_loop is asyncio.get_running_loop()
        ):
            await ahttp.aclose()


class Send(NamedTuple):
    """One HTTP exchange a request's steps ask for; answered with the response."""

    method: str
    url: httpx.URL
    headers: httpx.Headers
    content: bytes | None


class Backoff(NamedTuple):
    """A pause before a retry (``time.sleep`` or ``asyncio.sleep``, by the driver)."""

    seconds: float


#: What a request's steps yield.
Exchange = Send | Backoff


def _backoff(attempt: int) -> Backoff:
    return Backoff(min(_BACKOFF_SECONDS * 2**attempt, _MAX_BACKOFF_SECONDS))


def is_past_end(response: httpx.Response) -> bool:
    """True for PostgREST's answer to an offset past the last row (``416``, ``PGRST103``)."""
    if response.status_code != 416:
        return False
    body = PostgrestErrorBody.from_response(response)
    return body is None or body.code == "PGRST103"


def json_rows(response: httpx.Response, table: str, operation: str) -> list[Row]:
    """The rows in a successful response; a body that is not a JSON list of objects is a
    ``BackendError``."""
    try:
        data = json.loads(response.content)
    except ValueError as exc:
        raise BackendError(
            f"the Supabase API answered {operation} on {table!r} with a body that is not JSON",
            backend="supabase",
            operation=operation,
        ) from exc
    if not isinstance(data, list) or not all(isinstance(row, dict) for row in data):
        raise BackendError(
            f"the Supabase API answered {operation} on {table!r} with something other than rows",
            backend="supabase",
            operation=operation,
        )
    return data


def json_body(rows: Iterable[Mapping[str, Any]], table: str, operation: str) -> bytes:
    """``rows`` as a JSON request body; non-finite or non-JSON values are ``InvalidQueryError``."""
    try:
        text = json.dumps([dict(r) for r in rows], default=_json_default, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidQueryError(
            f"{operation} on {table!r}: row values must be JSON-serialisable and finite ({exc})",
            field="rows",
        ) from exc
    return text.encode("utf-8")


def json_default(value: object) -> object:
    """JSON for the values rows and parameters carry: dates as ISO text, decimals and uuids as
    text."""
    return _json_default(value)


def _json_default(value: object) -> object:
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")
