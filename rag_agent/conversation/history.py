"""A conversation: the bounded history of the questions asked and how each was answered.

A :class:`Conversation` is what makes "what about their conversations?" answerable: each run
given one reads the question against the last answer (:mod:`rag_agent.conversation.followup`)
and appends a :class:`Turn` — the table read, the conditions applied, the topic, the page and
the ids of the records shown — never the rows themselves. It is plain data, so a host keeps it
wherever it keeps state (a LangGraph checkpointer, an MCP session, a web session):
:meth:`Conversation.to_json` gives a JSON-ready ``dict``, :meth:`Conversation.from_json` reads
one back, validated and bounded, and the two answer the same follow-ups.

Nothing in a turn is trusted on the way back in: a turn's table, columns, values and ids are
checked by the facade like a caller's arguments whenever a follow-up uses them, so a tampered
conversation can ask no more than its holder could ask directly.

Thread-safety: one run at a time per conversation (a conversation is one person's or one
agent's); :meth:`Conversation.add` and :meth:`Conversation.reset` are atomic.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from persistence import InvalidQueryError, Op

__all__ = [
    "DEFAULT_MAX_HISTORY_TOKENS",
    "DEFAULT_MAX_TURNS",
    "MAX_TURN_IDS",
    "Conversation",
    "ConversationError",
    "Turn",
    "TurnCondition",
]

#: Turns a conversation keeps by default (``RAG_CONVERSATION_MAX_TURNS``): older ones are let go.
DEFAULT_MAX_TURNS = 20
#: Tokens of history shown to a model by default (``RAG_CONVERSATION_MAX_TOKENS``).
DEFAULT_MAX_HISTORY_TOKENS = 800
#: Ids of an answer's records a turn keeps (the longest page, ``RAG_MAX_LIMIT``'s default).
MAX_TURN_IDS = 500
_MAX_TURNS_BOUND = 200
_MAX_CONDITIONS = 32
_MAX_TEXT = 4096
_MAX_ANSWER = 2000
_CHARS_PER_TOKEN = 4  # a rough, model-independent estimate: the bound is a budget, not a tokenizer

Kind = Literal["fresh", "refine", "related", "item", "page"]


class ConversationError(InvalidQueryError):
    """A conversation that cannot be read back (malformed, or over its bounds)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TurnCondition(_Frozen):
    """A condition a turn applied, its value in JSON form (the facade coerces it again)."""

    column: str = Field(max_length=63)
    op: str = Field(max_length=16)
    value: Any = None
    source: str = Field(max_length=16)

    @field_validator("op")
    @classmethod
    def _an_operator(cls, op: str) -> str:
        return Op(op).value  # a ValueError names the operator: read back as ConversationError


class Turn(_Frozen):
    """One question and how it was answered: what a follow-up may build on."""

    number: int = Field(ge=1, description="1-based, counted over the whole conversation.")
    question: str = Field(max_length=_MAX_TEXT)
    kind: Kind = "fresh"
    table: str | None = Field(default=None, max_length=63)
    conditions: tuple[TurnCondition, ...] = Field(default=(), max_length=_MAX_CONDITIONS)
    topic: str = Field(default="", max_length=_MAX_TEXT)
    count_only: bool = False
    limit: int | None = Field(default=None, ge=1)
    offset: int = Field(default=0, ge=0)
    total_count: int = Field(default=0, ge=0)
    ids: tuple[Any, ...] = Field(default=(), max_length=MAX_TURN_IDS)
    fallback: bool = Field(default=False, description="Answered by the agent fallback.")
    answer: str | None = Field(default=None, max_length=_MAX_ANSWER)
    error: str | None = Field(default=None, max_length=_MAX_TEXT)

    @property
    def answered(self) -> bool:
        """Whether a follow-up can build on it: it read a table without an error."""
        return self.error is None and self.table is not None

    def summary(self) -> str:
        """One line for a model: the table, the count, the conditions (no row, no value read)."""
        if self.error is not None:
            return f"error: {self.error}"
        what = "counted" if self.count_only else "matched"
        parts = [f"{self.table}: {self.total_count} rows {what}"]
        if self.conditions:
            shown = "; ".join(f"{c.column} {c.op} {c.value!r}" for c in self.conditions)
            parts.append(f"conditions {shown}")
        if self.topic:
            parts.append(f"about {self.topic!r}")
        return ", ".join(parts)


class _Data(_Frozen):
    """The JSON form of a conversation (what :meth:`Conversation.to_json` writes)."""

    version: Literal[1] = 1
    id: str = Field(min_length=1, max_length=128)
    max_turns: int = Field(ge=1, le=_MAX_TURNS_BOUND)
    max_history_tokens: int = Field(ge=0, le=100_000)
    turns: tuple[Turn, ...] = Field(default=(), max_length=_MAX_TURNS_BOUND)


class Conversation:
    """A bounded history of questions and answers, for follow-up questions.

    Made by :meth:`rag_agent.RAGAgent.conversation` (with the agent's bounds) or directly, and
    passed to ``run``/``arun``::

        conversation = rag.conversation()
        rag.run("leads at Globex", conversation=conversation)
        rag.run("only the qualified ones", conversation=conversation)
        rag.run("what about their conversations?", conversation=conversation)

    ``max_turns`` turns are kept (the oldest let go first); ``max_history_tokens`` bounds the
    history a model is shown (:meth:`history`).
    """

    def __init__(
        self,
        *,
        id: str | None = None,
        max_turns: int = DEFAULT_MAX_TURNS,
        max_history_tokens: int = DEFAULT_MAX_HISTORY_TOKENS,
        turns: Iterable[Turn] = (),
    ) -> None:
        try:
            data = _Data(
                id=id or uuid.uuid4().hex,
                max_turns=max_turns,
                max_history_tokens=max_history_tokens,
                turns=tuple(turns),
            )
        except ValidationError as exc:
            raise ConversationError(_first_error(exc), field="conversation") from None
        self.id = data.id
        self.max_turns = data.max_turns
        self.max_history_tokens = data.max_history_tokens
        self._turns = list(data.turns[-data.max_turns :])
        self._next = max((t.number for t in self._turns), default=0) + 1
        self._lock = threading.Lock()

    @property
    def turns(self) -> tuple[Turn, ...]:
        """The turns kept, oldest first."""
        return tuple(self._turns)

    @property
    def last(self) -> Turn | None:
        """The last turn a follow-up can build on (errors are skipped), or ``None``."""
        for turn in reversed(self._turns):
            if turn.answered:
                return turn
        return None

    def next_number(self) -> int:
        """The number the next turn gets."""
        return self._next

    def add(self, turn: Turn) -> None:
        """Append ``turn`` (numbered by :meth:`next_number`); the oldest go past ``max_turns``."""
        with self._lock:
            self._turns.append(turn)
            self._next = max(self._next, turn.number + 1)
            del self._turns[: -self.max_turns]

    def reset(self) -> None:
        """Forget every turn (the conversation's id and bounds stay)."""
        with self._lock:
            self._turns.clear()

    def history(self, max_tokens: int | None = None) -> tuple[str, ...]:
        """The turns as lines for a model, the most recent kept when the budget is short:
        each question (the user's own words) and a summary of its answer (table, count,
        conditions); never a row, never a model's earlier text."""
        budget = (self.max_history_tokens if max_tokens is None else max_tokens) * _CHARS_PER_TOKEN
        lines: list[str] = []
        for turn in reversed(self._turns):
            pair = [f"Q{turn.number}: {turn.question}", f"A{turn.number}: {turn.summary()}"]
            cost = sum(len(line) + 1 for line in pair)
            if cost > budget:
                break
            budget -= cost
            lines[:0] = pair
        return tuple(lines)

    def to_json(self) -> dict[str, Any]:
        """The conversation as a JSON-ready ``dict`` (what :meth:`from_json` reads)."""
        data = _Data(
            id=self.id,
            max_turns=self.max_turns,
            max_history_tokens=self.max_history_tokens,
            turns=self.turns,
        )
        return data.model_dump(mode="json")

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str) -> Conversation:
        """The conversation ``data`` describes (a ``dict`` or its JSON text).

        Raises :class:`ConversationError` (an ``InvalidQueryError``) for malformed data or data
        over the bounds, naming what is wrong.
        """
        try:
            if isinstance(data, str | bytes):
                parsed = _Data.model_validate_json(data)
            else:
                parsed = _Data.model_validate(data)
        except ValidationError as exc:
            raise ConversationError(_first_error(exc), field="conversation") from None
        return cls(
            id=parsed.id,
            max_turns=parsed.max_turns,
            max_history_tokens=parsed.max_history_tokens,
            turns=parsed.turns,
        )

    def __len__(self) -> int:
        return len(self._turns)

    def __repr__(self) -> str:
        return f"Conversation(id={self.id!r}, turns={len(self._turns)})"


def _first_error(exc: ValidationError) -> str:
    error = exc.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(part) for part in error["loc"]) or "conversation"
    return f"not a conversation: {where}: {error['msg']}"
