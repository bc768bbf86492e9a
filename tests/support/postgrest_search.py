"""A stand-in for the owner's ranking function (docs/search-supabase.md) in the PostgREST
emulator: the same parameters and answer shape, ranked by the memory backend's exact search over
the rows matching the ``filters`` object. The real function is tested on PostgreSQL 18."""

from __future__ import annotations

import json
from typing import Any

from persistence import MemoryStore
from persistence.backends.memory.search import search_rows, vector_cache
from persistence.search import SearchMode, SearchRequest
from persistence.search.embedder import Embedder
from tests.support.postgrest import RpcFunction

__all__ = ["ARGUMENTS", "ranking_function"]

#: The template's parameter names.
ARGUMENTS = frozenset(
    {
        "query_text",
        "query_terms",
        "query_embedding",
        "query_model",
        "filters",
        "match_mode",
        "match_count",
        "match_offset",
        "weights",
    }
)


def ranking_function(
    store: MemoryStore,
    table: str,
    text_columns: tuple[str, ...],
    embeddings: Any,
    *,
    filterable: tuple[str, ...] | None = None,
) -> RpcFunction:
    """``search_<table>`` over ``store``; the query is embedded by ``embeddings`` when the call
    carries ``query_embedding``. With ``filterable`` it filters by those columns alone, says so
    in its comment and refuses others, as the generated function does; without, by any column,
    as the first template did."""
    embedder = Embedder(embeddings)

    def body(params: dict[str, str]) -> list[dict[str, Any]]:
        filters = json.loads(params.get("filters", "{}"))
        if not isinstance(filters, dict):
            raise ValueError("filters must be a JSON object")
        if filterable is not None and not set(filters) <= set(filterable):
            raise ValueError("filters may name only the columns this function filters by")
        json.loads(params.get("query_terms", "[]"))
        mode = SearchMode(params.get("match_mode", "hybrid"))
        with_vector = "query_embedding" in params
        if mode is SearchMode.HYBRID and not with_vector:
            mode = SearchMode.KEYWORD
        rows = [
            row
            for row in store.rows(table)
            if all(row.get(column) == value for column, value in filters.items())
        ]
        # A text without words is a valid call (the legs rank nothing); "-" has no words either.
        request = SearchRequest(
            params["query_text"].strip() or "-",
            mode,
            int(params["match_count"]),
            int(params["match_offset"]),
        )
        result = search_rows(
            table,
            rows,
            request,
            text_columns,
            embedder if with_vector else None,
            project=dict,
            cache=vector_cache(store),
        )
        return [
            {
                "id": hit.row["id"],
                "score": hit.score,
                "keyword_rank": hit.ranks.get("keyword"),
                "trigram_rank": hit.ranks.get("trigram"),
                "semantic_rank": hit.ranks.get("semantic"),
                "total_count": result.total_count,
            }
            for hit in result.hits
        ]

    said: dict[str, Any] = {"columns": text_columns}
    if filterable is not None:
        said["filters"] = filterable
    comment = "Ranked search for the read-only facade\n" + json.dumps(said)
    return RpcFunction(ARGUMENTS, body, comment)
