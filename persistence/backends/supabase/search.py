"""The Supabase backend's search: the owner's ranking function, else full-text candidates ranked
here, blocking or awaited."""

from __future__ import annotations

import asyncio
from typing import Any

from persistence.backends.supabase.postgrest.search import (
    EmbedQuery,
    EmbedRows,
    SearchStep,
    search_steps,
)
from persistence.backends.supabase.reads import _SupabaseReads
from persistence.query import Query
from persistence.search import SearchRequest, SearchResult
from persistence.search.embedder import Embedder
from persistence.steps import Steps, adrive, drive


class _SupabaseSearch(_SupabaseReads):
    """``search`` and ``asearch`` of the Supabase backend."""

    def search(
        self,
        query: Query,
        request: SearchRequest,
        text_columns: tuple[str, ...],
        embedder: Embedder | None,
    ) -> SearchResult:
        """Rank the rows matching ``query.filters`` by the owner's read-only ranking function,
        else by full-text candidates ranked here (see
        :mod:`~persistence.backends.supabase.postgrest.search`
        and docs/search-supabase.md)."""

        def perform(step: SearchStep) -> Any:
            if isinstance(step, EmbedQuery):
                return _embedder(embedder).embed_query(step.text)
            if isinstance(step, EmbedRows):
                return _embedder(embedder).embed_rows(step.texts)
            return self._client.perform(step)

        return drive(self._search_steps(query, request, text_columns, embedder), perform)

    async def asearch(
        self,
        query: Query,
        request: SearchRequest,
        text_columns: tuple[str, ...],
        embedder: Embedder | None,
    ) -> SearchResult:
        """:meth:`search` over ``httpx.AsyncClient``: the same steps; the query is embedded by
        the model's awaitable call, row texts in a worker thread."""

        async def perform(step: SearchStep) -> Any:
            if isinstance(step, EmbedQuery):
                return await _embedder(embedder).aembed_query(step.text)
            if isinstance(step, EmbedRows):
                return await asyncio.to_thread(_embedder(embedder).embed_rows, step.texts)
            return await self._client.aperform(step)

        return await adrive(self._search_steps(query, request, text_columns, embedder), perform)

    def _search_steps(
        self,
        query: Query,
        request: SearchRequest,
        text_columns: tuple[str, ...],
        embedder: Embedder | None,
    ) -> Steps[SearchStep, SearchResult]:
        base = self._filter_params(query.table, query.filters, "search")
        return search_steps(
            self._client,
            self._description,
            self._row_vectors,
            query,
            base,
            request,
            text_columns,
            embedder,
            page_size=self._page_size,
            count_mode=self._count_mode,
        )


def _embedder(embedder: Embedder | None) -> Embedder:
    # The steps ask for vectors only when the search was given an embedder.
    assert embedder is not None
    return embedder
