"""Aggregate runs: counts and metrics per group through ``facade.aggregate``, cached like reads.

An aggregate answers with numbers, never rows: the envelope has ``records: []``, ``total_count``
(the rows the filters matched) and ``metadata.aggregates`` (see
:func:`rag_agent.envelope.assemble.aggregates_info`). Because no row is returned, a run may
aggregate a table without any filter ("how many leads by status"), which a row-returning run never
does.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from persistence import (
    AggregateResult,
    Filter,
    InvalidQueryError,
    Metric,
    ReadOnlyPersistenceFacade,
)
from rag_agent.envelope.assemble import Outcome
from rag_agent.runtime.cache import QueryCache
from rag_agent.runtime.effects import Call, Steps

__all__ = ["DEFAULT_METRICS", "aggregate_into"]

#: What a question "by status" asks for when it names no metric: the rows per group.
DEFAULT_METRICS: tuple[str, ...] = ("count",)


def _typed(value: Any) -> Any:
    # 1, 1.0 and True are equal and hash alike, but a backend may tell them apart.
    if isinstance(value, tuple):
        return tuple(map(_typed, value))
    return (type(value), value)


def _names(values: object, what: str) -> tuple[Any, ...]:
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise InvalidQueryError(
            f"{what} must be a sequence, not {type(values).__name__}", field=what
        )
    return tuple(values)


def aggregate_into(
    outcome: Outcome,
    *,
    facade: ReadOnlyPersistenceFacade,
    cache: QueryCache,
    now: Callable[[], dt.datetime],
    log: Any,
    table: str,
    filters: Sequence[Filter],
    group_by: object,
    metrics: object,
    limit: int | None = None,
) -> Steps[None]:
    """Aggregate ``table`` into ``outcome`` (from the cache when it holds the same question at
    the table's current ``data_version``); the facade checks every name and value. A step of the
    pipeline (:mod:`rag_agent.runtime.effects`): the aggregate itself is asked for as a ``Call``."""
    names = _names(group_by, "group_by")
    asked = tuple(str(m) if isinstance(m, Metric) else m for m in _names(metrics, "metrics"))
    typed = tuple((f.column, f.op, _typed(f.value)) for f in filters)
    key: tuple[Any, ...] | None
    key = ("aggregate", table, facade.data_version(table), typed, names, asked, limit)
    cached: tuple[AggregateResult, dt.datetime] | None
    try:
        cached = cache.get(key)
    except TypeError:  # an unhashable name: the facade refuses it below
        cached, key = None, None
    outcome.cache = "miss" if cached is None else "hit"
    if cached is None:
        kwargs = {"group_by": names, "metrics": asked, "limit": limit}
        result = yield Call("aggregate", (table, filters), kwargs)
        cached = (result, now())
        if key is not None:
            cache.put(key, cached)
    outcome.take_aggregate(*cached)
    log.debug(
        "rag.aggregate",
        table=table,
        group_by=list(names),
        metrics=list(asked),
        groups=len(cached[0].groups),
        capped=cached[0].capped,
        total_count=cached[0].matched,
        cache=outcome.cache,
    )
