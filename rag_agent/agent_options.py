"""The keyword options of ``RAGAgent``'s methods, for the overloads type checkers read."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict

from persistence import Include, Metric, Order
from rag_agent.specs import Condition


class _PageOptions(TypedDict, total=False):
    limit: int | None
    offset: int | None
    include_raw: bool


class _RunOptions(_PageOptions, total=False):
    table: str | None
    filters: Mapping[str, Any] | Sequence[Condition] | None
    count_only: bool | None
    include: Sequence[str | Include] | None


class _ReadOptions(_PageOptions, total=False):
    columns: Sequence[str] | None
    order: Iterable[Order | str]
    count_only: bool
    include: Sequence[str | Include]


class _SearchOptions(TypedDict, total=False):
    k: int | None
    offset: int | None
    mode: str
    include_raw: bool


class _AggregateOptions(TypedDict, total=False):
    group_by: Sequence[str]
    metrics: Sequence[Metric | str]
    limit: int | None
