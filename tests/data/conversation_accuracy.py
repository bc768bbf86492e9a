"""Score the retrieval agent on the labelled conversations of both schemas
(:mod:`tests.data.conversations`), or on the held-out ones the library was never tuned on
(:mod:`tests.data.conversations_held_out`, ``--set held_out``).

Run::

    python -m tests.data.conversation_accuracy [--set labelled|held_out]
        [--backend memory|postgres] [--schema sample|second|all] [--round-trip]
        [--show-failures N]

The agents are those of :mod:`tests.data.schema_accuracy` (:func:`~tests.data.schema_accuracy.
build_agents`: no LLM, the cache off, ``now`` pinned to :data:`~tests.data.schema_questions.NOW`;
memory, or a scratch PostgreSQL database per schema). Each conversation starts from
``agent.conversation()`` and every turn is asked as ``agent.run(text, conversation=conv,
limit=turn.limit or 500, return_json=True)``; only an opening turn whose text does not name its
table plainly is also given ``table=`` (:attr:`Turn.given_table`). A turn is right when the
envelope has no ``error``, its ``source`` is the turn's table, and

* for a row turn: ``total_count`` is the size of the whole selection and the records' ids are
  exactly the true ids — the page :attr:`Turn.page_ids` when the turn asks a small page, else
  every true row (or 500 of them where more are true, as in ``schema_accuracy``);
* for a count turn: ``total_count`` is the true count.

A conversation is right when every turn is. ``metadata.context`` (how the agent read the
follow-up) is kept with each turn and shown with the failures, not scored.

With ``round_trip`` (``--round-trip``), the conversation is serialised after every turn
(``conv.to_json()``), passed through ``json.dumps`` / ``json.loads`` and rebuilt with
``Conversation.from_json`` before the next turn; its :meth:`Report.answers` must equal those of
the plain run.

:func:`evaluate` returns the figures (:class:`Report`), so a test can assert on them.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.data.conversations import (
    LIMIT,
    SCHEMAS,
    TURN_KINDS,
    LabelledConversation,
    Turn,
    conversations,
)
from tests.data.conversations_held_out import held_out
from tests.data.schema_accuracy import ADMIN_DSN, answer_details, build_agents

__all__ = [
    "SETS",
    "ConversationResult",
    "Report",
    "TurnResult",
    "converse",
    "evaluate",
    "render",
    "score_turn",
]

#: The conversation sets by name: the labelled one (the default) and the held-out one.
SETS: dict[str, Callable[[], Sequence[LabelledConversation]]] = {
    "labelled": conversations,
    "held_out": held_out,
}


@dataclass(frozen=True)
class TurnResult:
    """One turn's outcome; ``reason`` says why it is wrong (empty when right)."""

    turn: Turn
    right: bool
    reason: str
    total_count: int | None
    got_ids: frozenset[str]
    filters: tuple[str, ...] = ()
    ignored: tuple[str, ...] = ()
    context: Any = None

    def answer(self) -> tuple[Any, ...]:
        """What the agent answered, comparable between runs."""
        context = json.dumps(self.context, sort_keys=True, default=str)
        return (self.right, self.reason, self.total_count, tuple(sorted(self.got_ids)), context)


@dataclass(frozen=True)
class ConversationResult:
    conversation: LabelledConversation
    turns: tuple[TurnResult, ...]

    @property
    def right(self) -> bool:
        return all(t.right for t in self.turns)


@dataclass
class Report:
    """Every conversation's results and the figures per schema and turn kind."""

    backend: str
    round_trip: bool = False
    results: list[ConversationResult] = field(default_factory=list)
    conversation_set: str = "labelled"

    def overall(self) -> tuple[int, int]:
        """(right, asked) over the conversations."""
        return sum(r.right for r in self.results), len(self.results)

    def by_schema(self) -> dict[str, tuple[int, int]]:
        """schema -> (right, asked) conversations."""
        tally: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for result in self.results:
            tally[result.conversation.schema][0] += result.right
            tally[result.conversation.schema][1] += 1
        return {k: (v[0], v[1]) for k, v in tally.items()}

    def by_kind(self, *, schema: str = "all") -> dict[str, tuple[int, int]]:
        """turn kind (``first`` and the follow-up kinds) -> (right, asked) turns."""
        tally: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for result in self.results:
            if schema not in ("all", result.conversation.schema):
                continue
            for turn in result.turns:
                tally[turn.turn.kind][0] += turn.right
                tally[turn.turn.kind][1] += 1
        return {k: (v[0], v[1]) for k, v in tally.items()}

    def rate(self) -> float:
        right, asked = self.overall()
        return right / asked if asked else 0.0

    def answers(self) -> tuple[tuple[Any, ...], ...]:
        """Every turn's answer in order (conversation id, turn number, then the answer)."""
        return tuple(
            (r.conversation.id, index, *t.answer())
            for r in self.results
            for index, t in enumerate(r.turns, start=1)
        )

    def figures(self) -> dict[str, Any]:
        """JSON-ready: conversations per schema and overall, turns per kind (and schema)."""

        def cell(right: int, asked: int) -> dict[str, Any]:
            return {"right": right, "asked": asked, "accuracy": right / asked if asked else None}

        return {
            "backend": self.backend,
            "set": self.conversation_set,
            "round_trip": self.round_trip,
            "conversations": {s: cell(*v) for s, v in sorted(self.by_schema().items())},
            "turns_by_kind": {k: cell(*v) for k, v in sorted(self.by_kind().items())},
            "turns_by_schema_kind": {
                f"{s}/{k}": cell(*v)
                for s in SCHEMAS
                for k, v in sorted(self.by_kind(schema=s).items())
            },
            "overall": cell(*self.overall()),
        }

    def failures(self) -> list[ConversationResult]:
        return [r for r in self.results if not r.right]


# --- scoring ------------------------------------------------------------------------------------


def score_turn(turn: Turn, envelope: dict[str, Any]) -> TurnResult:
    """Whether ``envelope`` (``run(..., conversation=..., return_json=True)``) answers ``turn``."""
    meta = envelope.get("metadata") or {}
    records = envelope.get("records") or []
    details = {**answer_details(envelope), "context": meta.get("context")}
    total, got = details["total_count"], details["got_ids"]

    def result(reason: str) -> TurnResult:
        return TurnResult(turn, not reason, reason, **details)

    if meta.get("error"):
        return result(f"error: {meta['error']}")
    source = meta.get("source")
    if source != f"persistence.{turn.table}" and (total or records):
        return result(f"read {source}, not {turn.table}")
    if turn.answer == "count":
        if total != turn.truth_count:
            return result(f"count {total}, truth {turn.truth_count}")
        return result("")
    if total != turn.truth_count:
        return result(f"total_count {total}, truth {turn.truth_count}")
    page = turn.page_ids
    if page is not None:
        want = frozenset(str(i) for i in page)
        if got != want:
            return result(
                f"page at {turn.offset}: {len(got - want)} wrong ids, {len(want - got)} missing"
            )
        return result("")
    truth = frozenset(str(i) for i in turn.truth_ids)
    if len(truth) <= LIMIT:
        if got != truth:
            return result(f"{len(got - truth)} wrong ids, {len(truth - got)} missing")
    elif len(got) != LIMIT or not got <= truth:
        return result(f"{len(got - truth)} wrong ids of {len(got)} (truth above {LIMIT})")
    return result("")


def _json_round_trip(conversation: Any) -> Any:
    """The conversation serialised, through JSON text, and rebuilt."""
    from rag_agent import Conversation

    return Conversation.from_json(json.loads(json.dumps(conversation.to_json())))


def converse(
    agent: Any, labelled: LabelledConversation, *, round_trip: bool = False
) -> ConversationResult:
    """Ask ``labelled``'s turns in one conversation of ``agent`` and score each answer; with
    ``round_trip`` the conversation goes through JSON between turns."""
    conv = agent.conversation()
    results = []
    for index, turn in enumerate(labelled.turns):
        if index and round_trip:
            conv = _json_round_trip(conv)
        options: dict[str, Any] = {}
        if turn.given_table is not None:
            options["table"] = turn.given_table
        envelope = agent.run(
            turn.text,
            conversation=conv,
            limit=turn.limit or LIMIT,
            return_json=True,
            **options,
        )
        results.append(score_turn(turn, envelope))
    return ConversationResult(labelled, tuple(results))


def evaluate(
    backend: str = "memory",
    *,
    schema: str = "all",
    round_trip: bool = False,
    selected: Sequence[LabelledConversation] | None = None,
    admin_dsn: str = ADMIN_DSN,
    conversation_set: str = "labelled",
) -> Report:
    """Hold the conversations (all of ``conversation_set``, one schema's, or ``selected``) and
    score every turn."""
    if conversation_set not in SETS:
        raise ValueError(f"unknown set {conversation_set!r}; one of {sorted(SETS)}")
    chosen = [
        c
        for c in (SETS[conversation_set]() if selected is None else selected)
        if schema in ("all", c.schema)
    ]
    report = Report(backend, round_trip, conversation_set=conversation_set)
    wanted = sorted({c.schema for c in chosen}, key=SCHEMAS.index)
    with build_agents(backend, wanted, admin_dsn=admin_dsn) as agents:
        for labelled in chosen:
            report.results.append(
                converse(agents[labelled.schema], labelled, round_trip=round_trip)
            )
    return report


# --- printing -----------------------------------------------------------------------------------


def _pct(right: int, asked: int) -> str:
    return f"{right:>3}/{asked:<3} {right / asked:5.2f}" if asked else f"{'-':>14}"


def render(report: Report, *, show_failures: int = 0) -> str:
    mode = " (JSON round trip between turns)" if report.round_trip else ""
    lines = [f"set: {report.conversation_set}, backend: {report.backend}{mode}"]
    schemas = [s for s in SCHEMAS if s in report.by_schema()]
    lines.append(f"{'turn kind':12}" + "".join(f"  {s:>14}" for s in (*schemas, "all")))
    cells = {s: report.by_kind(schema=s) for s in (*schemas, "all")}
    for kind in TURN_KINDS:
        row = "".join(f"  {_pct(*cells[s].get(kind, (0, 0))):>14}" for s in (*schemas, "all"))
        lines.append(f"{kind:12}{row}")
    per_schema = report.by_schema()
    lines.append(
        f"{'conversations':12}"
        + "".join(f"  {_pct(*per_schema.get(s, (0, 0))):>14}" for s in schemas)
        + f"  {_pct(*report.overall()):>14}"
    )
    for result in report.failures()[:show_failures]:
        c = result.conversation
        lines.append(f"- {c.id} ({', '.join(c.kinds)})")
        for index, t in enumerate(result.turns, start=1):
            turn = t.turn
            mark = "ok " if t.right else "BAD"
            lines.append(
                f"    {mark} {index}. [{turn.kind}] {turn.text!r} table={turn.table} "
                f"truth={turn.truth_count} got={t.total_count}"
                + ("" if t.right else f"\n        {t.reason}; filters={list(t.filters)} ")
                + ("" if t.right else f"ignored={list(t.ignored)} context={t.context}")
                + ("" if t.right else f"\n        {_ids(turn, t)}")
            )
    return "\n".join(lines)


def _ids(turn: Turn, result: TurnResult) -> str:
    """The expected and the returned ids of a wrong row turn, when few enough to read."""
    if turn.answer == "count":
        return "expected a count"
    want = turn.page_ids if turn.page_ids is not None else turn.truth_ids
    show = lambda ids: sorted(ids, key=str) if len(ids) <= 12 else f"{len(ids)} ids"  # noqa: E731
    return f"expected ids={show(want)} got ids={show(result.got_ids)}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.data.conversation_accuracy")
    parser.add_argument(
        "--set",
        dest="conversation_set",
        choices=tuple(SETS),
        default="labelled",
        help="the labelled conversations (default) or the held-out ones",
    )
    parser.add_argument("--backend", choices=("memory", "postgres"), default="memory")
    parser.add_argument("--schema", choices=("sample", "second", "all"), default="all")
    parser.add_argument(
        "--round-trip",
        action="store_true",
        help="serialise the conversation to JSON and rebuild it between turns",
    )
    parser.add_argument("--show-failures", type=int, default=0, metavar="N")
    args = parser.parse_args(argv)
    report = evaluate(
        args.backend,
        schema=args.schema,
        round_trip=args.round_trip,
        conversation_set=args.conversation_set,
    )
    print(render(report, show_failures=args.show_failures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
