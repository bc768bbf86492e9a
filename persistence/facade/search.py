"""The facade's ``search`` and ``asearch``: which text columns a search may rank by, and the
checks before the backend's search."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import cast

from persistence.errors import InvalidQueryError, UnsupportedOperatorError
from persistence.facade.core import _BackendCall, _filters, _ReaderCore
from persistence.query import Filter, Query
from persistence.search import SearchMode, SearchRequest, SearchResult
from persistence.values.column_kinds import ColumnKind


class _Search(_ReaderCore):
    """``search`` and ``asearch``, checked by the core."""

    __slots__ = ()

    def search(
        self,
        table: str,
        text: str,
        *,
        filters: Iterable[Filter] = (),
        k: int = 10,
        offset: int = 0,
        mode: SearchMode | str = SearchMode.HYBRID,
    ) -> SearchResult:
        """The ``k`` rows of ``table`` matching all ``filters`` that best match ``text``, best
        first, from rank ``offset`` on (see :mod:`persistence.search`).

        Filters are hard constraints inside every leg: when at least ``offset + k`` rows match
        them, exactly ``k`` come back. Only text columns the policy allows are searched, and
        rows carry only allowed columns. Without embeddings, ``hybrid`` runs the keyword leg and
        says so in ``degraded``; ``semantic`` without embeddings is an ``InvalidQueryError``.

        >>> facade.search("inquiries", "customers who want to stop paying", k=5).rows
        """
        result: SearchResult = self._perform(
            self._search_call(table, text, filters, k, offset, mode)
        )
        return result

    async def asearch(
        self,
        table: str,
        text: str,
        *,
        filters: Iterable[Filter] = (),
        k: int = 10,
        offset: int = 0,
        mode: SearchMode | str = SearchMode.HYBRID,
    ) -> SearchResult:
        """:meth:`search`, awaited (a backend without an awaitable search runs in a worker
        thread)."""
        await self.aprepare()
        call = self._search_call(table, text, filters, k, offset, mode)
        result: SearchResult = await self._perform_async(call)
        return result

    def _search_call(
        self,
        table: str,
        text: str,
        filters: Iterable[Filter],
        k: int,
        offset: int,
        mode: SearchMode | str,
    ) -> _BackendCall:
        table = self.policy.check_read(table, "search")
        # SearchRequest validates the mode, turning a string into a SearchMode or refusing it.
        request = SearchRequest(text, cast(SearchMode, mode), k, offset)
        query, known = self._checked(Query(table, filters=_filters(filters)), "search")
        readable = self._policy_columns(table, known)
        if readable is not None:
            query = replace(query, columns=readable)
        types = self._known(table)[1]
        visible = set(types) if readable is None else set(readable)
        # A redacted column is not ranked by: its rank would tell what it holds.
        hidden = self.redaction.columns(table) if self.redaction is not None else {}
        # In table order whatever the policy: the keyword leg's text is these columns joined,
        # and an index on that expression (what doctor prints) serves it only in that order.
        text_columns = tuple(
            c
            for c, ctype in types.items()
            if c in visible and ctype.kind is ColumnKind.TEXT and c not in hidden
        )
        if not text_columns:
            raise InvalidQueryError(f"table {table!r} has no text column this search may rank by")
        request.runnable_mode(self.embedder is not None)  # refuses semantic without embeddings
        if not callable(getattr(self._backend(), "search", None)):
            raise UnsupportedOperatorError(
                f"backend {self._backend().name!r} cannot search",
                operator="search",
                backend=self._backend().name,
            )
        return _BackendCall("search", (query, request, text_columns, self.embedder))
