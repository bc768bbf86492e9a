"""Ranked records: rows ordered by relevance to a topic, inside the structured filters.

``RAGAgent.run`` ranks when the request has a topic beyond its conditions (``Request.topic``,
"inquiries from customers who want to stop paying" → ``stop paying``) and the table has text to
rank by: :func:`ranked_page` asks :meth:`~persistence.ReadOnlyPersistenceFacade.search` for the
page, with the understood conditions as filters (hard constraints inside every leg), and gives
records with their provenance and a ``relevance`` (fused score, place, per-leg ranks), plus the
envelope's ``metadata.ranking`` (mode, query, legs, degraded). ``RAGAgent.search`` (the
``search_table`` tool) is the same step with the caller's own text and filters.

With filters, the topic orders the rows the filters chose and never narrows them: the rows its
words ranked come first, the other matching rows after, and ``total_count`` is the filters'
count (leftover words in a question never zero a correct answer). Without a filter only the
rows a leg ranked are an answer (never the table itself): a full page may have more after it, a
page with fewer than ``k`` rows is the last, and its ``total_count`` is the rows ranked.

Thread-safety: pure functions over the facade, which is thread-safe.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from persistence import (
    ColumnKind,
    Filter,
    InvalidQueryError,
    Op,
    Order,
    Query,
    ReadOnlyPersistenceFacade,
    UnsupportedOperatorError,
)
from persistence.search import MAX_K, MAX_SEARCH_TEXT_LENGTH, SearchHit, SearchMode, SearchResult
from rag_agent.envelope import Envelope, RankingInfo, Record, Relevance
from rag_agent.envelope.assemble import (
    Outcome,
    PageResult,
    applied_filters,
    page_result,
    shown_filters,
    source_of,
)
from rag_agent.runtime.cache import QueryCache
from rag_agent.runtime.effects import Call, Steps
from rag_agent.settings import RAGSettings
from rag_agent.specs import Condition
from rag_agent.understanding.rules.topic import topic_of


class Pipeline(Protocol):
    """What ranking needs of :class:`rag_agent.pipeline.pipeline.Pipeline` (which imports this
    module,
    so it is named by its shape, not imported)."""

    @property
    def facade(self) -> ReadOnlyPersistenceFacade: ...

    @property
    def settings(self) -> RAGSettings: ...

    @property
    def cache(self) -> QueryCache: ...

    @property
    def now(self) -> Callable[[], dt.datetime]: ...

    def _page(self, page: tuple[int | None, int | None, bool]) -> tuple[tuple[int, int], bool]: ...

    def _refuse(self, log: Any, outcome: Outcome, exc: Exception) -> Envelope: ...

    def _done(
        self, log: Any, event: str, outcome: Outcome, table: str, window: tuple[int, int]
    ) -> Envelope: ...

    def log_error(self, log: Any, event: str, exc: BaseException, **context: Any) -> None: ...


__all__ = [
    "DEFAULT_MODE",
    "CannotRank",
    "cached_ranked_page",
    "checked_sequence",
    "rankable",
    "ranked_page",
    "ranking_info",
    "search_steps",
    "text_conditions",
]

#: The mode a run ranks by: both legs where embeddings are configured, keyword alone otherwise
#: (the facade runs it and says so in ``degraded``).
DEFAULT_MODE = SearchMode.HYBRID

_set_attr = object.__setattr__


def checked_sequence(value: object, what: str) -> tuple[Any, ...]:
    """``value`` as a tuple; a string, a mapping or a single filter is refused (``tuple("email")``
    would split a name into letters)."""
    if isinstance(value, str | bytes | Mapping | Filter | Order) or not isinstance(value, Iterable):
        raise InvalidQueryError(
            f"{what} must be a sequence, not {type(value).__name__}", field=what
        )
    return tuple(value)


class CannotRank(Exception):
    """The backend cannot search: the run answers as it would without a topic."""


def rankable(facade: ReadOnlyPersistenceFacade, table: str) -> bool:
    """Whether ``table`` has a readable text column to rank rows by."""
    try:
        types = facade.column_types(table)
    except Exception:  # a table the policy refuses is reported by the read itself
        return False
    return any(ctype.kind is ColumnKind.TEXT for ctype in types.values())


def ranking_info(result: SearchResult) -> RankingInfo:
    """``metadata.ranking`` of a search result."""
    return RankingInfo(
        mode=result.mode.value,
        query=result.query,
        legs=list(result.legs),
        degraded=result.degraded,
        corrections=dict(result.corrections) or None,
    )


def ranked_page(
    table: str,
    topic: str,
    filters: Sequence[Filter],
    window: tuple[int, int],
    *,
    retrieved_at: dt.datetime,
    include_raw: bool,
    summary_threshold: int,
    mode: SearchMode | str = DEFAULT_MODE,
    exact_total: bool = True,
) -> Steps[PageResult]:
    """The page ``window`` (limit, offset) of ``table``'s rows matching ``filters``, ranked by
    ``topic``: records whose provenance carries a ``relevance``; ``ranking`` set.
    ``exact_total=False`` lets the search count the filters' rows only up to its bound (the
    page's ``total_exact`` is then false when the bound was reached).

    ``limit`` above the search's :data:`~persistence.search.MAX_K` is cut to it. Raises
    :class:`CannotRank` when the backend cannot search; any other error is the caller's to
    report (a bad mode, an offset past the search's bound, a failing backend).
    """
    limit, offset = window
    k = min(limit, MAX_K)
    text = _bounded(topic)

    def search(k: int, offset: int) -> Steps[tuple[SearchResult, tuple[SearchHit, ...]]]:
        asked = {
            "filters": filters, "k": k, "offset": offset, "mode": mode, "exact_total": exact_total,
        }  # fmt: skip
        try:
            result: SearchResult = yield Call("search", (table, text), asked)
        except UnsupportedOperatorError as exc:
            raise CannotRank(str(exc)) from exc
        if filters:
            # The filters chose the rows; the topic only orders them. A backend fills a page
            # with rows that merely match the filters (its k-rows rule): they belong to the
            # answer, after the rows the topic's words ranked.
            return result, result.hits
        # Without a filter only rows a leg ranked answer the words: the fill would hand out
        # the table itself.
        return result, tuple(h for h in result.hits if any(r is not None for r in h.ranks.values()))

    result, hits = yield from search(k, offset)
    # Counted by the search: a lower bound when it stopped counting (still past the page's end).
    exact = True
    if filters or len(hits) == k:
        total, exact = result.total_count, result.total_exact
    elif hits or offset == 0:  # a short page is the last (a keyword-only leg may rank no more)
        total = offset + len(hits)
    else:  # past the last ranked row, or nothing ranked at all: one row from the top tells
        total = offset if (yield from search(1, 0))[1] else 0
    page = page_result(
        (hit.row for hit in hits),
        max(total, offset + len(hits)) if total else 0,
        table=table,
        retrieved_at=retrieved_at,
        include_raw=include_raw,
        summary_threshold=summary_threshold,
        total_exact=exact,
    )
    records = _with_relevance(page.records, hits, offset)
    return dataclasses.replace(page, records=records, ranking=ranking_info(result))


def _bounded(topic: str) -> str:
    # The search refuses text past its bound; a topic is a few words, so a longer one is cut at
    # a word boundary rather than refused.
    if len(topic) <= MAX_SEARCH_TEXT_LENGTH:
        return topic
    return topic[:MAX_SEARCH_TEXT_LENGTH].rsplit(" ", 1)[0]


def _with_relevance(
    records: Sequence[Record], hits: Sequence[SearchHit], offset: int
) -> tuple[Record, ...]:
    # The records were built for this page alone and are not shared yet: each gets a provenance
    # with its relevance in place, as build_records sets its fields (a model_copy of the record
    # would turn its read-only fields into a plain dict).
    for place, (record, hit) in enumerate(zip(records, hits, strict=True), start=offset + 1):
        relevance = Relevance(score=hit.score, rank=place, ranks=dict(hit.ranks))
        provenance = record.provenance.model_copy(update={"relevance": relevance})
        _set_attr(record, "__dict__", {**record.__dict__, "provenance": provenance})
    return tuple(records)


def words_ranked(result: PageResult) -> bool:
    """Whether a ranked page holds a row that a leg ranked by the topic's words."""
    for record in result.records:
        relevance = record.provenance.relevance
        if relevance is not None and any(rank is not None for rank in relevance.ranks.values()):
            return True
    return False


def cached_ranked_page(
    pipeline: Pipeline,
    log: Any,
    table: str,
    topic: str,
    conditions: tuple[Condition, ...],
    window: tuple[int, int],
    include_raw: bool,
    mode: SearchMode | str = DEFAULT_MODE,
) -> Steps[tuple[PageResult, bool]]:
    """:func:`ranked_page` through the agent's cache (keyed by the table's data version, the
    filters, the topic, the mode and the window), and whether the cache held it."""
    filters = tuple(c.to_filter() for c in conditions)
    typed = tuple((f.column, f.op.value, type(f.value).__name__, repr(f.value)) for f in filters)
    version = pipeline.facade.data_version(table)
    # Agents sharing one cache may count differently (RAG_EXACT_TOTALS).
    exact_total = pipeline.settings.exact_totals
    key = ("search", table, version, typed, topic, str(mode), window, include_raw, exact_total)
    cached: PageResult | None = pipeline.cache.get(key)
    if cached is not None:
        log.debug("rag.search", table=table, cache="hit")
        return cached, True
    page = yield from ranked_page(
        table,
        topic,
        filters,
        window,
        retrieved_at=pipeline.now(),
        include_raw=include_raw,
        summary_threshold=pipeline.settings.summary_threshold,
        mode=mode,
        exact_total=exact_total,
    )
    if words_ranked(page) or not filters:  # else the filtered read answers (not kept twice)
        pipeline.cache.put(key, page)
    assert page.ranking is not None
    log.debug(
        "rag.search",
        table=table,
        cache="miss",
        mode=page.ranking.mode,
        legs=page.ranking.legs,
        degraded=page.ranking.degraded is not None,
        returned=len(page.records),
    )
    return page, False


def search_steps(
    pipeline: Pipeline,
    log: Any,
    table: str,
    text: object,
    filters: object,
    page: tuple[int | None, int | None, bool],
    mode: object,
) -> Steps[Envelope]:
    """``RAGAgent.search``: ``table``'s rows matching ``filters`` ranked by ``text``, as an
    envelope; arguments are checked here (and by the facade), never trusted."""
    outcome = Outcome(source_of(table))
    try:
        yield Call("prepare")  # the catalog the checks consult (loaded by the async facade)
        if not isinstance(text, str):
            raise InvalidQueryError(f"text must be a str, not {type(text).__name__}", field="text")
        if not isinstance(mode, str):
            raise InvalidQueryError(f"mode must be a str, not {type(mode).__name__}", field="mode")
        window, include_raw = pipeline._page(page)
        checked_table = pipeline.facade.policy.check_read(table, "search")
        given = Query(checked_table, filters=checked_sequence(filters, "filters")).filters
        shown_filters(given)  # refuses two filters with the same column and operator
        checked = pipeline.facade.check_filters(checked_table, given)
        conditions = tuple(Condition(f.column, f.op, f.value, "tool") for f in checked)
        outcome.filters = shown_filters(checked)
        outcome.applied = applied_filters(conditions)
    except Exception as exc:
        return pipeline._refuse(log, outcome, exc)
    try:
        # Agents pass whole requests: their framing is removed as from a run's (the text as
        # given when nothing but framing is left).
        topic = topic_of(text) or text
        result, hit = yield from cached_ranked_page(
            pipeline, log, checked_table, topic, conditions, window, include_raw, mode
        )
        outcome.take(result, shared=pipeline.cache.enabled)
        outcome.cache = "hit" if hit else "miss"
    except CannotRank as exc:
        outcome.fail(exc.__cause__ or exc)
    except Exception as exc:
        pipeline.log_error(log, "rag.error", exc, step="search", table=checked_table)
        outcome.fail(exc)
    return pipeline._done(log, "rag.search", outcome, checked_table, window)


def text_conditions(column: str | None, conditions: Iterable[Condition]) -> tuple[Condition, ...]:
    """The substring conditions a request's words made on ``table``'s text column ("inquiries
    about refunds" → ``subject icontains 'refunds'``): with a search, their words rank the
    rows instead (a substring misses "refund" and every row about refunds in other words).
    ``column`` is the table's subject-like text column. A condition the caller gave stays a
    filter."""
    return tuple(
        c
        for c in conditions
        if c.column == column and c.op is Op.ICONTAINS and c.source != "tool"
        and isinstance(c.value, str)
    )  # fmt: skip
