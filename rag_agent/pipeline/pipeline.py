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

One class, in this file: the run, read and aggregate steps, then the steps they share
(the page window and the envelope, understanding and extraction, the cached read, count,
aggregate and reformulations, the fallback), each section in the order a run takes them.

Thread-safety: a ``Pipeline`` holds no state of its own beyond the agent's parts (facade, cache,
limiter, hooks), all thread-safe; each call keeps its state in its own ``Outcome``.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from persistence import (
    Filter,
    Include,
    InvalidQueryError,
    Order,
    PersistenceError,
    Query,
    ReadOnlyPersistenceFacade,
    UnsupportedOperatorError,
    brief_repr,
)
from persistence.query import is_identifier
from persistence.search import MAX_K
from persistence.steps import adrive, drive
from persistence.vocabulary import SchemaVocabulary
from rag_agent.conversation import Conversation
from rag_agent.conversation.followup import FollowUp
from rag_agent.envelope import (
    ContextInfo,
    Envelope,
    ReformulationAttempt,
    TraceInfo,
    canonical_value,
)
from rag_agent.envelope.assemble import (
    MAX_ERROR_MESSAGE,
    Outcome,
    PageResult,
    applied_filters,
    assemble,
    backend_info,
    error_info,
    fallback_page,
    ignored_parts,
    page_result,
    shown_filters,
    source_of,
)
from rag_agent.hooks import FallbackRequest, FallbackResult, FallbackRunner
from rag_agent.pipeline.aggregating import DEFAULT_METRICS, aggregate_into
from rag_agent.pipeline.company_link import company_links, similar_link_attempt
from rag_agent.pipeline.conversation_step import (
    follow_up,
    merged,
    remember,
    selection_condition,
)
from rag_agent.pipeline.lookup_path import is_plain_lookup
from rag_agent.pipeline.plan_memo import Plan, PlanMemo, plan_key, shape_key
from rag_agent.pipeline.question_shape import (
    QuestionShape,
    ShapedPlan,
    is_inert,
    question_shape,
)
from rag_agent.pipeline.ranking import (
    CannotRank,
    cached_ranked_page,
    rankable,
    text_conditions,
    words_ranked,
)
from rag_agent.pipeline.read_request import ReadRequest, planned_read
from rag_agent.pipeline.reformulation import DEFAULT_ROLES, Roles, relaxations
from rag_agent.pipeline.related import (
    checked_includes,
    reachable_relations,
    related_versions,
    resolve_words,
)
from rag_agent.pipeline.related_values import related_values
from rag_agent.pipeline.similar import similar_company, swap_note, with_similar_company
from rag_agent.runtime.cache import QueryCache
from rag_agent.runtime.deadline import LLMDeadline, deadline_scope
from rag_agent.runtime.effects import PREPARE, Call, Steps, perform, perform_async
from rag_agent.runtime.ratelimit import RateLimiter, RateLimiterUnavailableError
from rag_agent.runtime.trace import (
    Trace,
    current_trace,
    timed,
    traced_perform,
    traced_perform_async,
    tracing,
)
from rag_agent.settings import RAGSettings
from rag_agent.specs import Condition, ExtractionRequest, Ignored, Understanding
from rag_agent.understanding.conditions import query_filters_view
from rag_agent.understanding.filters import MAX_TEXT_LENGTH
from rag_agent.understanding.request import (
    DEFAULT_TABLE,
    ConditionExtractor,
    Request,
    apply_conditions,
    column_infos,
    explicit_conditions,
    understand_request,
)
from rag_agent.understanding.rules.lexicon import lexicon_of

__all__ = ["Pipeline"]

_Window = tuple[int, int]
#: ``(limit, offset, include_raw)`` as the caller gave them, checked by ``Pipeline._page``.
_Page = tuple[int | None, int | None, bool]


#: The vocabulary's call: frozen and argument-free, so one instance serves every run.
_VOCABULARY = Call("vocabulary")


def _sequence(value: object, what: str) -> tuple[Any, ...]:
    # tuple("email") would split a name into letters: say what was expected instead.
    if isinstance(value, str | bytes | Mapping | Filter | Order) or not isinstance(value, Iterable):
        raise InvalidQueryError(
            f"{what} must be a sequence, not {type(value).__name__}", field=what
        )
    return tuple(value)


def _shown(table: object) -> object:
    """``table`` as logged: a name that is no identifier (a caller's 100 KB string) is ``"?"``,
    so a hostile name is never logged whole on every call."""
    return table if table is None or is_identifier(table) else "?"


def _log_filters(log: Any, outcome: Outcome, table: str, applied: tuple[Condition, ...]) -> None:
    """The ``rag.filters`` event: the conditions a run applies, where they came from."""
    if _debugging(log):
        log.debug(
            "rag.filters",
            table=table,
            filters=query_filters_view(applied),
            sources=sorted({c.source for c in applied}),
            ignored=len(outcome.ignored),
        )


def _debugging(log: Any) -> bool:
    """Whether ``log`` writes debug events: their arguments are built only then (a logger
    that cannot tell is assumed to write them)."""
    enabled = getattr(log, "is_enabled_for", None)
    return not callable(enabled) or bool(enabled(logging.DEBUG))


def _typed(value: Any) -> Any:
    # 1, 1.0 and True are equal and hash alike, but a backend may tell them apart.
    if isinstance(value, tuple):
        return tuple(map(_typed, value))
    return (type(value), value)


def _cache_key(
    query: Query | ReadRequest, include_raw: bool, version: int, exact_total: bool
) -> tuple[Any, ...]:
    # ``version`` is the table's data_version, read before the data: a write in this process
    # (or to a shared memory store) moves it, so no later run reads a page cached before it.
    # ``exact_total``: agents sharing one cache may count differently (RAG_EXACT_TOTALS).
    filters = tuple((f.column, f.op, _typed(f.value)) for f in query.filters)
    window = (query.limit, query.offset, exact_total)
    return (query.table, version, filters, query.columns, query.order, window, include_raw)


@dataclass(frozen=True, slots=True)
class Pipeline:
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
    #: Whether a plain lookup goes from its plan straight to its read
    #: (rag_agent.pipeline.lookup_path); off, every run takes the general steps, which answer the
    #: same envelope (what the equivalence tests compare it with).
    lookups: bool = True

    def run(
        self,
        log: Any,
        *args: Any,
        conversation: Conversation | None = None,
        trace: bool = False,
    ) -> Envelope:
        """Steps 1 to 6 for ``RAGAgent.run`` (the arguments of :meth:`run_steps`), blocking;
        with ``trace``, each step timed into ``metadata.trace``."""
        answer = functools.partial(perform, self)
        steps = self.run_steps(log, *args, conversation=conversation)
        if not trace:  # nothing to make current: no trace is read below
            return drive(steps, answer)
        recorder = Trace()
        with tracing(recorder):
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
        # Only a model reads the history: without one, none is written out.
        models = self.extractor is not None or self.fallback is not None
        history = conversation.history() if conversation is not None and models else ()
        asked_topic = ""
        try:
            yield PREPARE
            # Learned (or taken from the facade's cache) as a call, so an awaited run learns it
            # off the event loop.
            vocabulary = yield from self.learned_vocabulary()
            if conversation is not None:  # a question alone pays nothing for conversations
                follow = follow_up(
                    text, conversation, table, given, self.now(), vocabulary,
                    self.facade.tables(), self.settings.synonyms,
                )  # fmt: skip
            elif follow.text != text:  # cut to MAX_TEXT_LENGTH (else the one above serves)
                follow = FollowUp(text=text)
            if follow.kind == "page" and follow.offset is not None:
                # The previous query's window moved; its page size unless the caller gave one.
                asked_limit = page[0] if page[0] is not None else follow.limit
                window = self._window(asked_limit, follow.offset)
            plan = yield from self._plan(
                log, outcome, deadline, text, table, given, count_only, vocabulary, follow, history
            )
            request, checked_table, applied, refused = plan
            if (
                self.lookups
                and conversation is None
                and given is None
                and asked is None
                and is_plain_lookup(plan)
            ):
                return (
                    yield from self._look_up(
                        log, outcome, text, checked_table, applied, window, include_raw, deadline
                    )
                )
            if conversation is not None and outcome.context is None:
                outcome.context = ContextInfo(kind="fresh")  # every turn says how it was read
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
            _log_filters(log, outcome, checked_table, applied)
            # Rows are ranked by the topic, and by the words of "about …" substring conditions
            # on the table's text column, when the table can be ranked (rag_agent.pipeline.ranking).
            as_topic = text_conditions(self.text_column(checked_table, vocabulary), applied)
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

    def _look_up(
        self,
        log: Any,
        outcome: Outcome,
        text: str,
        table: str,
        applied: tuple[Condition, ...],
        window: _Window,
        include_raw: bool,
        deadline: LLMDeadline,
    ) -> Steps[Envelope]:
        """The rest of a run whose plan is a plain lookup (rag_agent.pipeline.lookup_path): the
        general steps' events and reads for such a plan, without the steps that have nothing to
        do for it. A read that finds no row is reformulated, then given to the fallback, as on
        the general path."""
        try:
            _log_filters(log, outcome, table, applied)
            yield from self._retrieve(log, outcome, table, applied, window, include_raw)
            if outcome.total_count == 0 and outcome.error is None:
                yield from self._fall_back(
                    log, outcome, text, table, applied, window, include_raw, deadline
                )
        except Exception as exc:
            self.log_error(log, "rag.error", exc, step="query", table=table)
            outcome.fail(exc)
        return self._done(log, "rag.run", outcome, table, window)

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
        trace = current_trace()
        started = 0.0 if trace is None else trace.timer()
        kept = None if key is None else self.plans.get(key, self.facade)
        plan = kept if isinstance(kept, Plan) else None
        # A question of a shape planned before ("show lead <uuid>"): that plan, with this
        # question's literals in its slots (rag_agent.pipeline.question_shape).
        memo_off = self.plans.maxsize == 0
        shape = None if key is None or plan is not None or memo_off else question_shape(follow.text)
        shaped = None if shape is None else shape_key(shape, table, count_only, now, vocabulary)
        if shape is not None and shaped is not None and self._inert(shape.literals, vocabulary):
            template = self.plans.get(shaped, self.facade)
            if isinstance(template, ShapedPlan):
                plan = template.fill(shape.literals)
        if plan is not None:
            if trace is not None:
                ms = (trace.timer() - started) * 1000
                trace.add({"step": "rules", "ms": ms, "note": "planned before (the plan memo)"})
            # No second check of the table: the memo asked the facade for its columns, which
            # checked it against the (immutable) allow-list.
            outcome.source = source_of(plan.request.table)
            return plan
        request, by_rules = yield from self._understood(
            log, deadline, follow.text, follow.table or table, given, count_only, now, vocabulary,
            history,
        )  # fmt: skip
        if not standalone:
            request, outcome.context = merged(request, follow, count_only)
        outcome.source = source_of(request.table)
        checked_table = self.facade.policy.check_read(request.table, "run")
        memoised = key is not None and by_rules and self.plans.maxsize > 0
        types = self.facade.column_types(checked_table) if memoised else None
        applied, refused = apply_conditions(self.facade, checked_table, request.conditions)
        plan = Plan(request, checked_table, applied, refused)
        if key is not None and types is not None:
            self.plans.put(key, plan, types)
            if shape is not None and shaped is not None:
                self._keep_shape(shape, shaped, plan, table, count_only, now, vocabulary, types)
        return plan

    def _inert(self, literals: tuple[str, ...], vocabulary: SchemaVocabulary | None) -> bool:
        return is_inert(literals, vocabulary, self.settings.synonyms)

    def _keep_shape(
        self,
        shape: QuestionShape,
        shaped: Hashable,
        plan: Plan,
        table: str | None,
        count_only: bool | None,
        now: dt.datetime,
        vocabulary: SchemaVocabulary | None,
        types: Mapping[str, Any],
    ) -> None:
        """Keep the plan of ``shape`` when it is provably this question's with other literals:
        its literals inert, and the plan the rules read from the shape's probe literals, with
        this question's substituted, equal to ``plan`` (else nothing is kept)."""
        probes = shape.probes()
        if not self._inert(shape.literals, vocabulary) or set(probes) & set(shape.literals):
            return
        asked: list[str] = []

        def note(text: str, _table: str) -> Understanding:
            asked.append(text)
            return Understanding()

        try:
            found = understand_request(
                shape.text(probes), table=table, explicit=None, count_only=count_only, now=now,
                extract=None if self.extractor is None else note, vocabulary=vocabulary,
                synonyms=self.settings.synonyms,
            )  # fmt: skip
            if asked:
                return  # the probe would go to the model: its plan is not the rules' alone
            checked_table = self.facade.policy.check_read(found.table, "run")
            applied, refused = apply_conditions(self.facade, checked_table, found.conditions)
        except Exception:  # the question's own plan stands: a memo never fails a run
            return
        template = ShapedPlan(Plan(found, checked_table, applied, refused), shape.kinds, probes)
        if template.fill(shape.literals) == plan:
            self.plans.put(shaped, template, types)

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

    # --- the page window, the vocabulary, the envelope -------------------------------------------

    def _page(self, page: _Page) -> tuple[_Window, bool]:
        # The checks run and read share: the page window (defaulted and clamped here alone) and
        # include_raw.
        limit, offset, include_raw = page
        window = self._window(limit, offset)
        if type(include_raw) is not bool:
            raise InvalidQueryError("include_raw must be a bool", field="include_raw")
        return window, include_raw

    def _window(self, limit: object, offset: object) -> _Window:
        settings = self.settings
        if limit is None:
            eff_limit = settings.default_limit
        elif type(limit) is int and limit >= 1:
            eff_limit = min(limit, settings.max_limit)
        else:
            raise InvalidQueryError(
                f"limit must be a positive int, not {brief_repr(limit)}", field="limit"
            )
        if offset is None:
            eff_offset = 0
        elif type(offset) is int and offset >= 0:
            eff_offset = offset
        else:
            raise InvalidQueryError(
                f"offset must be a non-negative int, not {brief_repr(offset)}", field="offset"
            )
        return eff_limit, eff_offset

    @staticmethod
    def _applied(outcome: Outcome, conditions: tuple[Condition, ...]) -> None:
        outcome.filters = query_filters_view(conditions)
        outcome.applied = applied_filters(conditions)

    def learned_vocabulary(self) -> Steps[SchemaVocabulary | None]:
        """The database's vocabulary as a pipeline call (an awaited run learns it in a worker
        thread); ``None`` when it cannot be learned."""
        try:
            learned: SchemaVocabulary = yield _VOCABULARY
        except PersistenceError:
            return None
        return learned

    def vocabulary(self) -> SchemaVocabulary | None:
        """The database's vocabulary, learned through the facade; ``None`` when it cannot be
        read (the rules then read with the sample's, and the facade still checks every name)."""
        try:
            return self.facade.vocabulary()
        except PersistenceError:
            return None

    def roles(self, table: str) -> Roles:
        """The company, e-mail and key columns of ``table`` the reformulations relax, from the
        database's vocabulary (:data:`DEFAULT_ROLES` when it cannot be learned)."""
        vocabulary = self.vocabulary()
        if vocabulary is None or vocabulary.table(table) is None:
            return DEFAULT_ROLES
        lexicon = lexicon_of(vocabulary, table, self.settings.synonyms)
        keys = tuple(c.name for c in lexicon.columns.values() if c.is_key)
        return Roles(lexicon.first("company"), lexicon.role("email"), keys)

    def text_column(self, table: str, vocabulary: SchemaVocabulary | None) -> str | None:
        """The subject-like text column of ``table`` (what "about …" searches), read with the
        ``vocabulary`` the run learned (``None``: it could not be learned)."""
        if vocabulary is None:
            return None
        return lexicon_of(vocabulary, table, self.settings.synonyms).first("text")

    # -- helpers -----------------------------------------------------------------------------

    def error_envelope(self, table: object, error: BaseException | str) -> Envelope:
        """An envelope with no records reporting ``error`` for a request about ``table``."""
        return self.finish(Outcome(source_of(table), error=error_info(error)))

    def finish(self, outcome: Outcome, window: _Window | None = None) -> Envelope:
        """The envelope of ``outcome``: the one place an agent's envelopes are built."""
        limit, offset = window if window is not None else (None, None)
        facade = self.facade
        backend = backend_info(facade.backend_name, facade.backend_database)
        return assemble(outcome, limit=limit, offset=offset, now=self.now, backend=backend)

    def _refuse(self, log: Any, outcome: Outcome, exc: Exception) -> Envelope:
        self.log_error(log, "rag.error", exc, step="input")
        outcome.fail(exc)
        return self.finish(outcome)

    def _done(
        self, log: Any, event: str, outcome: Outcome, table: str, window: _Window
    ) -> Envelope:
        envelope = self.finish(outcome, window)
        log.debug(
            event,
            table=_shown(table),
            total_count=outcome.total_count,
            records=len(outcome.records),
            cache=outcome.cache,
            fallback=outcome.fallback,
            error=None if outcome.error is None else outcome.error.type,
        )
        return envelope

    def log_error(self, log: Any, event: str, exc: BaseException, **context: Any) -> None:
        """Log ``exc`` at warning level; with ``RAG_DEBUG`` its traceback too."""
        if "table" in context:
            context["table"] = _shown(context["table"])
        log.warning(
            event,
            error_type=type(exc).__name__,
            error=str(exc)[:MAX_ERROR_MESSAGE],
            exc_info=exc if self.settings.debug else None,
            **context,
        )

    # --- understanding and extraction (steps 1 and 2) --------------------------------------------

    def _understood(
        self,
        log: Any,
        deadline: LLMDeadline,
        text: str,
        table: str | None,
        given: tuple[Condition, ...] | None,
        count_only: bool | None,
        now: dt.datetime | None = None,
        vocabulary: SchemaVocabulary | None = None,
        history: tuple[str, ...] = (),
    ) -> Steps[tuple[Request, bool]]:
        """The request, and whether the rules alone made it (no model was asked); read with
        ``vocabulary``, the database's as the run learned it (the sample's when ``None``)."""
        now = self.now() if now is None else now
        asked: list[tuple[str, str]] = []

        def note(text: str, table: str) -> Understanding:
            asked.append((text, table))
            return Understanding()

        def understood(extract: Any) -> Request:
            return understand_request(
                text, table=table, explicit=given, count_only=count_only, now=now,
                extract=extract, vocabulary=vocabulary, synonyms=self.settings.synonyms,
            )  # fmt: skip

        with timed("rules", table=table):
            request = understood(None if self.extractor is None else note)
        if not asked:
            return request, True
        found = yield from self._extract(log, deadline, *asked[0], history=history)
        return understood(lambda _text, _table: found), False

    def _extract(
        self,
        log: Any,
        deadline: LLMDeadline,
        text: str,
        table: str,
        history: tuple[str, ...] = (),
    ) -> Steps[Understanding]:
        # The extractor meters and caches its own model calls; it is told the table's allowed
        # columns, their kinds and operators, so its answer is constrained by the schema.
        assert self.extractor is not None
        try:
            request = ExtractionRequest(
                text=text,
                table=table,
                columns=column_infos(self.facade, table),
                tables=self.facade.tables(),
                now=self.now(),
                relations=reachable_relations(self.facade, table),
                history=history,
            )
            with deadline_scope(deadline):
                found = yield Call("extract", (request,))
            if not isinstance(found, Understanding):
                raise TypeError(f"the extractor returned {type(found).__name__}")
        except Exception as exc:  # an LLM failure only means "nothing understood"
            self.log_error(log, "rag.filters.llm_error", exc, step="filters")
            return Understanding()
        return found

    # --- read, count, aggregate, reformulations (steps 3 and 4) ----------------------------------

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
            planned = planned_read(table, conditions, window)
            # How the filters are logged: built only for a logger that writes debug events.
            shown = query_filters_view(conditions) if _debugging(log) else {}
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
        query: Query | ReadRequest,
        include_raw: bool,
        shown: Mapping[str, Any],
        related: tuple[Include, ...] = (),
    ) -> Steps[tuple[PageResult, bool]]:
        """The page of ``query`` as records, from the cache if it holds it (and whether it did).

        ``shown`` is how the filters are logged; ``related`` the related rows each row carries.
        """
        cache = self.cache
        # No key when the cache is off: its version and values would be read for nothing.
        key: tuple[Any, ...] | None = None
        if cache.enabled:
            version = self.facade.data_version(query.table)
            key = _cache_key(query, include_raw, version, self.settings.exact_totals)
            if related:  # the children's tables' versions too: a new message is a new page
                key += (related, related_versions(self.facade, query.table, related))
        cached: PageResult | None = None if key is None else cache.get(key)
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
                "exact_total": self.settings.exact_totals,
            },
        )
        result = page_result(
            page.rows,
            page.total_count,
            total_exact=page.total_exact,
            table=query.table,
            retrieved_at=self.now(),
            include_raw=include_raw,
            summary_threshold=self.settings.summary_threshold,
            related_capped=page.related_capped,
        )
        if key is not None:
            cache.put(key, result)
        log.debug(
            "rag.query",
            table=query.table,
            filters=shown,
            cache="miss",
            total_count=page.total_count,
            returned=len(result.records),
        )
        return result, False

    # --- the fallback (step 5) -------------------------------------------------------------------

    def _fall_back(
        self,
        log: Any,
        outcome: Outcome,
        text: str,
        table: str,
        conditions: tuple[Condition, ...],
        window: _Window,
        include_raw: bool = False,
        deadline: LLMDeadline | None = None,
        history: tuple[str, ...] = (),
    ) -> Steps[None]:
        # JSON-ready: the fallback shows the model what was tried (a date as its ISO text).
        filters = canonical_value(query_filters_view(conditions))
        if conditions and outcome.filters is None:
            self._applied(outcome, conditions)
        if self.fallback is None:
            outcome.fallback = "disabled"
            log.debug("rag.fallback", status="disabled", reason="no LLM fallback configured")
            return
        # Paging through a fallback's answer (``chat``'s ``next``) asks the model once; the same
        # words after other turns are another question.
        cache_key = ("fallback", table, text, history, self.facade.data_version(table))
        cached = self.cache.get(cache_key)
        if isinstance(cached, FallbackResult):
            log.debug("rag.fallback", status="cached")
            self._take_fallback(log, outcome, cached, window, include_raw)
            outcome.cache = "hit"
            return
        if deadline is not None and deadline.expired:
            outcome.fallback = "suppressed"
            log.info("rag.fallback", status="suppressed", reason="the run's LLM deadline passed")
            return
        try:
            allowed = self.limiter.try_acquire()
        except RateLimiterUnavailableError as exc:
            outcome.fallback = "suppressed"
            outcome.error = error_info(exc)
            self.log_error(log, "rag.fallback", exc, step="fallback", status="suppressed")
            return
        if not allowed:
            outcome.fallback = "suppressed"
            log.debug("rag.fallback", status="suppressed", reason="rate limit reached")
            return
        limit, offset = window
        request = FallbackRequest(
            text=text,
            table=table,
            filters=filters,
            limit=limit,
            offset=offset,
            max_steps=self.settings.fallback_max_steps,
            seconds_left=None if deadline is None else deadline.remaining(),
            history=history,
        )
        try:
            result = yield Call("fallback", (request,))
        except Exception as exc:  # a broken hook must not break run()
            result = FallbackResult(error=exc)
        if result.error is None:
            self.cache.put(cache_key, result)
        self._take_fallback(log, outcome, result, window, include_raw)

    def _take_fallback(
        self,
        log: Any,
        outcome: Outcome,
        result: FallbackResult,
        window: _Window,
        include_raw: bool,
    ) -> None:
        limit, offset = window
        page = fallback_page(
            result,
            limit=limit,
            offset=offset,
            now=self.now,
            summary_threshold=self.settings.summary_threshold,
            include_raw=include_raw,
        )
        outcome.take_fallback(result, page)
        if isinstance(result.error, BaseException):
            self.log_error(log, "rag.fallback", result.error, step="fallback", status="error")
        log.debug("rag.fallback", status="agent", records=page.total_count)


def _traced(envelope: Envelope, trace: Trace) -> Envelope:
    """``envelope`` with ``metadata.trace``: the run's steps and its total time, measured now."""
    info = TraceInfo.model_validate(trace.finish())
    return envelope.model_copy(
        update={"metadata": envelope.metadata.model_copy(update={"trace": info})}
    )
