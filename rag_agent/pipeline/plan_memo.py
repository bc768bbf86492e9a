"""The plan of a question, memoised: what the rules read in a text and what the facade applied.

``RAGAgent.run`` asked the same question again (a dashboard, a retry, the next page) would read
the text with the rules and check every condition against the facade's catalog again, for the
same answer: both are pure, the rules given the text, the table asked for and the UTC day, the
checks given the conditions and the table's columns. :class:`PlanMemo` keeps that answer, a
:class:`Plan`, per ``(text, table, count_only, day)``:

* only for plans the rules alone made: a run whose text went to the extraction hook, or that
  brought the caller's own conditions, is never memoised (the hook caches its own answers);
* with the table's column types as the facade reported them when the plan was made: a plan is
  reused only while ``facade.column_types(table)`` is still equal to them, so a catalog reload
  that changed a column (a migration) makes the next run check its conditions anew; a backend
  that cannot tell its columns' types is never memoised;
* bounded: at most ``maxsize`` plans, the least recently used evicted first (``maxsize=0``
  memoises nothing).

Only the plan is kept, never a row: the data is read (or taken from the result cache, which has
its own key and versions) on every run. Thread-safe: one lock guards the entries.

A question's *shape* is memoised too (:mod:`rag_agent.pipeline.question_shape`): "show lead
<uuid>" asked for another uuid, or "find the lead with email <address>" for another address,
reuses the plan of its shape, with its own literals substituted, under
:func:`shape_key` (the key above with the text's words around its slots instead of the text).
The same rules hold for a shape's plan (rule-made only, checked against the table's column
types, bounded with the rest, never a row), and one more: a shape is kept only when it is
provably the question's plan with other literals — its literals hold no word the rules read,
and the plan read from the shape's probe literals, the question's substituted, equals the plan
the rules read from the question itself (each literal a condition value as written or as the
rules normalise it, nothing else depending on it); a question whose literals hold such a word
is planned by the rules in full.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from typing import Any, NamedTuple, Protocol

from rag_agent.specs import Condition, Ignored
from rag_agent.understanding.request import Request

__all__ = ["DEFAULT_PLAN_MEMO_SIZE", "Plan", "PlanMemo", "Planned", "plan_key", "shape_key"]

#: How many plans an agent keeps by default.
DEFAULT_PLAN_MEMO_SIZE = 256


class Planned(Protocol):
    """What the memo keeps: a :class:`Plan`, or a shape's plan
    (:class:`~rag_agent.pipeline.question_shape.ShapedPlan`); either names the table whose
    column types it was checked against."""

    @property
    def table(self) -> str: ...


class Plan(NamedTuple):
    """A question's plan: the request the rules read, the table it reads (checked by the
    policy), the conditions the facade applied (values coerced) and those it refused."""

    request: Request
    table: str
    applied: tuple[Condition, ...]
    refused: tuple[tuple[Condition, Ignored], ...]


def plan_key(
    text: str,
    table: str | None,
    count_only: bool | None,
    now: dt.datetime,
    vocabulary: Hashable = None,
) -> tuple[Hashable, ...]:
    """The memo key of a run: the text, the table and ``count_only`` as given, the UTC day (the
    rules read the clock to the day) and the vocabulary the rules read with (a newly learned
    one, after a write, plans anew)."""
    return (text, table, count_only, now.astimezone(dt.UTC).date(), vocabulary)


class PlanMemo:
    """At most ``maxsize`` plans, each valid while its table's column types are unchanged."""

    __slots__ = ("_entries", "_lock", "hits", "maxsize")

    def __init__(self, maxsize: int = DEFAULT_PLAN_MEMO_SIZE) -> None:
        if type(maxsize) is not int or maxsize < 0:
            raise ValueError(f"maxsize must be a non-negative int, not {maxsize!r}")
        self.maxsize = maxsize
        self._entries: OrderedDict[Hashable, tuple[Planned, Mapping[str, Any]]] = OrderedDict()
        self._lock = threading.Lock()
        #: Plans returned so far (what the tests and the benchmarks read to see it was used).
        self.hits = 0

    def get(self, key: Hashable, facade: Any) -> Planned | None:
        """The plan kept under ``key``, if its table's column types are still those ``facade``
        reports (else it is dropped)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
        plan, types = entry
        if facade.column_types(plan.table) != types:  # the catalog changed under the plan
            with self._lock:
                if self._entries.get(key) is entry:
                    del self._entries[key]
            return None
        with self._lock:
            self.hits += 1
        return plan

    def put(self, key: Hashable, plan: Planned, types: Mapping[str, Any]) -> None:
        """Keep ``plan`` under ``key`` with ``types``, its table's column types as the facade
        reported them *before* the plan's conditions were checked; nothing is kept when the
        backend cannot tell them."""
        if self.maxsize == 0 or not types:
            return
        with self._lock:
            self._entries[key] = (plan, types)
            self._entries.move_to_end(key)
            while len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        """Forget every plan."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


def shape_key(
    shape: Any,
    table: str | None,
    count_only: bool | None,
    now: dt.datetime,
    vocabulary: Hashable = None,
) -> tuple[Hashable, ...]:
    """The memo key of a question's shape (:class:`~rag_agent.pipeline.question_shape.
    QuestionShape`): as :func:`plan_key`, with the shape's words and slot kinds for the text."""
    return ("shape", shape.key, table, count_only, now.astimezone(dt.UTC).date(), vocabulary)
