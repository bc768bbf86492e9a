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

Thread-safety: a backend is safe to share between threads (the httpx client is, over HTTP/1.1;
the only other state is a per-table cache of column names, filled once).
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Callable, Collection, Iterable
from typing import Any

from persistence.capabilities import Capabilities
from persistence.errors import ConfigurationError
from persistence.logs import get_logger
from persistence.options import check_options, require_text
from persistence.relations import Relation, check_relations

try:
    import httpx
    from supabase import ClientOptions, SupabaseException, create_client
except ImportError as exc:  # pragma: no cover - exercised only without the extra installed
    raise ConfigurationError(
        'the Supabase backend needs the supabase package: pip install "readonly-rag[supabase]"'
    ) from exc

from persistence.backends.supabase.aggregate import _SupabaseAggregates
from persistence.backends.supabase.keys import ALLOWED_KEY_ROLES, _lacks_role_claim, key_role
from persistence.backends.supabase.keys import _jwt_claims as _jwt_claims
from persistence.backends.supabase.postgrest.aggregate import AGGREGATE_FUNCTIONS
from persistence.backends.supabase.postgrest.client import PostgrestClient
from persistence.backends.supabase.postgrest.client import (
    default_http_client as _default_http_client,
)
from persistence.backends.supabase.postgrest.encoding import COUNT_MODES, CountMode
from persistence.backends.supabase.postgrest.paging import MAX_READ_ROWS
from persistence.backends.supabase.postgrest.schema import ApiDescription
from persistence.backends.supabase.postgrest.search import RowVectors
from persistence.backends.supabase.reads import Params as Params
from persistence.backends.supabase.reads import Row as Row
from persistence.backends.supabase.search import _SupabaseSearch
from persistence.backends.supabase.writes import _DELETE_CHUNK as _DELETE_CHUNK
from persistence.backends.supabase.writes import _SupabaseWrites

__all__ = [
    "ALLOWED_KEY_ROLES",
    "DEFAULT_PAGE_SIZE",
    "DEFAULT_TIMEOUT",
    "SupabaseBackend",
    "create_backend",
    "key_role",
]

log = get_logger("persistence.supabase")

#: Rows asked for per request: Supabase's default ``db-max-rows``.
DEFAULT_PAGE_SIZE = 1000
#: Seconds for the whole request (connect: at most 5).
DEFAULT_TIMEOUT = 10.0
_DEFAULT_RETRIES = 2
_OPTIONS = ("url", "key", "http_client", "async_http_client", "allow_privileged",
            "allowed_roles", "count", "page_size", "max_read_rows", "timeout", "retries",
            "schema", "sleep", "relations")  # fmt: skip


class SupabaseBackend(_SupabaseAggregates, _SupabaseSearch, _SupabaseWrites):
    """Serves queries from a Supabase project (or any PostgREST) over its REST API.

    Build it with :func:`persistence.create_read_only_facade` ``(kind="supabase", ...)`` rather
    than directly; see ``docs/backends/supabase.md`` for the options.
    """

    name = "supabase"
    #: Every operator; any page size (capped answers are refilled here, where Content-Range is);
    #: PostgREST's aggregate functions, and count_distinct from its grouping (bounded, see
    #: ``_postgrest_distinct``).
    capabilities = Capabilities(aggregates=AGGREGATE_FUNCTIONS | {"count_distinct"})

    def __init__(
        self,
        *,
        url: str,
        key: str,
        http_client: httpx.Client | None = None,
        async_http_client: httpx.AsyncClient | None = None,
        read_only: bool = True,
        allow_privileged: bool = False,
        allowed_roles: Collection[str] = ALLOWED_KEY_ROLES,
        count: CountMode = "exact",
        page_size: int = DEFAULT_PAGE_SIZE,
        max_read_rows: int = MAX_READ_ROWS,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = _DEFAULT_RETRIES,
        schema: str = "public",
        sleep: Callable[[float], None] = time.sleep,
        relations: Iterable[Relation] | None = None,
    ) -> None:
        _check_options(count, page_size, timeout, retries, http_client)
        if async_http_client is not None and not isinstance(async_http_client, httpx.AsyncClient):
            raise ConfigurationError(
                "async_http_client= must be an httpx.AsyncClient, "
                f"not {type(async_http_client).__name__}"
            )
        if type(max_read_rows) is not int or max_read_rows < 1:
            raise ConfigurationError(
                f"max_read_rows= must be a positive integer, not {max_read_rows!r}"
            )
        self._max_read_rows = max_read_rows
        if isinstance(allowed_roles, str):
            raise ConfigurationError(
                f"allowed_roles= must be a collection of role names, not {allowed_roles!r}"
            )
        self._declared = None if relations is None else check_relations(relations)
        role = key_role(key)
        if read_only and not allow_privileged and _lacks_role_claim(key):
            raise ConfigurationError(
                "SUPABASE_KEY (or key=) is a JWT without a 'role' claim, so the role it reads "
                "as (and whether row-level security applies) depends on the server; the "
                "read-only facade accepts only keys naming one of "
                f"{', '.join(sorted(allowed_roles))}. Use the project's anon key, or pass "
                "allow_privileged=True to accept the risk",
                variable="SUPABASE_KEY",
            )
        privileged = role is not None and role not in frozenset(allowed_roles)
        if read_only and (privileged or _lacks_role_claim(key)):
            if not allow_privileged:
                raise ConfigurationError(
                    f"SUPABASE_KEY (or key=) is a {role!r} key, which may bypass row-level "
                    "security; the read-only facade accepts only "
                    f"{', '.join(sorted(allowed_roles))} keys. Use the anon key with SELECT-only "
                    "policies, or pass allow_privileged=True to accept the risk",
                    variable="SUPABASE_KEY",
                )
            log.warning(
                "supabase.privileged_key",
                role=role,
                hint="read-only facade with allow_privileged=True: row-level security is bypassed",
            )
        self._read_only = read_only
        http = http_client if http_client is not None else _default_http_client(timeout)
        try:
            rest = create_client(
                url,
                key,
                ClientOptions(
                    schema=schema,
                    httpx_client=http,
                    postgrest_client_retry=False,  # ours is bounded and injectable
                    auto_refresh_token=False,
                    persist_session=False,
                ),
            ).postgrest
        except SupabaseException as exc:
            if http_client is None:
                http.close()
            raise ConfigurationError(
                f"invalid Supabase settings (SUPABASE_URL / url=, SUPABASE_KEY / key=): "
                f"{exc.message}",
                variable="SUPABASE_URL",
            ) from exc
        self._client = PostgrestClient(
            http,
            str(rest.base_url),
            rest.headers,
            owns_http=http_client is None,
            retries=retries,
            sleep=sleep,
            async_http=async_http_client,
            timeout=timeout,
        )
        self._count_mode: CountMode = count
        self._page_size = page_size
        #: Which tables these are, for write versions: the project's URL and the schema.
        self.data_target = ("supabase", url.rstrip("/"), schema)
        #: The project's host name alone, for envelopes (a URL could carry credentials).
        self.database = urllib.parse.urlsplit(url).hostname or None
        # Written once per table and only read afterwards; a race costs one duplicate request.
        self._columns: dict[str, frozenset[str]] = {}
        self._description = ApiDescription(self._client)
        self._row_vectors = RowVectors()

    @property
    def count_mode(self) -> CountMode:
        """The ``Prefer: count=`` mode used for totals."""
        return self._count_mode

    async def aprepare(self) -> None:
        """Read the API description (column types, relations) without blocking the loop."""
        if not self._description.known():
            await self._client.adrive(self._description.fetch_steps())

    async def aclose(self) -> None:
        """Close the awaitable HTTP client if the backend made it."""
        await self._client.aclose()

    def close(self) -> None:
        """Close the HTTP client if this backend created it (a caller's client stays open)."""
        self._client.close()


def _check_options(
    count: object, page_size: object, timeout: object, retries: object, http_client: object
) -> None:
    if count not in COUNT_MODES:
        raise ConfigurationError(f"count= must be one of {', '.join(COUNT_MODES)}, not {count!r}")
    if type(page_size) is not int or page_size < 1:
        raise ConfigurationError(f"page_size= must be a positive integer, not {page_size!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ConfigurationError(f"timeout= must be a positive number of seconds, not {timeout!r}")
    if type(retries) is not int or not 0 <= retries <= 10:
        raise ConfigurationError(f"retries= must be an integer from 0 to 10, not {retries!r}")
    if http_client is not None and not isinstance(http_client, httpx.Client):
        raise ConfigurationError(
            f"http_client= must be an httpx.Client, not {type(http_client).__name__}"
        )


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
