"""The steps of one :class:`~rag_agent.RAGAgent` call, over the agent's parts.

:meth:`Pipeline.run` is the pipeline of ``RAGAgent.run``: input checks and the page window
(clamped here, once), filters from rules or the extraction hook, the cached read, reformulations,
the rate-limited fallback, and the envelope (:func:`~rag_agent.envelope.assemble.assemble`, through
:meth:`Pipeline.finish` alone). :meth:`Pipeline.read` is the cached read alone, for
``RAGAgent.read``. Both return an envelope for bad input or a failing backend; an unexpected
exception is left to the agent, which turns it into an error envelope too.

The steps are written once, as generators (``run_steps``, ``read_steps``, ``aggregate_steps``) that
yield a :class:`~rag_agent.runtime.effects.Call` for each read, count, aggregate and model call:
:meth:`Pipeline.run` performs them blocking, :meth:`Pipeline.arun` awaits them (see
:mod:`rag_agent.runtime.effects`), so ``RAGAgent.run`` and ``RAGAgent.arun`` share every check and
step.

The run, read and aggregate steps are here; the steps they share are mixins over the agent's
parts (:class:`~rag_agent.pipeline.parts.PipelineParts`): understanding and extraction
(:mod:`rag_agent.pipeline.understanding_step`), the cached read, count, aggregate and reformulations
(:mod:`rag_agent.pipeline.retrieval`), and the fallback (:mod:`rag_agent.pipeline.fallback_step`).

Thread-safety: a ``Pipeline`` holds no state of its own beyond the agent's parts (facade, cache,
limiter, hooks), all thread-safe; each call keeps its state in its own ``Outcome``.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from persistence import (
    Filter,
    InvalidQueryError,
    Order,
    Query,
    ReadOnlyPersistenceFacade,
    brief_repr,
)
from persistence.steps import adrive, drive
from persistence.vocabulary import SchemaVocabulary
from rag_agent.conversation import Conversation
from rag_agent.conversation.followup import FollowUp
from rag_agent.envelope import ContextInfo, Envelope, TraceInfo
from rag_agent.envelope.assemble import (
    Outcome,
    applied_filters,
    ignored_parts,
    shown_filters,
    source_of,
)
from rag_agent.hooks import FallbackRunner
from rag_agent.pipeline.aggregating import DEFAULT_METRICS, aggregate_into
from rag_agent.pipeline.company_link import company_links, similar_link_attempt
from rag_agent.pipeline.conversation_step import (
    follow_up,
    merged,
    remember,
    selection_condition,
)
from rag_agent.pipeline.fallback_step import FallbackStep
from rag_agent.pipeline.parts import _Page, _sequence
from rag_agent.pipeline.plan_memo import Plan, PlanMemo, plan_key
from rag_agent.pipeline.ranking import text_conditions
from rag_agent.pipeline.related import checked_includes, resolve_words
from rag_agent.pipeline.related_values import related_values
from rag_agent.pipeline.retrieval import RetrievalSteps
from rag_agent.pipeline.understanding_step import UnderstandingSteps
from rag_agent.runtime.cache import QueryCache
from rag_agent.runtime.deadline import LLMDeadline
from rag_agent.runtime.effects import PREPARE, Steps, perform, perform_async
from rag_agent.runtime.ratelimit import RateLimiter
from rag_agent.runtime.trace import Trace, traced_perform, traced_perform_async, tracing
from rag_agent.settings import RAGSettings
from rag_agent.specs import Condition
from rag_agent.understanding.conditions import query_filters_view
from rag_agent.understanding.filters import MAX_TEXT_LENGTH
from rag_agent.understanding.request import (
    DEFAULT_TABLE,
    ConditionExtractor,
    apply_conditions,
    explicit_conditions,
)

__all__ = ["Pipeline"]


@dataclass(frozen=True, slots=True)
class Pipeline(UnderstandingSteps, RetrievalSteps, FallbackStep):
    """The agent's parts, and the steps of a call over them."""

    facade: ReadOnlyPersistenceFacade
    settings: RAGSettings
    cache: QueryCache
    limiter: RateLimiter
    extractor: ConditionExtractor | None
    fallback: FallbackRunner | None
    now: Callable[[], dt.datetime]
    #: Plans of questions asked before (rag_agent.pipeline.plan_memo): never a row, never a result.
    plans: PlanMemo = field(default_factory=PlanMemo)

    def run(
        self,
        log: Any,
        *args: Any,
        conversation: Conversation | None = None,
        trace: bool = False,
    ) -> Envelope:
        """Steps 1 to 6 for ``RAGAgent.run`` (the arguments of :meth:`run_steps`), blocking;
        with ``trace``, each step timed into ``metadata.trace``."""
        recorder = Trace() if trace else None
        answer = functools.partial(perform, self)
        steps = self.run_steps(log, *args, conversation=conversation)
        with tracing(recorder):
            if recorder is None:
                return drive(steps, answer)
            return _traced(drive(steps, traced_perform(answer, recorder)), recorder)

    async def arun(
        self,
        log: Any,
        *args: Any,
        conversation: Conversation | None = None,
        trace: bool = False,
    ) -> Envelope:
        """Steps 1 to 6 for ``RAGAgent.arun``: the same steps, their I/O awaited."""
        recorder = Trace() if trace else None
        answer = functools.partial(perform_async, self)
        steps = self.run_steps(log, *args, conversation=conversation)
        with tracing(recorder):
            if recorder is None:
                return await adrive(steps, answer)
            envelope = await adrive(steps, traced_perform_async(answer, recorder))
            return _traced(envelope, recorder)

    def run_steps(
        self,
        log: Any,
        text: str,
        table: str | None,
        explicit: object,
        page: _Page,
        count_only: bool | None = None,
        include: object = None,
        *,
        conversation: Conversation | None = None,
    ) -> Steps[Envelope]:
        """Steps 1 to 6 for ``RAGAgent.run``; arguments are checked here, not trusted.

        ``table`` ``None`` means the table the text names, else ``leads``; ``explicit`` is
        ``None`` or the caller's conditions; ``page`` is ``(limit, offset, include_raw)`` as the
        caller gave them; ``include`` ``None`` means the related rows the text asks for. With a
        ``conversation`` the text is read against its last answer, and the run appends a turn.
        """
        outcome = Outcome(source_of(table if table is not None else DEFAULT_TABLE))
        follow = FollowUp(text=text if isinstance(text, str) else "")
        try:
            if conversation is not None and not isinstance(conversation, Conversation):
                raise InvalidQueryError(
                    "conversation must be a rag_agent.Conversation "
                    f"(see RAGAgent.conversation), not {type(conversation).__name__}",
                    field="conversation",
                )
            if not isinstance(text, str):
                raise InvalidQueryError(
                    f"text must be a str, not {type(text).__name__}", field="text"
                )
            if len(text) > self.settings.max_question_chars:
                # Refused before anything reads, logs or redacts it: the cost of a refusal is
                # the bound's, not the text's.
                raise InvalidQueryError(
                    f"the question is {len(text)} characters; at most "
                    f"{self.settings.max_question_chars} (RAG_MAX_QUESTION_CHARS)",
                    field="text",
                )
            if count_only is not None and type(count_only) is not bool:
                raise InvalidQueryError("count_only must be a bool", field="count_only")
            given = None if explicit is None else explicit_conditions(explicit)
            asked = None if include is None else checked_includes(include)
            window, include_raw = self._page(page)
            if table is not None:
                table = self.facade.policy.check_read(table, "run")
        except Exception as exc:
            envelope = self._refuse(log, outcome, exc)
            if isinstance(conversation, Conversation) and isinstance(text, str):
                remember(conversation, text[:MAX_TEXT_LENGTH], envelope, follow, None, "")
            return envelope

        # Only the prefix is ever read: no question needs more, and the LLM steps would otherwise
        # pay for (and be steered by) an arbitrarily long text.
        text = text[:MAX_TEXT_LENGTH]
        checked_table = table or DEFAULT_TABLE
        # One deadline for every model call of this run: extraction and the fallback share it.
        deadline = LLMDeadline(self.settings.llm_deadline_s)
        history = () if conversation is None else conversation.history()
        asked_topic = ""
        try:
            yield PREPARE
            # Learned (or taken from the facade's cache) as a call, so an awaited run learns it
            # off the event loop.
            vocabulary = yield from self.learned_vocabulary()
            follow = follow_up(
                text, conversation, table, given, self.now(), vocabulary,
                self.facade.tables(), self.settings.synonyms,
            )  # fmt: skip
            if follow.kind == "page" and follow.offset is not None:
                # The previous query's window moved; its page size unless the caller gave one.
                asked_limit = page[0] if page[0] is not None else follow.limit
                window = self._window(asked_limit, follow.offset)
            request, checked_table, applied, refused = yield from self._plan(
                log, outcome, deadline, text, table, given, count_only, vocabulary, follow, history
            )
            if follow.selection is not None:
                # "their conversations": the rows related to the previous answer's rows.
                related_to = yield from selection_condition(self.facade, follow, checked_table)
                more, more_refused = apply_conditions(self.facade, checked_table, (related_to,))
                applied, refused = applied + more, refused + more_refused
            asked_topic = request.topic
            # "inquiries from Globex": a company read through the table the rows refer to.
            linked, request_ignored = yield from company_links(
                self.facade, checked_table, request.ignored, applied
            )
            if linked:
                more, more_refused = apply_conditions(self.facade, checked_table, linked)
                applied, refused = applied + more, refused + more_refused
            # "leads of software clients": a related table's condition read through the keys.
            through, not_through = yield from related_values(
                self.facade, checked_table, request.through
            )
            if through:
                more, more_refused = apply_conditions(self.facade, checked_table, through)
                applied, refused = applied + more, refused + more_refused
            request_ignored = (*request_ignored, *not_through)
            related, unrelated = (
                (asked, ())
                if asked is not None
                else (resolve_words(self.facade, checked_table, request.include))
            )
            refused_parts = tuple(part for _, part in refused)
            outcome.ignored = ignored_parts(request_ignored + refused_parts + unrelated)
            outcome.count_only = request.count_only
            unusable = [part for condition, part in refused if condition.source == "tool"]
            if unusable:
                # A caller's own argument is what was asked: running the rest of the query
                # without it would answer another question.
                raise InvalidQueryError(
                    "explicit filter not applied: "
                    + "; ".join(f"{part.text}: {part.reason}" for part in unusable),
                    field="filters",
                )
            if given is not None and not applied:
                raise InvalidQueryError(
                    "at least one filter is needed and none could be applied "
                    "(see metadata.ignored): an unfiltered table is never returned",
                    field="filters",
                )
            log.debug(
                "rag.filters",
                table=checked_table,
                filters=query_filters_view(applied),
                sources=sorted({c.source for c in applied}),
                ignored=len(outcome.ignored),
            )
            # Rows are ranked by the topic, and by the words of "about …" substring conditions
            # on the table's text column, when the table can be ranked (rag_agent.pipeline.ranking).
            as_topic = text_conditions(self.text_column(checked_table), applied)
            words = " ".join([*(c.value for c in as_topic), request.topic]).strip()
            topic = self._topic(words, checked_table, related)
            as_topic = as_topic if topic else ()
            aggregated = bool(request.group_by or request.metrics)
            if aggregated:  # numbers per group, never rows: no filter is needed
                self._applied(outcome, applied)
                metrics = (*DEFAULT_METRICS, *request.metrics)
                yield from self._aggregate(
                    log, outcome, checked_table, applied, request.group_by, metrics
                )
            elif request.count_only and topic:  # "how many inquiries about refunds"
                rest = tuple(c for c in applied if c not in as_topic)
                self._applied(outcome, rest)
                yield from self._count_topic(log, outcome, checked_table, rest, topic)
            elif applied and request.count_only:
                self._applied(outcome, applied)
                yield from self._count(log, outcome, checked_table, applied)
            elif applied or (topic and not request.count_only):
                rest = tuple(c for c in applied if c not in as_topic)
                yield from self._retrieve(
                    log, outcome, checked_table, rest, window, include_raw, related, topic, as_topic
                )
            similar_link_attempt(outcome, linked)  # "inquiries from Globx": a reformulation
            # zero is a count's answer
            counted = ((bool(applied) or bool(topic)) and request.count_only) or aggregated
            if outcome.total_count == 0 and outcome.error is None and given is None and not counted:
                yield from self._fall_back(
                    log, outcome, text, checked_table, applied, window, include_raw, deadline,
                    history,
                )  # fmt: skip
        except Exception as exc:
            self.log_error(log, "rag.error", exc, step="query", table=checked_table)
            outcome.fail(exc)
        envelope = self._done(log, "rag.run", outcome, checked_table, window)
        remember(conversation, text, envelope, follow, checked_table, asked_topic)
        return envelope

    def _plan(
        self,
        log: Any,
        outcome: Outcome,
        deadline: LLMDeadline,
        text: str,
        table: str | None,
        given: tuple[Condition, ...] | None,
        count_only: bool | None,
        vocabulary: SchemaVocabulary | None,
        follow: FollowUp,
        history: tuple[str, ...] = (),
    ) -> Steps[Plan]:
        # The request and the conditions the facade applies: from the plan memo when the same
        # question was planned by the rules alone and the table's columns are unchanged
        # (rag_agent.pipeline.plan_memo), else understood and checked now (and memoised if it
        # may be). A follow-up is planned with what it carries over: never memoised.
        now = self.now()
        standalone = follow.kind == "fresh"
        key = (
            plan_key(follow.text, table, count_only, now, vocabulary)
            if given is None and standalone
            else None
        )
        plan = None if key is None else self.plans.get(key, self.facade)
        if plan is not None:
            outcome.source = source_of(plan.request.table)
            self.facade.policy.check_read(plan.request.table, "run")
            if follow.turn is not None or history:
                outcome.context = ContextInfo(kind="fresh")
            return plan
        request, by_rules = yield from self._understood(
            log, deadline, follow.text, follow.table or table, given, count_only, now, vocabulary,
            history,
        )  # fmt: skip
        if not standalone:
            request, outcome.context = merged(request, follow, count_only)
        elif history:
            outcome.context = ContextInfo(kind="fresh")
        outcome.source = source_of(request.table)
        checked_table = self.facade.policy.check_read(request.table, "run")
        memoised = key is not None and by_rules and self.plans.maxsize > 0
        types = self.facade.column_types(checked_table) if memoised else None
        applied, refused = apply_conditions(self.facade, checked_table, request.conditions)
        plan = Plan(request, checked_table, applied, refused)
        if key is not None and types is not None:
            self.plans.put(key, plan, types)
        return plan

    def read(self, log: Any, *args: Any) -> Envelope:
        """Step 3 alone for ``RAGAgent.read`` (the arguments of :meth:`read_steps`), blocking."""
        return drive(self.read_steps(log, *args), functools.partial(perform, self))

    async def aread(self, log: Any, *args: Any) -> Envelope:
        """Step 3 alone for ``RAGAgent.aread``, its I/O awaited."""
        return await adrive(self.read_steps(log, *args), functools.partial(perform_async, self))

    def read_steps(
        self,
        log: Any,
        table: str,
        filters: Iterable[Filter],
        columns: Sequence[str] | None,
        order: Iterable[Order | str],
        page: _Page,
        count_only: bool = False,
        include: object = (),
    ) -> Steps[Envelope]:
        """Step 3 alone, for ``RAGAgent.read``; arguments are checked here, not trusted."""
        outcome = Outcome(source_of(table))
        try:
            yield PREPARE
            window, include_raw = self._page(page)
            related = checked_includes(include)
            checked_table = self.facade.policy.check_read(table, "read")
            given = Query(checked_table, filters=_sequence(filters, "filters")).filters
            shown_filters(given)  # refuses two filters with the same column and operator
            query = Query(
                checked_table,
                filters=self.facade.check_filters(checked_table, given),
                columns=None if columns is None else _sequence(columns, "columns"),
                order=_sequence(order, "order"),
                limit=window[0],
                offset=window[1],
            )
            if type(count_only) is not bool:
                raise InvalidQueryError("count_only must be a bool", field="count_only")
            conditions = tuple(Condition(f.column, f.op, f.value, "tool") for f in query.filters)
            outcome.filters = shown_filters(query.filters)
            outcome.applied = applied_filters(conditions)
            outcome.count_only = count_only
        except Exception as exc:
            return self._refuse(log, outcome, exc)
        try:
            if count_only:
                yield from self._count(log, outcome, checked_table, conditions)
            else:
                result, hit = yield from self._query(
                    log, query, include_raw, outcome.filters, related
                )
                outcome.take(result, shared=self.cache.enabled)
                outcome.cache = "hit" if hit else "miss"
        except Exception as exc:
            self.log_error(log, "rag.error", exc, step="query", table=checked_table)
            outcome.fail(exc)
        return self._done(log, "rag.read", outcome, checked_table, window)

    def aggregate(self, log: Any, *args: Any) -> Envelope:
        """``RAGAgent.aggregate`` (the arguments of :meth:`aggregate_steps`), blocking."""
        return drive(self.aggregate_steps(log, *args), functools.partial(perform, self))

    async def aaggregate(self, log: Any, *args: Any) -> Envelope:
        """``RAGAgent.aaggregate``, its I/O awaited."""
        steps = self.aggregate_steps(log, *args)
        return await adrive(steps, functools.partial(perform_async, self))

    def aggregate_steps(
        self,
        log: Any,
        table: str,
        filters: Iterable[Filter],
        group_by: object,
        metrics: object,
        limit: object,
    ) -> Steps[Envelope]:
        """``facade.aggregate`` as an envelope, for ``RAGAgent.aggregate``; arguments checked
        here and by the facade."""
        outcome = Outcome(source_of(table))
        try:
            yield PREPARE
            checked_table = self.facade.policy.check_read(table, "aggregate")
            given = Query(checked_table, filters=_sequence(filters, "filters")).filters
            shown_filters(given)
            checked = self.facade.check_filters(checked_table, given)
            self._applied(
                outcome, tuple(Condition(f.column, f.op, f.value, "tool") for f in checked)
            )
            if limit is not None and type(limit) is not int:
                raise InvalidQueryError(
                    f"limit must be an int, not {brief_repr(limit)}", field="limit"
                )
            yield from aggregate_into(
                outcome, facade=self.facade, cache=self.cache, now=self.now, log=log,
                table=checked_table, filters=checked, group_by=group_by, metrics=metrics,
                limit=limit,
            )  # fmt: skip
        except Exception as exc:
            self.log_error(log, "rag.error", exc, step="aggregate", table=table)
            outcome.fail(exc)
        return self.finish(outcome)


def _traced(envelope: Envelope, trace: Trace) -> Envelope:
    """``envelope`` with ``metadata.trace``: the run's steps and its total time, measured now."""
    info = TraceInfo.model_validate(trace.finish())
    return envelope.model_copy(
        update={"metadata": envelope.metadata.model_copy(update={"trace": info})}
    )
