"""One PostgreSQL search's working state inside its transaction
(:class:`persistence.backends.postgres.search.PostgresSearch`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql

from persistence.query import Filter
from persistence.search.embedder import Vector

__all__ = ["SearchRun"]


@dataclass(slots=True)
class SearchRun:
    """One search's working state inside its transaction."""

    cursor: psycopg.Cursor[Any]
    table: sql.Identifier
    filters: tuple[Filter, ...]
    depth: int
    total: int
    notes: list[str]
    path: dict[str, Any] = field(default_factory=dict)
    #: The semantic leg's query after feedback: the same for both tiers, computed once.
    refined: Vector | None = None
    #: Whether the semantic leg takes a round of feedback (:func:`feedback.takes_feedback`).
    feedback: bool = True
    #: The ``hnsw.ef_search`` the tier's settings set (``None``: not set).
    ef: int | None = None
    #: Whether a unique index keys the table's ``id`` alone (no two rows share an id).
    unique_ids: bool = False
