"""The conversation steps of a run: a question read against the last answer, and the turn kept.

Before the plan, :func:`follow_up` reads the question against the conversation's last answered
turn (:func:`rag_agent.conversation.followup.read_follow_up`), given the table the rules read in
it. After the rules read what is left of the question on the table chosen, :func:`merged` joins
the carried conditions, the topic and the count to theirs, and says so in ``metadata.context``.
A related read's keys are read by :func:`selection_condition` (through the foreign keys, as the
rules' related values are). At the end :func:`remember` appends the run's :class:`Turn`: the
conditions as applied (values in JSON form), the topic, the window and the ids of the records —
never a row.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Collection, Mapping, Sequence

from persistence import Filter, InvalidQueryError, Op, ReadOnlyPersistenceFacade
from persistence.vocabulary import SchemaVocabulary
from rag_agent.conversation import Conversation, Turn, TurnCondition
from rag_agent.conversation.followup import FollowUp, merge_conditions, read_follow_up
from rag_agent.conversation.history import MAX_TURN_IDS
from rag_agent.envelope import ContextInfo, Envelope, canonical_value
from rag_agent.pipeline.related_values import route, route_keys
from rag_agent.runtime.effects import Steps
from rag_agent.specs import Condition
from rag_agent.understanding.request import Request, describe, named_table

__all__ = ["follow_up", "merged", "remember", "selection_condition"]

_MAX_ERROR = 300


def follow_up(
    text: str,
    conversation: Conversation,
    table: str | None,
    given: object,
    now: dt.datetime,
    vocabulary: SchemaVocabulary | None,
    tables: Collection[str],
    synonyms: Mapping[str, tuple[str, ...]] | None = None,
) -> FollowUp:
    """How ``text`` builds on ``conversation``'s last answer; a question of its own when there
    is none, or when the caller named the table or gave conditions (their question is theirs)."""
    if table is not None or given is not None:
        return FollowUp(text=text)
    last = conversation.last
    if last is None:
        return read_follow_up(text, None, None, tables)
    return read_follow_up(text, last, named_table(text, now, vocabulary, synonyms), tables)


def merged(
    request: Request, follow: FollowUp, count_only: bool | None
) -> tuple[Request, ContextInfo]:
    """``request`` (the rules' reading of what is left of the question) joined to what
    ``follow`` carries over, and how, for ``metadata.context``."""
    conditions, dropped, not_negated = merge_conditions(follow, request.conditions)
    topic = request.topic or follow.topic
    asked_count = (
        request.count_only
        if count_only is not None
        else (request.count_only or bool(follow.count_only))
    )
    request = dataclasses.replace(
        request,
        conditions=conditions,
        topic=topic,
        count_only=asked_count,
        ignored=request.ignored + follow.ignored + not_negated,
    )
    carried = [describe(c) for c in conditions if c in follow.carried]
    if follow.selection is not None:
        table, rows = follow.selection
        carried.append(f"the {table} of turn {_number(follow)}: " + "; ".join(map(describe, rows)))
    if follow.topic and topic == follow.topic:
        carried.append(f"topic {follow.topic!r}")
    if follow.count_only and asked_count:
        carried.append("count only")
    carried.extend(follow.notes)
    context = ContextInfo(
        kind=follow.kind, turn=_number(follow), carried=carried, dropped=list(dropped)
    )
    return request, context


def _number(follow: FollowUp) -> int | None:
    return None if follow.turn is None else follow.turn.number


def selection_condition(
    facade: ReadOnlyPersistenceFacade, follow: FollowUp, table: str
) -> Steps[Condition]:
    """The condition on ``table`` that reads the rows related to the previous answer's (its
    selection), through the foreign keys; ``InvalidQueryError`` when it cannot be read."""
    assert follow.selection is not None
    start, conditions = follow.selection
    found = route(facade, start, table)
    if found is None:
        raise InvalidQueryError(
            f"the previous answer's {start} cannot be followed to {table}: no relation leads "
            "from one to the other",
            field="text",
        )
    filters: Sequence[Filter] = tuple(c.to_filter() for c in conditions)
    keys = yield from route_keys(start, filters, found)
    if isinstance(keys, str):
        raise InvalidQueryError(
            f"the previous answer's {start} cannot be followed to {table}: {keys}", field="text"
        )
    matched = found[2]
    return Condition(matched, Op.IN, keys, "context")


def remember(
    conversation: Conversation | None,
    text: str,
    envelope: Envelope,
    follow: FollowUp,
    table: str | None,
    topic: str,
) -> None:
    """Append the run's turn to ``conversation`` (nothing without one)."""
    if conversation is None:
        return
    meta = envelope.metadata
    error = None if meta.error is None else f"{meta.error.type}: {meta.error.message}"
    conditions = tuple(
        TurnCondition(column=f.column, op=f.op, value=canonical_value(f.value), source=f.source)
        for f in meta.filters or ()
    )
    answer = meta.answer.text if meta.answer is not None else None
    conversation.add(
        Turn(
            number=conversation.next_number(),
            question=text,
            kind=follow.kind,
            table=table if error is None else None,
            conditions=conditions,
            topic=topic,
            count_only=bool(meta.count_only),
            limit=meta.limit,
            offset=meta.offset or 0,
            total_count=meta.total_count,
            ids=tuple(
                canonical_value(r.provenance.row_id) for r in envelope.records[:MAX_TURN_IDS]
            ),
            fallback=meta.fallback == "agent",
            answer=answer,
            error=None if error is None else error[:_MAX_ERROR],
        )
    )
