"""The Supabase backend: PostgREST over HTTP, through the ``supabase`` client's session.

``create_client`` is built with an ``httpx.Client`` of ours (HTTP/1.1, explicit timeout; the
library's own default is HTTP/2, which is not thread-safe with a sync client) passed in
``ClientOptions(httpx_client=...)``. Requests are built here rather than with the ``postgrest``
query builder, so that every value is encoded exactly as PostgREST's URL grammar requires (see
:mod:`persistence.backends.supabase.postgrest.encoding`), and sent through the client's session with
its ``apikey``/``Authorization``/profile headers.

* Counts come from ``Content-Range`` with ``Prefer: count=exact`` (or ``planned``/``estimated``).
* The server's row cap (``db-max-rows``: 1000 rows per request on Supabase, silently) is handled
  by fetching on until the page is full or the rows end.
* A literal ``*`` in ``icontains``/``ilike``/``ieq`` cannot be sent (PostgREST makes every ``*`` a
  wildcard); it is sent as ``_`` and rows are checked exactly here, which means fetching every
  candidate row of that query to count and page them.
* Requests go out, and their failures are translated, in one place:
  :meth:`persistence.backends.supabase.postgrest.client.PostgrestClient.request`; idempotent reads
  retry a bounded number of times on 503/520 and broken connections.
* Column types come from the OpenAPI description at the REST root (one request per backend,
  cached; see :mod:`persistence.backends.supabase.postgrest.schema`).
* Search calls the owner's read-only ranking function ``search_<table>`` with ``GET`` when the
  description lists it, else ranks full-text (``wfts``) candidates here; see
  :mod:`persistence.backends.supabase.postgrest.search` and docs/search-supabase.md.
* A key whose ``role`` claim is not ``anon``/``authenticated`` (``service_role``,
  ``supabase_admin``, ``postgres``, ...; the ``allowed_roles=`` option widens the list) may bypass
  row-level security: the read-only facade refuses it unless ``allow_privileged=True``.

The package's face: the backend (:mod:`~persistence.backends.supabase.backend`, one class), its
factory hook (:mod:`~persistence.backends.supabase.factory`) and the key roles
(:mod:`~persistence.backends.supabase.keys`).
"""

from persistence.errors import ConfigurationError

try:
    import httpx  # noqa: F401 - the client first: without it, the hint below
    import supabase  # noqa: F401

    from persistence.backends.supabase.backend import (
        DEFAULT_PAGE_SIZE,
        DEFAULT_TIMEOUT,
        SupabaseBackend,
    )
    from persistence.backends.supabase.factory import create_backend
    from persistence.backends.supabase.keys import ALLOWED_KEY_ROLES, key_role
except ImportError as exc:  # pragma: no cover - exercised only without the extra installed
    raise ConfigurationError(
        'the Supabase backend needs the supabase package: pip install "readonly-rag[supabase]"'
    ) from exc

__all__ = [
    "ALLOWED_KEY_ROLES",
    "DEFAULT_PAGE_SIZE",
    "DEFAULT_TIMEOUT",
    "SupabaseBackend",
    "create_backend",
    "key_role",
]
