"""What :meth:`ReadOnlyPersistenceFacade.search` takes and returns.

A search ranks the rows of one table that match every filter (filters are hard constraints inside
every leg, never applied to a ranked list) by one or two *legs*:

* ``keyword``: words of the text against the table's text columns (full-text rank on
  PostgreSQL, BM25 in memory) and, for short fields (names, companies, e-mails), trigram
  similarity, which also catches typos;
* ``semantic``: cosine similarity between the text's embedding and the rows' embeddings.

``hybrid`` fuses both by weighted reciprocal rank fusion (:mod:`persistence.search.fusion`).
When at least ``offset + k`` rows match the filters, exactly ``k`` come back, on every page.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from persistence.errors import InvalidQueryError, brief_repr

__all__ = [
    "DEFAULT_K",
    "LEG_DEPTH",
    "MAX_K",
    "MAX_OFFSET",
    "MAX_SEARCH_TEXT_LENGTH",
    "TIER_DEPTH",
    "TIER_ROWS",
    "SearchHit",
    "SearchMode",
    "SearchRequest",
    "SearchResult",
]

#: Rows a search returns when the caller names no ``k``.
DEFAULT_K = 10
#: The largest ``k`` a caller may ask for.
MAX_K = 100
#: The deepest page a search may reach: each leg ranks ``offset + k`` rows at least, so depth is
#: work; an agent paging past this wants a filter, not rank 2,000.
MAX_OFFSET = 1_000
#: Rows each leg ranks for the second tier of the fused order (below): the deepest page's end.
#: Fusion of legs cut at ``offset + k`` would differ from page to page (a row 15th in one leg and
#: 3rd in another is fused without its first rank on page 1, with it on page 2, and moves between
#: pages), so no cut depends on the page: the order is defined in two fixed tiers.
LEG_DEPTH = MAX_OFFSET + MAX_K
#: The first tier: the first :data:`TIER_ROWS` rows of the fusion of legs cut at
#: :data:`TIER_DEPTH` come first; every later row comes from the fusion of legs cut at
#: :data:`LEG_DEPTH`, without those (:func:`persistence.search.fusion.fuse_tiers`). A page ending
#: within the first tier (most pages: ``k`` 10, offset 0) ranks 100 rows per leg, not 1,100;
#: deeper pages rank both, and every page is a window of the same order.
TIER_ROWS = 100
#: Rows each leg ranks for the first tier: as many as the tier keeps. Twice as deep (200) ranked
#: a row a leg placed near its cut a little more surely, but the labelled set's P@10 did not
#: move, and a filtered HNSW scan runs until this many rows pass the filter: at 100,000 rows and
#: a filter of 10 % the semantic leg took about half the time at 100.
TIER_DEPTH = 100
#: Search text longer than this is refused before any backend sees it: no question is that long,
#: and every extra word is another term to rank.
MAX_SEARCH_TEXT_LENGTH = 1_000


#: What ``degraded`` says when a hybrid search ran without its semantic leg.
NO_EMBEDDINGS = "no embeddings are configured, so the semantic leg did not run"


class SearchMode(enum.StrEnum):
    """Which legs rank the rows."""

    HYBRID = "hybrid"
    KEYWORD = "keyword"
    SEMANTIC = "semantic"


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """A validated search: ``text`` (non-empty after stripping, bounded), ``mode``, ``k`` and
    ``offset`` within bounds. Filters and the table travel in the accompanying ``Query``.

    ``exact_total``: whether :attr:`SearchResult.total_count` must count every row matching the
    filters. By default a backend may stop counting past a bound of its own (at least the
    page's end plus one row; see :attr:`SearchResult.total_exact`): a ranked search's total
    is the filters' row count, which answers no question the ranking asks, and counting every
    match of a large table costs more than ranking it."""

    text: str
    mode: SearchMode = SearchMode.HYBRID
    k: int = DEFAULT_K
    offset: int = 0
    exact_total: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise InvalidQueryError(f"search text must be a string, not {type(self.text).__name__}")
        text = self.text.strip()
        if not text:
            raise InvalidQueryError("search text is empty")
        if len(text) > MAX_SEARCH_TEXT_LENGTH:
            raise InvalidQueryError(
                f"search text is {len(text)} characters; at most {MAX_SEARCH_TEXT_LENGTH} allowed"
            )
        object.__setattr__(self, "text", text)
        try:
            mode = SearchMode(self.mode)
        except ValueError:
            modes = ", ".join(m.value for m in SearchMode)
            raise InvalidQueryError(
                f"search mode {brief_repr(self.mode)} is not one of {modes}"
            ) from None
        object.__setattr__(self, "mode", mode)
        _check_count(self.k, "k", 1, MAX_K)
        _check_count(self.offset, "offset", 0, MAX_OFFSET)
        if type(self.exact_total) is not bool:
            raise InvalidQueryError(
                f"search exact_total must be a bool, not {brief_repr(self.exact_total)}"
            )

    @property
    def depth(self) -> int:
        """Where the page ``offset .. offset + k`` ends in the fused order.

        Legs are cut at :data:`TIER_DEPTH`, and at :data:`LEG_DEPTH` for a page ending past
        the first tier (never at this depth): the pages of one search are windows of one fused
        order, none overlapping, none skipping a row."""
        return self.offset + self.k

    def runnable_mode(self, has_embeddings: bool) -> tuple[SearchMode, str | None]:
        """The mode that can run and, when it is not the one asked for, why: a hybrid search
        without embeddings runs its keyword legs (every backend says so in the same words); a
        semantic one cannot run at all (the facade refuses it before any backend)."""
        if self.mode is SearchMode.HYBRID and not has_embeddings:
            return SearchMode.KEYWORD, NO_EMBEDDINGS
        if self.mode is SearchMode.SEMANTIC and not has_embeddings:
            raise InvalidQueryError(
                "semantic search needs embeddings: pass embeddings= to the factory "
                "or set RAG_EMBEDDINGS"
            )
        return self.mode, None


def _check_count(value: object, name: str, low: int, high: int) -> None:
    if type(value) is not int or not low <= value <= high:
        raise InvalidQueryError(
            f"search {name} must be an integer from {low} to {high}, not {brief_repr(value)}"
        )


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One ranked row: the row's own columns (``id`` included), its fused ``score`` (higher is
    better) and its 1-based rank in each leg that ranked it (``None`` where a leg did not)."""

    row: dict[str, Any]
    score: float
    ranks: Mapping[str, int | None] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True)
class SearchResult:
    """Rows in rank order, best first.

    ``mode`` is the mode that ran (a ``hybrid`` request without embeddings runs ``keyword``,
    and says so in ``degraded``); ``legs`` the legs that ranked, in fusion order; ``query`` the
    text the legs ranked by (the request's text with request framing removed); ``total_count``
    the number of rows matching the filters (the ranking's universe), exact when
    ``total_exact``, else a lower bound (a search not asked for ``exact_total`` may stop
    counting past the page's end plus one row at least, so it still exceeds
    ``offset + len(hits)`` exactly when more rows follow); ``degraded`` a sentence
    saying what could not run and what ran instead, or ``None``; ``corrections`` the
    ``(typed, corrected)`` words the search read as the table's own words before ranking
    (:mod:`persistence.search.spelling`), empty when none was.
    """

    hits: tuple[SearchHit, ...]
    mode: SearchMode
    legs: tuple[str, ...]
    query: str
    total_count: int
    degraded: str | None = None
    corrections: tuple[tuple[str, str], ...] = ()
    total_exact: bool = True

    @property
    def rows(self) -> list[dict[str, Any]]:
        """The ranked rows alone, best first."""
        return [hit.row for hit in self.hits]
