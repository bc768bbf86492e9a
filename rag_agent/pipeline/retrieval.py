"""The retrieval steps of a pipeline: the cached read, the count, the aggregate, reformulations."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from persistence import Include, Query, UnsupportedOperatorError
from persistence.search import MAX_K
from rag_agent.envelope import ReformulationAttempt
from rag_agent.envelope.assemble import Outcome, PageResult, ignored_parts, page_result
from rag_agent.pipeline.aggregating import aggregate_into
from rag_agent.pipeline.parts import PipelineParts, _Window
from rag_agent.pipeline.ranking import CannotRank, cached_ranked_page, rankable, words_ranked
from rag_agent.pipeline.reformulation import relaxations
from rag_agent.pipeline.related import related_versions
from rag_agent.pipeline.similar import similar_company, swap_note, with_similar_company
from rag_agent.runtime.effects import Call, Steps
from rag_agent.runtime.trace import current_trace
from rag_agent.specs import Condition, Ignored
from rag_agent.understanding.conditions import query_filters_view


def _planned(table: str, conditions: tuple[Condition, ...], window: _Window) -> Query:
    # Built anew each time (microseconds): a memo keyed by the values would hold every value a
    # caller ever sent, outside any bound.
    filters = tuple(c.to_filter() for c in conditions)
    return Query(table, filters, limit=window[0], offset=window[1])


def _typed(value: Any) -> Any:
    # 1, 1.0 and True are equal and hash alike, but a backend may tell them apart.
    if isinstance(value, tuple):
        return tuple(map(_typed, value))
    return (type(value), value)


def _cache_key(query: Query, include_raw: bool, version: int) -> tuple[Any, ...]:
    # ``version`` is the table's data_version, read before the data: a write in this process
    # (or to a shared memory store) moves it, so no later run reads a page cached before it.
    filters = tuple((f.column, f.op, _typed(f.value)) for f in query.filters)
    window = (query.limit, query.offset)
    return (query.table, version, filters, query.columns, query.order, window, include_raw)


class RetrievalSteps(PipelineParts):
    """The read, count and aggregate steps: cached pages, ranked pages, reformulations."""

    __slots__ = ()

    def _aggregate(
        self,
        log: Any,
        outcome: Outcome,
        table: str,
        conditions: tuple[Condition, ...],
        group_by: tuple[str, ...],
        metrics: tuple[str, ...],
    ) -> Steps[None]:
        filters = tuple(c.to_filter() for c in conditions)
        yield from aggregate_into(
            outcome, facade=self.facade, cache=self.cache, now=self.now, log=log, table=table,
            filters=filters, group_by=group_by, metrics=metrics,
        )  # fmt: skip

    def _topic(self, topic: str, table: str, related: tuple[Include, ...]) -> str:
        # Rows are ranked by the topic when the table has text to rank by (related rows are
        # read by the plain path alone).
        return topic if topic and not related and rankable(self.facade, table) else ""

    def _retrieve(
        self,
        log: Any,
        outcome: Outcome,
        table: str,
        conditions: tuple[Condition, ...],
        window: _Window,
        include_raw: bool,
        related: tuple[Include, ...] = (),
        topic: str = "",
        as_topic: tuple[Condition, ...] = (),
    ) -> Steps[None]:
        def query(conditions: tuple[Condition, ...]) -> Steps[tuple[PageResult, bool]]:
            if (
                topic
            ):  # ranked by the topic, the conditions hard constraints (rag_agent.pipeline.ranking)
                return (
                    yield from cached_ranked_page(
                        self, log, table, topic, conditions, window, include_raw
                    )
                )
            planned = _planned(table, conditions, window)
            shown = query_filters_view(conditions)
            return (yield from self._query(log, planned, include_raw, shown, related))

        try:
            result, all_hits = yield from query(conditions)
        except CannotRank:
            # The backend cannot search: answered as without a topic (the "about …" substrings
            # filters again), never an unfiltered read.
            log.debug("rag.search", table=table, status="unsupported")
            conditions, topic = conditions + as_topic, ""
            if not conditions:
                return
            result, all_hits = yield from query(conditions)
        if topic and conditions and window[1] == 0 and not words_ranked(result):
            # No row the filters chose mentions the topic's words: the filtered answer stands,
            # and the words are reported rather than silently ranking nothing.
            log.debug("rag.search", table=table, status="no_row_mentions")
            outcome.ignored += ignored_parts([Ignored(topic, f"no row mentions {topic!r}")])
            topic = ""
            result, all_hits = yield from query(conditions)
        used = conditions
        if result.total_count == 0:
            tried, previous = 0, conditions
            roles = self.roles(table)
            for reason, planned in with_similar_company(relaxations(conditions, roles)):
                if tried >= self.settings.reformulation_max_attempts:
                    break
                if planned is None:  # similar_company: looked up now, only if still needed
                    planned = yield from similar_company(table, previous, roles.company)
                    if planned is None:
                        continue
                else:
                    previous = planned
                relaxed, tried = planned, tried + 1
                attempt, hit = yield from query(relaxed)
                all_hits = all_hits and hit
                trace = current_trace()
                if trace is not None and not hit:  # the read it just made was this attempt's
                    trace.note_last(f"reformulation: {reason}")
                shown = query_filters_view(relaxed)
                outcome.attempts.append(
                    ReformulationAttempt(
                        reason=reason,  # type: ignore[arg-type]
                        filters=shown,
                        result_count=attempt.total_count,
                    )
                )
                log.debug(
                    "rag.reformulation",
                    reason=reason,
                    filters=shown,
                    result_count=attempt.total_count,
                )
                if attempt.total_count:
                    result, used = attempt, relaxed
                    outcome.fallback = "reformulation"
                    note = (
                        swap_note(conditions, relaxed, roles.company)
                        if reason == "similar_company"
                        else None
                    )
                    if note is not None:
                        outcome.ignored += ignored_parts([note])
                    break
        self._applied(outcome, used)
        outcome.take(result, shared=self.cache.enabled)
        outcome.cache = "hit" if all_hits else "miss"

    def _count(
        self, log: Any, outcome: Outcome, table: str, conditions: tuple[Condition, ...]
    ) -> Steps[None]:
        filters = tuple(c.to_filter() for c in conditions)
        typed = tuple((f.column, f.op, _typed(f.value)) for f in filters)
        key = ("count", table, self.facade.data_version(table), typed)
        cached: tuple[int, dt.datetime] | None = self.cache.get(key)
        outcome.cache = "miss" if cached is None else "hit"
        if cached is None:
            cached = ((yield Call("count", (table, filters))), self.now())
            self.cache.put(key, cached)
        outcome.total_count, outcome.retrieved_at = cached
        log.debug("rag.count", table=table, filters=outcome.filters, total_count=cached[0])

    def _count_topic(
        self,
        log: Any,
        outcome: Outcome,
        table: str,
        conditions: tuple[Condition, ...],
        topic: str,
    ) -> Steps[None]:
        """Count the rows matching ``conditions`` that mention ``topic``'s words (the keyword
        search's matches, at most MAX_K of them); when none does, the rows matching the
        conditions, and the words are reported. ``metadata.count_basis`` says which."""
        filters = [c.to_filter() for c in conditions]
        asked = {"filters": filters, "k": MAX_K, "offset": 0, "mode": "keyword"}
        try:
            result = yield Call("search", (table, topic), asked)
        except UnsupportedOperatorError:
            result = None
        mentions = 0
        if result is not None:
            mentions = sum(1 for hit in result.hits if hit.ranks.get("keyword") is not None)
        outcome.retrieved_at = self.now()
        if mentions:
            outcome.total_count = mentions
            bound = f" (at least: the search counts up to {MAX_K})" if mentions >= MAX_K else ""
            outcome.count_basis = f"rows mentioning {topic!r}{bound}"
        elif conditions:
            yield from self._count(log, outcome, table, conditions)
            outcome.ignored += ignored_parts([Ignored(topic, f"no row mentions {topic!r}")])
            outcome.count_basis = "rows matching the filters"
        else:
            outcome.total_count = 0
            outcome.count_basis = f"rows mentioning {topic!r}"
        log.debug("rag.count", table=table, basis=outcome.count_basis, total=outcome.total_count)

    def _query(
        self,
        log: Any,
        query: Query,
        include_raw: bool,
        shown: Mapping[str, Any],
        related: tuple[Include, ...] = (),
    ) -> Steps[tuple[PageResult, bool]]:
        """The page of ``query`` as records, from the cache if it holds it (and whether it did).

        ``shown`` is how the filters are logged; ``related`` the related rows each row carries.
        """
        key = _cache_key(query, include_raw, self.facade.data_version(query.table))
        if related:  # the children's tables' versions too: a new message is a new page
            key += (related, related_versions(self.facade, query.table, related))
        cached: PageResult | None = self.cache.get(key)
        if cached is not None:
            log.debug("rag.query", table=query.table, filters=shown, cache="hit")
            return cached, True
        page = yield Call(
            "read",
            (query.table, query.filters),
            {
                "columns": query.columns,
                "order": query.order,
                "limit": query.limit,
                "offset": query.offset,
                "include": related,
            },
        )
        result = page_result(
            page.rows,
            page.total_count,
            table=query.table,
            retrieved_at=self.now(),
            include_raw=include_raw,
            summary_threshold=self.settings.summary_threshold,
            related_capped=page.related_capped,
        )
        self.cache.put(key, result)
        log.debug(
            "rag.query",
            table=query.table,
            filters=shown,
            cache="miss",
            total_count=page.total_count,
            returned=len(result.records),
        )
        return result, False
