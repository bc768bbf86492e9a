"""What one search may use on the server, from the catalog probe that opens it
(:func:`persistence.backends.postgres.search_sql.probe_statement`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["SearchFacts"]


@dataclass(slots=True)
class SearchFacts:
    """The schemas pgvector and pg_trgm live in (``None``: not installed), the side table's
    vector dimension, description and HNSW index, a declared vector column's dimension."""

    vector_schema: str | None
    trgm_schema: str | None
    side_dimension: int | None
    side_meta: dict[str, Any] | None
    has_hnsw: bool
    column_dimension: int | None
    #: pgvector 0.8 brought ``hnsw.iterative_scan``; before it only the exact fallback helps.
    iterative: bool = False
    #: The documents table's description, when it exists and this role may read it.
    documents: str | None = None
