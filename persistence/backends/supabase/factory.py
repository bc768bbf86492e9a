"""The factory hook of ``kind="supabase"``: ``url=`` and ``key=`` required, the options
checked."""

from __future__ import annotations

from typing import Any

from persistence.backends.supabase.backend import SupabaseBackend
from persistence.errors import ConfigurationError
from persistence.options import check_options, require_text

__all__ = ["create_backend"]

_OPTIONS = ("url", "key", "http_client", "async_http_client", "allow_privileged",
            "allowed_roles", "count", "page_size", "max_read_rows", "timeout", "retries",
            "schema", "sleep", "relations")  # fmt: skip


def create_backend(*, read_only: bool = True, **options: Any) -> SupabaseBackend:
    """Factory hook for ``kind="supabase"``: ``url=`` and ``key=`` are required.

    The facade factories pass ``SUPABASE_URL``/``SUPABASE_KEY`` (through
    ``PersistenceSettings``) when a caller leaves them out; this hook reads no environment.
    Optional: ``http_client=``, ``async_http_client=`` (the awaitable reads' ``httpx.AsyncClient``;
    default: one made on first use), ``allow_privileged=``, ``allowed_roles=`` (key roles accepted
    without ``allow_privileged``; default :data:`ALLOWED_KEY_ROLES`), ``count=`` (``"exact"``,
    ``"planned"``, ``"estimated"``), ``page_size=``, ``max_read_rows=`` (the most rows one read
    may fetch, default :data:`MAX_READ_ROWS`), ``timeout=`` (seconds), ``retries=``,
    ``schema=``, ``sleep=``, ``relations=`` (the relations ``include`` follows; default: the
    foreign keys the API description notes).
    """
    check_options("kind='supabase'", options, _OPTIONS)
    url = options.pop("url", None)
    key = options.pop("key", None)
    url = require_text("supabase", "url", url, what="a project URL", variable="SUPABASE_URL")
    key = require_text("supabase", "key", key, what="an API key", variable="SUPABASE_KEY")
    allow = options.pop("allow_privileged", False)
    if type(allow) is not bool:
        raise ConfigurationError(f"allow_privileged= must be a bool, not {allow!r}")
    return SupabaseBackend(url=url, key=key, read_only=read_only, allow_privileged=allow, **options)
