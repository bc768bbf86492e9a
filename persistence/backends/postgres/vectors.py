"""What the PostgreSQL search shares with the indexer (the side table's name, the text a row
embeds and its hash), the search's settings, and the in-process vectors of the degraded
semantic leg.

Thread-safety: :class:`RowVectors` is safe to share (its cache takes a lock); the rest is
immutable.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from cachetools import LRUCache

from persistence.errors import ConfigurationError
from persistence.search.embedder import Embedder, Vector

__all__ = [
    "EF_SEARCH_FLOOR",
    "EMBEDDINGS_TABLE_SUFFIX",
    "EXACT_ROWS",
    "POOL_ROWS",
    "RowVectors",
    "SearchSettings",
    "at_least",
    "by_cosine",
    "ef_search",
    "embeddings_table",
    "leg_ef_search",
    "parse_vector",
    "row_text",
    "text_hash",
    "vector_literal",
]

#: The side table of ``T`` is ``T_embeddings``, in ``T``'s schema.
EMBEDDINGS_TABLE_SUFFIX = "_embeddings"
_CACHE_ENTRIES = 20_000


def embeddings_table(table: str) -> str:
    """The side table holding ``table``'s row vectors."""
    return f"{table}{EMBEDDINGS_TABLE_SUFFIX}"


def row_text(values: Sequence[Any]) -> str:
    """What is embedded for a row: its non-empty text values, one per line (the indexer, the
    in-process re-rank and the memory backend embed the same text)."""
    return "\n".join(str(v) for v in values if v is not None and v != "")


def text_hash(columns: Sequence[str], text: str) -> bytes:
    """The SHA-256 of the embedded text and the columns it came from (a changed column list
    re-embeds every row)."""
    return hashlib.sha256(json.dumps([list(columns), text]).encode()).digest()


#: The default ``SearchSettings.exact_rows``: at most this many filtered rows, the semantic leg
#: measures every one (exact, the order no index approximates); the Supabase ranking function
#: follows the same rule, so its pages stay the backend's.
EXACT_ROWS = 2_000


@dataclass(frozen=True, slots=True)
class SearchSettings:
    """The backend's search options (``create_backend`` names them).

    ``text_search_config``: the full-text configuration (``english``); ``vector_columns``:
    ``{table: (column, model_id)}`` for tables that hold their own ``vector(n)`` column;
    ``exact_rows``: at most this many filtered rows take the exact vector path;
    ``rerank_rows``: at most this many filtered rows are embedded in process when no vectors are
    stored; ``keyword_candidates``: rows the keyword leg ranks at most (more when deeper).
    """

    text_search_config: str = "english"
    vector_columns: Mapping[str, tuple[str, str]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    exact_rows: int = EXACT_ROWS
    rerank_rows: int = 2_000
    keyword_candidates: int = 200

    def __post_init__(self) -> None:
        parts = self.text_search_config.split(".")
        if not (1 <= len(parts) <= 2 and all(p.isidentifier() for p in parts)):
            raise ConfigurationError(
                f"text_search_config= must be a configuration name such as 'english', "
                f"not {self.text_search_config!r}"
            )
        for table, spec in self.vector_columns.items():
            if not (
                isinstance(spec, tuple)
                and len(spec) == 2
                and all(isinstance(s, str) and s for s in spec)
            ):
                raise ConfigurationError(
                    f"vector_columns[{table!r}] must be (column, model_id), not {spec!r}"
                )
        for name in ("exact_rows", "rerank_rows", "keyword_candidates"):
            value = getattr(self, name)
            if type(value) is not int or value <= 0:
                raise ConfigurationError(f"{name}= must be a positive int, not {value!r}")


class RowVectors:
    """Row vectors embedded in process, cached by the SHA-256 of the text, its columns and the
    model (at most 20,000; least recently used first): the degraded semantic leg's."""

    def __init__(self) -> None:
        self._cache: LRUCache[bytes, array[float]] = LRUCache(_CACHE_ENTRIES)
        self._lock = threading.Lock()

    def vectors(
        self, texts: Mapping[Any, str], columns: Sequence[str], embedder: Embedder
    ) -> dict[Any, Vector]:
        """Each row's vector, from the cache or embedded now (rows without text have none)."""
        out: dict[Any, Vector] = {}
        missing: dict[bytes, list[Any]] = {}
        pending: dict[bytes, str] = {}
        with self._lock:
            for key, text in texts.items():
                if not text:
                    continue
                digest = hashlib.sha256(
                    text_hash(columns, text) + embedder.model_id.encode()
                ).digest()
                cached = self._cache.get(digest)
                if cached is not None:
                    if cached:  # an empty array: the text has no direction
                        out[key] = tuple(cached)
                else:
                    missing.setdefault(digest, []).append(key)
                    pending[digest] = text
        digests = list(pending)
        for start in range(0, len(digests), 256):
            chunk = digests[start : start + 256]
            made = embedder.embed_rows([pending[d] for d in chunk])
            with self._lock:
                for digest, vec in zip(chunk, made, strict=True):
                    self._cache[digest] = array("d", vec or ())
                    if vec is not None:
                        for key in missing[digest]:
                            out[key] = vec
        return out


def at_least(version: str | None, major: int, minor: int) -> bool:
    """Whether an extension version such as ``0.8.1`` is at least ``major.minor``."""
    try:
        parts = [int(p) for p in (version or "").split(".")[:2]]
    except ValueError:
        return False
    return len(parts) == 2 and (parts[0], parts[1]) >= (major, minor)


def vector_literal(vector: Sequence[float]) -> str:
    return "[" + ",".join(repr(float(v)) for v in vector) + "]"


def parse_vector(text: str) -> Vector:
    return tuple(float(v) for v in text.strip("[]").split(","))


def by_cosine(query: Vector, vectors: Mapping[Any, Sequence[float]]) -> list[Any]:
    """Keys by cosine similarity (vectors are unit length: a dot product), best first, then key."""
    scored = [
        (math.fsum(a * b for a, b in zip(query, v, strict=True)), k) for k, v in vectors.items()
    ]
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [k for _, k in scored]


#: The smallest ``hnsw.ef_search`` a scan runs with. The feedback step's scan asks for 5 rows:
#: at pgvector's default 40 its top 5 were approximate on the relevance corpus (many near-equal
#: vectors), the refined query moved elsewhere, and the leg's recall@100 fell from 0.747 to
#: 0.718 against the exact 0.751 (messages, docs/relevance.md); 400 is also the peer's setting.
EF_SEARCH_FLOOR = 400


def ef_search(limit: int) -> int:
    """``hnsw.ef_search`` for a scan of ``limit`` rows (pgvector accepts 1 to 1,000)."""
    return min(1000, max(EF_SEARCH_FLOOR, limit))


#: The smallest ``hnsw.ef_search`` of the semantic leg's own scan (after the feedback step).
#: Its order is fused by rank, so what matters is the depth it returns, not the exactness of
#: its top 5; an iterative scan returns that depth whatever ``ef_search`` is. At 100,000 rows
#: ``ef_search`` 200 found 0.967 of the exact 200 nearest against 0.979 at 400, in 1.7 ms
#: against 2.9 ms.
LEG_EF_SEARCH_FLOOR = 200


def leg_ef_search(depth: int) -> int:
    """``hnsw.ef_search`` for the semantic leg's own scan of ``depth`` rows."""
    return min(1000, max(LEG_EF_SEARCH_FLOOR, depth))


#: The rows an unfiltered search's one HNSW scan keeps for its feedback step and its semantic leg
#: (:meth:`~persistence.backends.postgres.search.PostgresSearch._pooled`; the Supabase
#: function's alike): the query's 400 nearest (``ef_search`` finds as many) hold
#: the moved query's first 100 well enough that P@10 on the labelled set went from 0.747 to
#: 0.748 (200 rows: 0.746; 100: 0.743).
POOL_ROWS = 400
