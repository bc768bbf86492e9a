"""Windows of rows and totals through PostgREST, whose server caps every answer silently.

Supabase answers at most ``db-max-rows`` rows (1000 by default) per request whatever ``limit``
asks, so :func:`fetch_window` keeps asking from where an answer stopped until the window is full
or the rows end; totals come from ``Content-Range`` (:func:`fetch_total` asks for one alone).
Pure request logic over a :class:`~persistence.backends.supabase.postgrest.client.PostgrestClient`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from persistence.backends.supabase.postgrest.client import Exchange, PostgrestClient, json_rows
from persistence.backends.supabase.postgrest.encoding import CountMode, parse_content_range
from persistence.errors import BackendError
from persistence.steps import Steps

__all__ = ["MAX_READ_ROWS", "Window", "fetch_total", "fetch_window", "total_steps", "window_steps"]

Params = Sequence[tuple[str, str]]


class Window(NamedTuple):
    """Rows read, the total from the first answer's ``Content-Range`` (``None`` when the server
    sent ``*``), and whether the rows were seen to end."""

    rows: list[dict[str, Any]]
    total: int | None
    ended: bool


#: The most rows one read may fetch from PostgREST (filters re-checked on this side fetch every
#: candidate row): a bound on memory and time, not on what a page may hold.
MAX_READ_ROWS = 100_000


def fetch_window(
    client: PostgrestClient,
    table: str,
    operation: str,
    params: Params,
    *,
    offset: int,
    limit: int | None,
    page_size: int,
    count_mode: CountMode,
    columns: Iterable[str] = (),
    max_rows: int = MAX_READ_ROWS,
) -> Window:
    """:func:`window_steps` over the blocking client."""
    return client.drive(
        window_steps(
            client, table, operation, params, offset=offset, limit=limit, page_size=page_size,
            count_mode=count_mode, columns=columns, max_rows=max_rows,
        )
    )  # fmt: skip


def window_steps(
    client: PostgrestClient,
    table: str,
    operation: str,
    params: Params,
    *,
    offset: int,
    limit: int | None,
    page_size: int,
    count_mode: CountMode | None,
    columns: Iterable[str] = (),
    max_rows: int = MAX_READ_ROWS,
) -> Steps[Exchange, Window]:
    """Rows ``offset .. offset+limit`` (all when ``limit`` is None), at most ``page_size`` a
    request, refilling answers the server capped.

    Bounded: more than ``max_rows`` rows for one read (a filter the server cannot apply exactly,
    re-checked here, over a large table), or an answer whose ``Content-Range`` starts elsewhere
    than the offset asked for (a gateway ignoring ``offset``), is a ``BackendError`` rather than
    a read that downloads a table or never ends. ``count_mode`` ``None`` asks for no count.
    """
    rows: list[dict[str, Any]] = []
    total: int | None = None
    first = True
    while True:
        remaining = None if limit is None else limit - len(rows)
        ask = page_size if remaining is None else min(page_size, remaining)
        position = offset + len(rows)
        window = [("offset", str(position))] if position else []
        response = yield from client.request_steps(
            "GET",
            table,
            operation,
            [*params, *window, ("limit", str(ask))],
            headers={"Prefer": f"count={count_mode}"} if first and count_mode else None,
            columns=columns,
            past_end_ok=True,
        )
        if not response.is_success:
            return Window(rows, total, True)  # the start lies past the last row: an empty page
        batch = json_rows(response, table, operation)
        content_range = parse_content_range(response.headers.get("content-range"))
        if first:
            total = content_range.total if content_range else None
            first = False
        if batch and content_range is not None and content_range.first not in (None, position):
            raise BackendError(
                f"the Supabase API answered rows {content_range.first}- of {table!r} when asked "
                f"for offset {position}: a proxy or gateway seems to ignore 'offset'",
                backend="supabase",
                operation=operation,
            )
        if len(batch) > ask:
            raise BackendError(
                f"the Supabase API returned {len(batch)} rows for a limit of {ask}",
                backend="supabase",
                operation=operation,
            )
        rows.extend(batch)
        if len(rows) > max_rows:
            raise BackendError(
                f"reading {table!r} needs more than {max_rows} rows from the Supabase API for one "
                "request (a filter only re-checked on this side, such as a literal '*', over a "
                "large table): narrow the filters",
                backend="supabase",
                operation=operation,
            )
        if not batch and ask:
            return Window(rows, total, True)
        if ask == 0 or (limit is not None and len(rows) >= limit):
            return Window(rows, total, False)
        if count_mode == "exact" and total is not None and offset + len(rows) >= total:
            return Window(rows, total, True)
        # Otherwise the answer was full, or short because of the server's row cap (the total
        # says more rows exist), or the total is unknown/estimated: ask again; an empty answer
        # ends the loop.


def fetch_total(
    client: PostgrestClient, table: str, operation: str, params: Params, count_mode: CountMode
) -> int:
    """:func:`total_steps` over the blocking client."""
    return client.drive(total_steps(client, table, operation, params, count_mode))


def total_steps(
    client: PostgrestClient, table: str, operation: str, params: Params, count_mode: CountMode
) -> Steps[Exchange, int]:
    """How many rows match ``params``' filters: ``limit=0`` and ``Prefer: count=<mode>``."""
    response = yield from client.request_steps(
        "GET",
        table,
        operation,
        [*params, ("limit", "0")],
        headers={"Prefer": f"count={count_mode}"},
        columns=[k for k, _ in params],
    )
    content_range = parse_content_range(response.headers.get("content-range"))
    if content_range is None or content_range.total is None:
        raise BackendError(
            f"the Supabase API sent no total count for {table!r} (Content-Range "
            f"{response.headers.get('content-range')!r}); a proxy may drop the Prefer header",
            backend="supabase",
            operation=operation,
        )
    return content_range.total
