"""The Supabase backend's aggregates: PostgREST's aggregate functions, enum groups ordered here,
``count_distinct`` from grouped pairs, and the exactly re-checked rows of a literal ``*``."""

from __future__ import annotations

from persistence.aggregate import AggregateResult, Metric
from persistence.backends.supabase.postgrest.aggregate import aggregate_steps, typed_rows
from persistence.backends.supabase.postgrest.client import Exchange
from persistence.backends.supabase.postgrest.distinct import (
    count_distinct_groups,
    with_distinct_counts,
)
from persistence.backends.supabase.postgrest.encoding import needs_client_check
from persistence.backends.supabase.postgrest.enum_groups import all_enum_groups, ordered_and_capped
from persistence.backends.supabase.reads import _SupabaseReads
from persistence.query import Query
from persistence.steps import Steps
from persistence.values.aggregate_rows import aggregate_rows


class _SupabaseAggregates(_SupabaseReads):
    """``aggregate`` and ``aaggregate`` of the Supabase backend."""

    async def aaggregate(
        self, query: Query, group_by: tuple[str, ...], metrics: tuple[Metric, ...], limit: int
    ) -> AggregateResult:
        """:meth:`aggregate` over ``httpx.AsyncClient``."""
        return await self._client.adrive(self._aggregate_steps(query, group_by, metrics, limit))

    def aggregate(
        self, query: Query, group_by: tuple[str, ...], metrics: tuple[Metric, ...], limit: int
    ) -> AggregateResult:
        """PostgREST's aggregate functions
        (:mod:`~persistence.backends.supabase.postgrest.aggregate`);
        with a literal ``*`` filter, over the exactly checked rows, as :meth:`count` does."""
        return self._client.drive(self._aggregate_steps(query, group_by, metrics, limit))

    def _aggregate_steps(
        self, query: Query, group_by: tuple[str, ...], metrics: tuple[Metric, ...], limit: int
    ) -> Steps[Exchange, AggregateResult]:
        table, types = query.table, self.column_types(query.table) or {}
        checks = [f for f in query.filters if needs_client_check(f)]
        base = self._filter_params(table, query.filters, "aggregate")
        if checks:
            wanted = [*group_by, *(m.column for m in metrics if m.column)] or ["id"]
            rows = yield from self._checked_rows(table, base, checks, "aggregate", wanted)
            return aggregate_rows(typed_rows(rows, types, table), group_by, metrics, types, limit)
        total = lambda: self._total(table, base, "aggregate")  # noqa: E731 - only when capped
        native = tuple(m for m in metrics if m.function != "count_distinct")
        # Enum keys: every group asked for and ordered here (the server orders by declaration).
        every = all_enum_groups(group_by, types)
        shape = (group_by, native or (Metric("count"),), limit if every is None else every)
        result: AggregateResult = yield from aggregate_steps(
            self._client, table, base, shape, types, self._page_size, total
        )
        if every is not None and not result.capped:
            result = ordered_and_capped(result, limit)
        if len(native) == len(metrics):
            return result
        distinct = {}
        for metric in metrics:
            if metric.function == "count_distinct":
                distinct[metric] = yield from count_distinct_groups(
                    self._client, table, base, group_by, str(metric.column), types, self._page_size
                )
        return with_distinct_counts(result, metrics, distinct)
