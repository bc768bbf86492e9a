"""``count_distinct`` over PostgREST, which has no ``count(DISTINCT …)``.

PostgREST groups by the plain columns of ``select``: ``select=g0:status,d:email,n:count()``
answers one row per distinct ``(status, email)`` pair. The distinct non-NULL values of ``email``
per status are then the rows counted per status: the server does the ``DISTINCT``, the client
only counts pairs. What is read is one row per distinct pair, never the table's rows, and it is
**bounded**: more than :data:`MAX_DISTINCT_PAIRS` pairs is an
:class:`~persistence.errors.UnsupportedOperatorError` saying so (a count over that many values
belongs on the PostgreSQL backend, which runs it as one ``count(DISTINCT …)``), never a silent
scan. Pairs are paged by ``limit``/``offset`` in a total order (every selected column) until
a page comes back empty, so a server row cap (``db-max-rows``) only costs more requests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from persistence.aggregate import AggregateResult, Group, Metric
from persistence.backends.supabase.postgrest.aggregate import aggregate_rows_from
from persistence.backends.supabase.postgrest.client import Exchange, PostgrestClient
from persistence.errors import UnsupportedOperatorError
from persistence.steps import Steps
from persistence.values.column_kinds import ColumnType

__all__ = ["MAX_DISTINCT_PAIRS", "count_distinct_groups", "with_distinct_counts"]

#: The most (group, value) pairs one ``count_distinct`` metric may read over PostgREST.
MAX_DISTINCT_PAIRS = 10_000
Params = list[tuple[str, str]]
Key = tuple[Any, ...]


def _key(keys: Mapping[str, Any], group_by: Sequence[str]) -> Key:
    return tuple(keys[column] for column in group_by)


def count_distinct_groups(
    client: PostgrestClient,
    table: str,
    filters: Params,
    group_by: tuple[str, ...],
    column: str,
    types: Mapping[str, ColumnType],
    page_size: int,
) -> Steps[Exchange, dict[Key, int]]:
    """The number of distinct non-NULL ``column`` values per group key (groups whose values are
    all NULL are absent: their count is 0); as steps, sent blocking or awaited."""
    # The distinct column is grouped too, as the last key; count() keeps the request grouped
    # (and is what PostgREST needs to group at all).
    keys = (*group_by, column)
    select = ",".join([*(f"g{i}:{c}" for i, c in enumerate(keys)), "m0:count()"])
    order = ",".join(f"{c}.asc.nullslast" for c in keys)
    counts: dict[Key, int] = {}
    read = 0
    while True:
        want = min(page_size, MAX_DISTINCT_PAIRS + 1 - read)
        params: Params = [
            ("select", select),
            *filters,
            ("order", order),
            ("limit", str(want)),
            ("offset", str(read)),
        ]
        response = yield from client.request_steps(
            "GET", table, "aggregate", params, columns=[*keys, *(k for k, _ in filters)]
        )
        found, _ = aggregate_rows_from(response, table, keys, (Metric("count"),), types)
        read += len(found)
        if read > MAX_DISTINCT_PAIRS:
            raise UnsupportedOperatorError(
                f"count_distinct:{column} on {table!r} over PostgREST reads one row per "
                f"distinct value and group, and there are more than {MAX_DISTINCT_PAIRS}: "
                "narrow the filters, or use the PostgreSQL backend (one count(DISTINCT ...))",
                operator="count_distinct",
                backend="supabase",
            )
        for group_keys, _values in found:
            if group_keys[column] is not None:
                key = _key(group_keys, group_by)
                counts[key] = counts.get(key, 0) + 1
        # Only an empty page ends it: a server row cap (db-max-rows) below ``want`` shortens
        # every page, so a short one does not mean the last.
        if not found:
            return counts


def with_distinct_counts(
    result: AggregateResult, metrics: tuple[Metric, ...], distinct: Mapping[Metric, dict[Key, int]]
) -> AggregateResult:
    """``result`` (computed without the ``count_distinct`` metrics) with them put back, each
    group's value from ``distinct``, every metric in the order asked."""
    groups = []
    for group in result.groups:
        key = _key(group.keys, result.group_by)
        values = {
            str(m): distinct[m].get(key, 0) if m in distinct else group.metrics[str(m)]
            for m in metrics
        }
        groups.append(Group(group.keys, values))
    return AggregateResult(
        group_by=result.group_by,
        metrics=metrics,
        groups=tuple(groups),
        capped=result.capped,
        matched=result.matched,
        total_groups=result.total_groups,
    )
