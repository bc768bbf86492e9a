"""PostgREST failures → the library's error tree, in one place.

PostgREST reports errors as JSON ``{"code", "message", "details", "hint"}`` where ``code`` is a
PostgreSQL SQLSTATE (``42703``) or PostgREST's own ``PGRSTgxx`` (``PGRST205``). Gateways in front
of it (Supabase's, Cloudflare's) answer with HTML or plain text instead; httpx raises for
timeouts and broken connections. Every one of those becomes a ``PersistenceError`` subclass here,
with the original on ``__cause__`` where there is one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import httpx

from persistence.errors import (
    AggregatesDisabledError,
    BackendError,
    BackendUnavailableError,
    ColumnNotAllowedError,
    PersistenceError,
    QueryTimeoutError,
)

__all__ = ["PostgrestErrorBody", "error_from_exception", "error_from_response", "is_retryable"]

BACKEND = "supabase"
#: Statuses worth retrying for an idempotent read: unavailable, and Cloudflare's "unknown error".
RETRY_STATUSES = frozenset({503, 520})
_GATEWAY_STATUSES = frozenset({502, 503, 504, 520, 521, 522, 523, 524})
_UNKNOWN_TABLE = frozenset({"PGRST205", "42P01", "PGRST200"})
_UNKNOWN_COLUMN = frozenset({"42703", "PGRST204"})
_MAX_SNIPPET = 200


class PostgrestErrorBody:
    """The fields of a PostgREST error document (any may be missing)."""

    __slots__ = ("code", "details", "hint", "message")

    def __init__(self, code: str, message: str, details: str, hint: str) -> None:
        self.code = code
        self.message = message
        self.details = details
        self.hint = hint

    @classmethod
    def from_response(cls, response: httpx.Response) -> PostgrestErrorBody | None:
        """The error document in ``response``, or ``None`` when the body is not one."""
        try:
            data: Any = json.loads(response.content)
        except (ValueError, UnicodeDecodeError):
            return None
        if not isinstance(data, dict) or not ({"code", "message"} & data.keys()):
            return None

        def text(key: str) -> str:
            value = data.get(key)
            return "" if value is None else str(value)

        return cls(text("code"), text("message"), text("details"), text("hint"))


def _snippet(response: httpx.Response) -> str:
    # A gateway's HTML page is not worth quoting whole; keep one printable line.
    text = response.content[: _MAX_SNIPPET * 2].decode("utf-8", errors="replace")
    line = " ".join(text.split())
    return line[:_MAX_SNIPPET] or "<empty body>"


def _column_named(message: str, candidates: Iterable[str]) -> str | None:
    # PostgreSQL says ``column leads.password does not exist``; PostgREST's schema cache says
    # ``Could not find the 'password' column of 'leads'``. The query named the candidates, so
    # look for them rather than parse prose that changes between versions.
    for column in sorted(candidates, key=len, reverse=True):
        for form in (f".{column} ", f'.{column}"', f"'{column}'", f'"{column}"', f" {column} "):
            if form in message or message.endswith(f".{column}"):
                return column
    return None


def is_retryable(response: httpx.Response) -> bool:
    """True for the statuses an idempotent read may retry."""
    return response.status_code in RETRY_STATUSES


def error_from_response(
    response: httpx.Response,
    *,
    table: str,
    operation: str,
    columns: Iterable[str] = (),
) -> PersistenceError:
    """The typed error for a failed PostgREST ``response`` to ``operation`` on ``table``."""
    status = response.status_code
    body = PostgrestErrorBody.from_response(response)
    if body is None:
        summary = f"HTTP {status} from the Supabase API during {operation} on {table!r}"
        summary += f": {_snippet(response)}"
        if status in _GATEWAY_STATUSES or status >= 500:
            return BackendUnavailableError(summary, backend=BACKEND, operation=operation)
        return BackendError(summary, backend=BACKEND, operation=operation)

    code = body.code
    described = f"{code or 'no code'}: {body.message}" + (
        f" ({body.details})" if body.details else ""
    )
    prefix = f"Supabase API refused {operation} on {table!r} (HTTP {status}, {described})"
    if code == "PGRST123":
        return AggregatesDisabledError(
            f"{prefix}; the server has aggregate functions disabled: enable PostgREST's "
            "db-aggregates-enabled setting (on Supabase: ALTER ROLE authenticator SET "
            "pgrst.db_aggregates_enabled = 'true'; NOTIFY pgrst, 'reload config';)",
            operator="aggregate",
            backend=BACKEND,
        )
    if code in _UNKNOWN_COLUMN:
        column = _column_named(f"{body.message} {body.details}", columns)
        return ColumnNotAllowedError(
            f"table {table!r} has no column {column!r}" if column else prefix,
            table=table,
            column=column,
            operation=operation,
        )
    if code in _UNKNOWN_TABLE:
        return BackendError(
            f"{prefix}; the table does not exist or is not exposed to the API",
            backend=BACKEND,
            operation=operation,
        )
    if code == "57014":
        return QueryTimeoutError(
            f"{prefix}; the statement timed out", backend=BACKEND, operation=operation
        )
    if code.startswith(("PGRST0", "08")) or (code.startswith("53") and code != "53400"):
        return BackendUnavailableError(prefix, backend=BACKEND, operation=operation)
    if code in {"42501", "PGRST301", "PGRST302"} or status in {401, 403}:
        return BackendError(
            f"{prefix}; check the key, the role's grants and the row-level security policies",
            backend=BACKEND,
            operation=operation,
        )
    if status in _GATEWAY_STATUSES:
        return BackendUnavailableError(prefix, backend=BACKEND, operation=operation)
    return BackendError(prefix, backend=BACKEND, operation=operation)


def error_from_exception(exc: httpx.HTTPError, *, table: str, operation: str) -> PersistenceError:
    """The typed error for an httpx failure (the caller raises it ``from exc``)."""
    where = f"{operation} on {table!r}"
    if isinstance(exc, httpx.ConnectTimeout):
        return BackendUnavailableError(
            f"timed out connecting to the Supabase API during {where}",
            backend=BACKEND,
            operation=operation,
        )
    if isinstance(exc, httpx.TimeoutException):
        return QueryTimeoutError(
            f"the Supabase API did not answer in time during {where} ({type(exc).__name__})",
            backend=BACKEND,
            operation=operation,
        )
    if isinstance(exc, httpx.TransportError):
        return BackendUnavailableError(
            f"could not reach the Supabase API during {where}: {type(exc).__name__}: {exc}",
            backend=BACKEND,
            operation=operation,
        )
    return BackendError(
        f"HTTP failure during {where}: {type(exc).__name__}: {exc}",
        backend=BACKEND,
        operation=operation,
    )
