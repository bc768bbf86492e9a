"""A labelled set of two- and three-turn conversations over the two schemas of
:mod:`tests.data.schema_questions` (the bundled sample and :mod:`tests.data.second_schema`).

A conversation opens with a question that stands alone (turn kind ``"first"``), then asks
follow-ups of five kinds (:data:`KINDS`), each read against what came before:

* ``"refine"`` — "only the qualified ones", "and in March?", "just those in Italy", "how many of
  them?", "not Globex": the previous turn's conditions **and** the new one. A new condition on a
  column replaces the previous condition(s) on that column ("and in March?" after "… in February
  2025" is March 2025 alone). A negation ("not X", "except X", "excluding X", "other than X")
  removes the previous condition X matches, if one does, and otherwise excludes X (the rows whose
  column is set and is not X: SQL ``<>``, as in :mod:`~tests.data.schema_questions`). "How many
  of them" is the count of the previous selection; after a count, a refinement without a row
  word (show, list, which, who) is still a count.
* ``"related"`` — "what about their conversations?", "and their client?": the rows of the named
  table related through the declared foreign key (either direction) to **every** row the
  previous turn matched, not only its page. The previous selection is never above 100 rows.
* ``"item"`` — "the first one", "#3 of that list", "the second one's conversations": the n-th
  record of the previous page (with the related rows of the table it names). Plain filtered
  reads come back ordered by primary key, so the record is ``sorted(previous ids)[n - 1]`` ("the
  last one" the last of them); an item follows only a plain read whose page holds every true row.
* ``"page"`` — "next page", "more", "show more": the previous query's next page. The opening
  turn asks a small page (:data:`PAGE` rows, :attr:`Turn.limit`) and so does the follow-up; the
  truth is ``sorted(true ids)[offset:offset + PAGE]`` with the whole selection's size as
  ``total_count``.
* ``"fresh"`` — a new subject ("now campaigns of client 9", "leads at Initech" after a turn about
  another company, "how many inquiries are urgent?"): the new question alone.

Every truth is **computed here in plain Python** from the rows, from an explicit selection per
turn: a table and one predicate per column (:class:`Selection`), which a refinement extends or
replaces, a negation drops or extends, a related turn turns into "the foreign key is one of the
previous ids", an item into "the id is the n-th of the previous ids". Nothing goes through the
library's parser. Values are drawn from the data with a fixed seed (companies, people, e-mail
addresses, client names), each conversation taking the first candidate for which every truth is
non-empty and every related or item turn builds on at most 100 rows.

The agent answers each turn as ``agent.run(text, conversation=conv, limit=turn.limit or 500,
return_json=True)``; only an opening turn whose text does not name its table plainly is given
the table (:attr:`Turn.given_table`, as :attr:`Question.given_table
<tests.data.schema_questions.Question.given_table>`). :mod:`tests.data.conversation_accuracy`
scores the answers.

``python -m tests.data.conversations`` prints the counts per schema and kind.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from persistence.relations import Relation
from persistence.schema import REFERENCE
from tests.data.schema_questions import (
    LAST_MONTH,
    SCHEMAS,
    Builder,
    Predicate,
    Row,
    cmp,
    eq,
    month,
    names_table,
    neq,
    quarter,
    span,
)
from tests.data.second_schema import SECOND

__all__ = [
    "KINDS",
    "LIMIT",
    "PAGE",
    "RELATED_CAP",
    "SCHEMAS",
    "TURN_KINDS",
    "LabelledConversation",
    "Selection",
    "Turn",
    "conversations",
    "relations",
]

#: The follow-up kinds, in report order.
KINDS = ("refine", "related", "item", "page", "fresh")
#: Every turn's kind: the opening question, then the follow-ups.
TURN_KINDS = ("first", *KINDS)
#: The page asked for on a turn without its own limit (the default ``RAG_MAX_LIMIT``).
LIMIT = 500
#: The small page of the paging conversations.
PAGE = 5
#: The most rows a related or item follow-up may build on.
RELATED_CAP = 100


@dataclass(frozen=True)
class Turn:
    """One turn and its truth.

    ``answer`` is ``"rows"`` or ``"count"``. ``truth_ids`` are every row of the turn's selection
    (empty for a count) and ``truth_count`` its size, the expected ``total_count``. A turn with a
    ``limit`` asks that page and expects exactly :attr:`page_ids`; without one it asks
    :data:`LIMIT` rows and expects every true row (or :data:`LIMIT` of them when more are true).
    """

    text: str
    kind: str
    table: str
    answer: str
    truth_ids: frozenset[Any]
    truth_count: int
    given_table: str | None = None
    limit: int | None = None
    offset: int = 0

    @property
    def page_ids(self) -> frozenset[Any] | None:
        """The ids expected on a small page (``None`` when the turn asks no ``limit``)."""
        if self.limit is None:
            return None
        return frozenset(sorted(self.truth_ids)[self.offset : self.offset + self.limit])

    def as_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["truth_ids"] = sorted(self.truth_ids)
        return data


@dataclass(frozen=True)
class LabelledConversation:
    """A labelled conversation: ``kinds`` are its follow-ups' kinds (turn 2 on)."""

    id: str
    schema: str
    kinds: tuple[str, ...]
    turns: tuple[Turn, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "schema": self.schema,
            "kinds": list(self.kinds),
            "turns": [t.as_dict() for t in self.turns],
        }


# --- selections ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Selection:
    """What a turn asks for: a table, one predicate per column (all must hold), and whether it
    is a count. Refinements are made with :meth:`where` (a column's new condition replaces its
    old one) and :meth:`without` (a negation that names a previous condition drops it)."""

    table: str
    conditions: tuple[tuple[str, Predicate], ...] = ()
    count: bool = False

    def where(self, column: str, test: Predicate) -> Selection:
        kept = tuple((c, t) for c, t in self.conditions if c != column)
        return dataclasses.replace(self, conditions=(*kept, (column, test)))

    def without(self, column: str) -> Selection:
        if column not in dict(self.conditions):
            raise AssertionError(f"no condition on {column!r} to drop")
        kept = tuple((c, t) for c, t in self.conditions if c != column)
        return dataclasses.replace(self, conditions=kept)

    def counted(self) -> Selection:
        return dataclasses.replace(self, count=True)

    def test(self, row: Row) -> bool:
        return all(t(row) for _, t in self.conditions)


def sel(table: str, **conditions: Predicate) -> Selection:
    return Selection(table, tuple(conditions.items()))


def named(person: tuple[str, str]) -> Selection:
    """The leads with this first and last name."""
    first_name, last_name = person
    return sel(
        "leads", first_name=eq("first_name", first_name), last_name=eq("last_name", last_name)
    )


def relations(schema: str) -> tuple[Relation, ...]:
    """The foreign keys of ``schema`` as declared (the sample's reference DDL, the second's)."""
    return REFERENCE.relations if schema == "sample" else SECOND.relations


class Step(NamedTuple):
    kind: str
    text: str
    selection: Selection
    limit: int | None = None
    offset: int = 0


class _Unfit(Exception):
    """The candidate value does not give this conversation the truths it needs."""


# --- the builder --------------------------------------------------------------------------------


class _Talks(Builder):
    def __init__(self, schema: str, seed: int) -> None:
        super().__init__(schema, seed)
        self.made: list[LabelledConversation] = []

    def ids(self, selection: Selection) -> frozenset[Any]:
        return frozenset(r["id"] for r in self.data[selection.table] if selection.test(r))

    def _small(self, selection: Selection) -> frozenset[Any]:
        ids = self.ids(selection)
        if not ids or len(ids) > RELATED_CAP:
            raise _Unfit(f"{len(ids)} rows to build on")
        return ids

    def related(self, selection: Selection, table: str) -> Selection:
        """The rows of ``table`` related by the foreign key to every row of ``selection``."""
        ids = self._small(selection)
        found = [
            r
            for r in relations(self.schema)
            if {r.parent_table, r.child_table} == {selection.table, table}
        ]
        if len(found) != 1:
            raise AssertionError(f"{self.schema}: {len(found)} relations {selection.table}-{table}")
        rel = found[0]
        if rel.parent_table == selection.table:  # the named table refers to the previous rows
            column = rel.child_column
            return Selection(table, ((column, lambda r: r[column] in ids),))
        keys = frozenset(
            r[rel.child_column]
            for r in self.data[selection.table]
            if r["id"] in ids and r[rel.child_column] is not None
        )  # the previous rows refer to the named table
        return Selection(table, (("id", lambda r: r["id"] in keys),))

    def nth(self, selection: Selection, n: int, table: str | None = None) -> Selection:
        """The n-th record (1-based; -1 the last) of ``selection`` in primary-key order, or the
        rows of ``table`` related to it."""
        ordered = sorted(self._small(selection))
        if n > len(ordered):
            raise _Unfit(f"no record {n} of {len(ordered)}")
        pick = ordered[n - 1] if n > 0 else ordered[n]
        one = Selection(selection.table, (("id", eq("id", pick)),))
        return one if table is None else self.related(one, table)

    def talk(self, *steps: Step) -> None:
        """Check the steps and keep the conversation (``_Unfit`` when a truth does not fit)."""
        first, *follow = steps
        if first.kind != "first" or not 1 <= len(follow) <= 2:
            raise AssertionError(f"bad conversation {[s.text for s in steps]}")
        turns: list[Turn] = []
        for index, step in enumerate(steps):
            before_selection = steps[index - 1].selection if index else None
            if index and step.kind not in KINDS:
                raise AssertionError(f"unknown kind {step.kind!r}")
            s = step.selection
            ids = self.ids(s)
            if not ids:
                raise _Unfit(f"{step.text!r} has no rows")
            before = turns[-1] if turns else None
            if step.kind in ("related", "item"):
                assert before is not None and before.answer == "rows" and before.limit is None
                if before.truth_count > RELATED_CAP:
                    raise _Unfit(f"{step.text!r} builds on {before.truth_count} rows")
            if step.kind == "page":
                assert before is not None and before.limit == step.limit == PAGE
                assert step.offset == before.offset + PAGE and before_selection is not None
                assert self.ids(before_selection) == ids and s.table == before.table
                if len(ids) <= step.offset:
                    raise _Unfit(f"{step.text!r}: no page at {step.offset} of {len(ids)}")
            if step.limit is not None and step.kind not in ("first", "page"):
                raise AssertionError("only paging conversations ask a small page")
            turns.append(
                Turn(
                    text=step.text,
                    kind=step.kind,
                    table=s.table,
                    answer="count" if s.count else "rows",
                    truth_ids=frozenset() if s.count else ids,
                    truth_count=len(ids),
                    given_table=(None if index or names_table(s.table, step.text) else s.table),
                    limit=step.limit,
                    offset=step.offset,
                )
            )
        self.made.append(
            LabelledConversation(
                id=f"{self.schema}-{len(self.made) + 1:02d}",
                schema=self.schema,
                kinds=tuple(s.kind for s in follow),
                turns=tuple(turns),
            )
        )

    def fit(self, pool: list[Any], make: Callable[[Any], Sequence[Step]]) -> None:
        """Build the conversation ``make`` writes around the first fitting value of ``pool``
        (which it then leaves out of the pool)."""
        for value in list(pool):
            try:
                self.talk(*make(value))
            except _Unfit:
                continue
            pool.remove(value)
            return
        raise AssertionError(f"{self.schema}: no value of {pool[:5]}… fits {make}")

    def pool(self, values: Sequence[Any]) -> list[Any]:
        """``values`` in a seeded order."""
        out = list(values)
        self.rnd.shuffle(out)
        return out


def first(text: str, selection: Selection, *, limit: int | None = None) -> Step:
    return Step("first", text, selection, limit)


def page(text: str, selection: Selection, offset: int) -> Step:
    return Step("page", text, selection, PAGE, offset)


def refine(text: str, selection: Selection) -> Step:
    return Step("refine", text, selection)


def related(text: str, selection: Selection) -> Step:
    return Step("related", text, selection)


def item(text: str, selection: Selection) -> Step:
    return Step("item", text, selection)


def fresh(text: str, selection: Selection) -> Step:
    return Step("fresh", text, selection)


# --- the sample schema --------------------------------------------------------------------------


def _sample() -> list[LabelledConversation]:
    b = _Talks("sample", 30_001)
    co = "company_name"
    companies = b.pool(b.company_names(co, 12, 60))
    at = lambda c: sel("leads", company_name=eq(co, c))  # noqa: E731
    status = lambda v: eq("status", v)  # noqa: E731
    created = lambda y, m: span("created_at", *month(y, m))  # noqa: E731
    people = b.pool(sorted({(r["first_name"], r["last_name"]) for r in b.data["leads"]}))
    surnames = b.pool(sorted({r["last_name"] for r in b.data["leads"]}))
    lead_ids = b.pool(sorted({r["lead_id"] for r in b.data["conversations"]}))
    clients = b.pool(sorted(r["name"] for r in b.data["clients"]))
    qualified = sel("leads", status=status("qualified"))
    paused = sel("campaigns", status=status("paused"))

    # refine
    def qualified_then_conversations(c: str) -> list[Step]:
        s = at(c).where("status", status("qualified"))
        return [
            first(f"leads at {c}", at(c)),
            refine("only the qualified ones", s),
            related("what about their conversations?", b.related(s, "conversations")),
        ]

    b.fit(companies, qualified_then_conversations)
    b.fit(
        companies,
        lambda c: [first(f"leads at {c}", at(c)), refine("how many of them?", at(c).counted())],
    )
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            refine("only the customers", at(c).where("status", status("customer"))),
            refine("how many of them?", at(c).where("status", status("customer")).counted()),
        ],
    )

    def qualified_at_then_first(c: str) -> list[Step]:
        s = qualified.where(co, eq(co, c))
        return [
            first("qualified leads", qualified),
            refine(f"just those at {c}", s),
            item("the first one", b.nth(s, 1)),
        ]

    b.fit(companies, qualified_at_then_first)
    feb = sel("leads", created_at=created(2025, 2))
    b.talk(
        first("leads created in February 2025", feb),
        refine("and in March?", feb.where("created_at", created(2025, 3))),
    )
    march_q = sel("leads", created_at=created(2025, 3)).where("status", status("qualified"))
    b.talk(
        first("leads created in March 2025", sel("leads", created_at=created(2025, 3))),
        refine("only the qualified ones", march_q),
        refine("and in April?", march_q.where("created_at", created(2025, 4))),
    )
    open_li = sel("conversations", status=status("open"), channel=eq("channel", "linkedin"))
    b.talk(
        first("open conversations", sel("conversations", status=status("open"))),
        refine("only the linkedin ones", open_li),
        refine("how many of them?", open_li.counted()),
    )
    paused_phone = paused.where("channel", eq("channel", "phone"))
    b.talk(
        first("paused campaigns", paused),
        refine("just the phone ones", paused_phone),
        related("their sequences", b.related(paused_phone, "sequences")),
    )
    active_email = sel("campaigns", status=status("active"), channel=eq("channel", "email"))
    b.talk(
        first("active campaigns", sel("campaigns", status=status("active"))),
        refine("only the email ones", active_email),
        refine("how many of them?", active_email.counted()),
    )
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            refine(
                "excluding the unqualified ones",
                at(c).where("status", neq("status", "unqualified")),
            ),
        ],
    )
    b.fit(
        companies,
        lambda c: [
            first(f"qualified leads at {c}", qualified.where(co, eq(co, c))),
            refine(f"not {c}", qualified),
        ],
    )
    customers = sel("leads", status=status("customer"))
    b.fit(
        companies,
        lambda c: [
            first("leads who are customers", customers),
            refine(f"other than {c}", customers.where(co, neq(co, c))),
        ],
    )
    count_at = lambda c: at(c).counted()  # noqa: E731
    b.fit(
        companies,
        lambda c: [
            first(f"how many leads at {c}?", count_at(c)),
            refine("only the qualified ones", count_at(c).where("status", status("qualified"))),
        ],
    )
    march_n = sel("leads", created_at=created(2025, 3)).counted()
    b.talk(
        first("how many leads were created in March 2025?", march_n),
        refine("and in April?", march_n.where("created_at", created(2025, 4))),
    )
    closed = sel("conversations", status=status("closed"))
    b.talk(
        first("closed conversations", closed),
        refine("just those over email", closed.where("channel", eq("channel", "email"))),
    )
    june = sel("staging_leads", imported_at=span("imported_at", *month(2025, 6)))
    b.talk(
        first("staged leads imported in June", june),
        refine("only the linkedin ones", june.where("source", eq("source", "linkedin"))),
    )
    inbound = sel("messages", direction=eq("direction", "inbound"))
    b.talk(
        first("inbound messages", inbound),
        refine(
            "only those sent last month", inbound.where("sent_at", span("sent_at", *LAST_MONTH))
        ),
    )
    q2 = sel("inquiries", received_at=span("received_at", *quarter(2025, 2)))
    b.talk(
        first("inquiries received in Q2 2025", q2),
        refine("only the pricing ones", q2.where("subject", eq("subject", "Pricing question"))),
    )
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            refine("except the contacted ones", at(c).where("status", neq("status", "contacted"))),
        ],
    )
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            refine("only the qualified ones", at(c).where("status", status("qualified"))),
            refine(f"not {c}", qualified),
        ],
    )

    # related
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            related("what about their conversations?", b.related(at(c), "conversations")),
        ],
    )
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            related("show their inquiries", b.related(at(c), "inquiries")),
        ],
    )
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            related("and their client?", b.related(at(c), "clients")),
        ],
    )
    by_name = {r["name"]: r["id"] for r in b.data["clients"]}
    of_client = lambda n: sel("campaigns", client_id=eq("client_id", by_name[n]))  # noqa: E731
    b.fit(
        clients,
        lambda n: [
            first(f"campaigns of {n}", of_client(n)),
            related("their sequences", b.related(of_client(n), "sequences")),
        ],
    )
    b.talk(
        first("paused campaigns", paused),
        related("and their clients?", b.related(paused, "clients")),
    )
    b.fit(
        people,
        lambda p: [
            first(f"leads named {p[0]} {p[1]}", named(p)),
            related("their conversations", b.related(named(p), "conversations")),
        ],
    )
    conv_at = lambda c: b.related(at(c), "conversations")  # noqa: E731
    b.fit(
        companies,
        lambda c: [
            first(f"conversations of leads at {c}", conv_at(c)),
            related("their messages", b.related(conv_at(c), "messages")),
        ],
    )
    one = lambda i: sel("leads", id=eq("id", i))  # noqa: E731
    b.fit(
        lead_ids,
        lambda i: [
            first(f"lead {i}", one(i)),
            related("what about their conversations?", b.related(one(i), "conversations")),
        ],
    )
    retail = sel("clients", industry=eq("industry", "retail"))
    b.talk(
        first("clients in the Retail industry", retail),
        related("show their campaigns", b.related(retail, "campaigns")),
    )
    long = sel("sequences", step_count=cmp("step_count", ">", 5))
    b.talk(
        first("sequences with more than 5 steps", long),
        related("their campaigns", b.related(long, "campaigns")),
    )

    # item
    b.fit(
        companies, lambda c: [first(f"leads at {c}", at(c)), item("the first one", b.nth(at(c), 1))]
    )
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            item("the second one's conversations", b.nth(at(c), 2, "conversations")),
        ],
    )
    b.talk(first("paused campaigns", paused), item("the last one", b.nth(paused, -1)))
    surname = lambda s: sel("leads", last_name=eq("last_name", s))  # noqa: E731
    b.fit(
        surnames,
        lambda s: [
            first(f"leads with the last name {s}", surname(s)),
            item("#3 of that list", b.nth(surname(s), 3)),
        ],
    )
    b.fit(
        companies,
        lambda c: [
            first(f"qualified leads at {c}", qualified.where(co, eq(co, c))),
            item("number 2 of those", b.nth(qualified.where(co, eq(co, c)), 2)),
        ],
    )
    b.fit(
        clients,
        lambda n: [
            first(f"campaigns of {n}", of_client(n)),
            item("the first one's sequences", b.nth(of_client(n), 1, "sequences")),
        ],
    )
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            item("conversations of the second one", b.nth(at(c), 2, "conversations")),
        ],
    )
    four = sel("sequences", step_count=cmp("step_count", "==", 4))
    b.talk(first("sequences with exactly 4 steps", four), item("the last one", b.nth(four, -1)))

    # page
    b.fit(
        companies,
        lambda c: [first(f"leads at {c}", at(c), limit=PAGE), page("next page", at(c), PAGE)],
    )
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c), limit=PAGE),
            page("more", at(c), PAGE),
            page("show more", at(c), 2 * PAGE),
        ],
    )
    b.talk(first("paused campaigns", paused, limit=PAGE), page("next page", paused, PAGE))
    b.talk(first("qualified leads", qualified, limit=PAGE), page("next page", qualified, PAGE))
    b.talk(first("inquiries received in Q2 2025", q2, limit=PAGE), page("more", q2, PAGE))
    b.talk(
        first("closed conversations", closed, limit=PAGE),
        page("next page", closed, PAGE),
        page("more", closed, 2 * PAGE),
    )

    # fresh
    def two_companies(c: str) -> list[Step]:
        other = next(o for o in companies if o != c)
        companies.remove(other)
        return [first(f"leads at {c}", at(c)), fresh(f"leads at {other}", at(other))]

    b.fit(companies, two_companies)
    nine = sel("campaigns", client_id=eq("client_id", 9))
    b.fit(
        companies,
        lambda c: [
            first(f"qualified leads at {c}", qualified.where(co, eq(co, c))),
            fresh("now campaigns of client 9", nine),
        ],
    )
    b.talk(
        first("open conversations", sel("conversations", status=status("open"))),
        fresh("how many qualified leads are there?", qualified.counted()),
    )
    b.fit(
        companies,
        lambda c: [first("paused campaigns", paused), fresh(f"now leads at {c}", at(c))],
    )
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            refine("only the qualified ones", at(c).where("status", status("qualified"))),
            fresh("now open conversations", sel("conversations", status=status("open"))),
        ],
    )
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            related("their conversations", b.related(at(c), "conversations")),
            fresh("now paused campaigns", paused),
        ],
    )
    b.talk(first("inbound messages", inbound), fresh("now sequences with more than 5 steps", long))
    b.talk(
        first("closed conversations", closed),
        fresh("how many inquiries were received in Q2 2025?", q2.counted()),
    )

    # longer chains
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            refine("only the customers", at(c).where("status", status("customer"))),
            item("the first one", b.nth(at(c).where("status", status("customer")), 1)),
        ],
    )
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            related("their conversations", conv_at(c)),
            refine("only the open ones", conv_at(c).where("status", status("open"))),
        ],
    )
    b.fit(
        clients,
        lambda n: [
            first(f"campaigns of {n}", of_client(n)),
            related("their sequences", b.related(of_client(n), "sequences")),
            item("the first one", b.nth(b.related(of_client(n), "sequences"), 1)),
        ],
    )
    paused_seq = b.related(paused, "sequences")
    b.talk(
        first("paused campaigns", paused),
        related("their sequences", paused_seq),
        refine("how many of them?", paused_seq.counted()),
    )
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            item("the last one", b.nth(at(c), -1)),
            related("their conversations", b.nth(at(c), -1, "conversations")),
        ],
    )
    b.fit(
        companies,
        lambda c: [
            first("open conversations", sel("conversations", status=status("open"))),
            refine(
                "just those over phone",
                sel("conversations", status=status("open"), channel=eq("channel", "phone")),
            ),
            fresh(f"now how many leads at {c}?", count_at(c)),
        ],
    )
    b.fit(
        people,
        lambda p: [
            first(f"leads named {p[0]} {p[1]}", named(p)),
            related("their inquiries", b.related(named(p), "inquiries")),
        ],
    )
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            refine("only the qualified ones", at(c).where("status", status("qualified"))),
            related(
                "their inquiries",
                b.related(at(c).where("status", status("qualified")), "inquiries"),
            ),
        ],
    )
    return b.made


# --- the second schema --------------------------------------------------------------------------


def _second() -> list[LabelledConversation]:
    b = _Talks("second", 30_002)
    co = "company"
    companies = b.pool(b.company_names(co, 11, 100))
    at = lambda c: sel("leads", company=eq(co, c))  # noqa: E731
    stage = lambda v: eq("stage", v)  # noqa: E731
    opened = lambda y, m: span("opened_at", *month(y, m))  # noqa: E731
    people = b.pool(sorted({(r["first_name"], r["last_name"]) for r in b.data["leads"]}))
    surnames = b.pool(sorted({r["last_name"] for r in b.data["leads"]}))
    lead_ids = b.pool(sorted({r["lead_id"] for r in b.data["conversations"]}))
    # Client names, but none sharing a word with a campaign title ("Partners", "Partner summit").
    clients = b.pool(sorted(r["name"] for r in b.data["clients"] if "Partner" not in r["name"]))
    by_name = {r["name"]: r["id"] for r in b.data["clients"]}
    of_client = lambda n: sel("campaigns", client_id=eq("client_id", by_name[n]))  # noqa: E731
    countries = b.pool(sorted({r["country"] for r in b.data["leads"]}))
    won = sel("leads", stage=stage("won"))
    lost = sel("leads", stage=stage("lost"))
    urgent = sel("inquiries", priority=eq("priority", "urgent"))
    escalated = sel("conversations", resolution=eq("resolution", "escalated"))
    platinum = sel("clients", tier=eq("tier", "platinum"))
    gold = sel("clients", tier=eq("tier", "gold"))
    live = sel("campaigns", state=eq("state", "live"))

    # refine
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            refine("only the won ones", at(c).where("stage", stage("won"))),
            related(
                "their conversations",
                b.related(at(c).where("stage", stage("won")), "conversations"),
            ),
        ],
    )
    b.fit(
        companies,
        lambda c: [first(f"leads at {c}", at(c)), refine("how many of them?", at(c).counted())],
    )
    spain = sel("leads", country=eq("country", "Spain"))
    spain_web = spain.where("source", eq("source", "webinar"))
    b.talk(
        first("leads in Spain", spain),
        refine("just the ones from webinars", spain_web),
        refine("how many of them?", spain_web.counted()),
    )
    won_italy = won.where("country", eq("country", "Italy"))
    b.talk(
        first("won leads", won),
        refine("just those in Italy", won_italy),
        item("the first one", b.nth(won_italy, 1)),
    )
    gold_active = gold.where("is_active", eq("is_active", True))
    b.talk(
        first("gold tier clients", gold),
        refine("only the active ones", gold_active),
        related("their campaigns", b.related(gold_active, "campaigns")),
    )
    urgent_open = urgent.where("is_answered", eq("is_answered", False))
    b.talk(
        first("urgent inquiries", urgent),
        refine("only the unanswered ones", urgent_open),
        related("and their leads?", b.related(urgent_open, "leads")),
    )
    b.talk(
        first("escalated conversations", escalated),
        refine("only the phone ones", escalated.where("channel", eq("channel", "phone"))),
    )
    b.talk(
        first("live campaigns", live),
        refine("just the field event ones", live.where("medium", eq("medium", "field_event"))),
    )
    feb = sel("leads", opened_at=opened(2025, 2))
    b.talk(
        first("leads opened in February 2025", feb),
        refine("and in March?", feb.where("opened_at", opened(2025, 3))),
    )
    march_won = sel("leads", opened_at=opened(2025, 3)).where("stage", stage("won"))
    b.talk(
        first("leads opened in March 2025", sel("leads", opened_at=opened(2025, 3))),
        refine("only the won ones", march_won),
        refine("and in April?", march_won.where("opened_at", opened(2025, 4))),
    )
    b.fit(
        companies,
        lambda c: [
            first(f"how many leads at {c}?", at(c).counted()),
            refine("only the lost ones", at(c).counted().where("stage", stage("lost"))),
        ],
    )
    b.fit(
        companies,
        lambda c: [
            first(f"won leads at {c}", won.where(co, eq(co, c))),
            refine(f"not {c}", won),
        ],
    )
    germany = sel("leads", country=eq("country", "Germany"))
    b.talk(
        first("leads in Germany", germany),
        refine("except those from webinars", germany.where("source", neq("source", "webinar"))),
    )
    b.fit(
        companies,
        lambda c: [
            first("lost leads", lost),
            refine(f"other than {c}", lost.where(co, neq(co, c))),
        ],
    )
    emea_off = sel("clients", region=eq("region", "EMEA"), is_active=eq("is_active", False))
    b.talk(
        first("clients in EMEA", sel("clients", region=eq("region", "EMEA"))),
        refine("only the inactive ones", emea_off),
        related("their campaigns", b.related(emea_off, "campaigns")),
    )
    csv = sel("staging_leads", origin=eq("origin", "csv"))
    b.talk(
        first("staged leads from csv files", csv),
        refine("only the valid ones", csv.where("validation", eq("validation", "valid"))),
    )
    pricing_urgent = sel(
        "inquiries", topic=eq("topic", "pricing"), priority=eq("priority", "urgent")
    )
    b.talk(
        first("pricing inquiries", sel("inquiries", topic=eq("topic", "pricing"))),
        refine("only the urgent ones", pricing_urgent),
        refine("how many of them?", pricing_urgent.counted()),
    )
    enabled = sel("sequences", enabled=eq("enabled", True))
    b.talk(
        first("enabled sequences", enabled),
        refine("just those with more than 7 steps", enabled.where("steps", cmp("steps", ">", 7))),
    )
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            refine("only the won ones", at(c).where("stage", stage("won"))),
            refine(f"not {c}", won),
        ],
    )

    # related
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            related("what about their conversations?", b.related(at(c), "conversations")),
        ],
    )
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            related("show their inquiries", b.related(at(c), "inquiries")),
        ],
    )
    b.fit(
        people,
        lambda p: [
            first(f"leads named {p[0]} {p[1]}", named(p)),
            related("their conversations", b.related(named(p), "conversations")),
        ],
    )
    b.fit(
        clients,
        lambda n: [
            first(f"campaigns of {n}", of_client(n)),
            related("their sequences", b.related(of_client(n), "sequences")),
        ],
    )
    conv_at = lambda c: b.related(at(c), "conversations")  # noqa: E731
    b.fit(
        companies,
        lambda c: [
            first(f"conversations of leads at {c}", conv_at(c)),
            related("their messages", b.related(conv_at(c), "messages")),
        ],
    )
    b.talk(
        first("urgent inquiries", urgent), related("and their leads?", b.related(urgent, "leads"))
    )
    batch = sel("staging_leads", batch_no=cmp("batch_no", "==", 120))
    b.talk(
        first("staged leads in batch 120", batch),
        related("their clients", b.related(batch, "clients")),
    )
    b.talk(
        first("platinum clients", platinum),
        related("show their campaigns", b.related(platinum, "campaigns")),
    )
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            related("and their client?", b.related(at(c), "clients")),
        ],
    )
    paused = sel("campaigns", state=eq("state", "paused"))
    b.talk(
        first("paused campaigns", paused),
        related("their sequences", b.related(paused, "sequences")),
    )
    one = lambda i: sel("leads", id=eq("id", i))  # noqa: E731
    b.fit(
        lead_ids,
        lambda i: [
            first(f"lead {i}", one(i)),
            related("what about their conversations?", b.related(one(i), "conversations")),
        ],
    )

    # item
    b.fit(
        companies, lambda c: [first(f"leads at {c}", at(c)), item("the first one", b.nth(at(c), 1))]
    )
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            item("the second one's conversations", b.nth(at(c), 2, "conversations")),
        ],
    )
    b.talk(first("platinum clients", platinum), item("the last one", b.nth(platinum, -1)))
    surname = lambda s: sel("leads", last_name=eq("last_name", s))  # noqa: E731
    b.fit(
        surnames,
        lambda s: [
            first(f"leads with the last name {s}", surname(s)),
            item("#3 of that list", b.nth(surname(s), 3)),
        ],
    )
    b.fit(
        companies,
        lambda c: [
            first(f"won leads at {c}", won.where(co, eq(co, c))),
            item("number 2 of those", b.nth(won.where(co, eq(co, c)), 2)),
        ],
    )
    b.fit(
        clients,
        lambda n: [
            first(f"campaigns of {n}", of_client(n)),
            item("the first one's sequences", b.nth(of_client(n), 1, "sequences")),
        ],
    )
    b.talk(
        first("urgent inquiries that are still unanswered", urgent_open),
        item("the last one", b.nth(urgent_open, -1)),
    )
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            item("conversations of the second one", b.nth(at(c), 2, "conversations")),
        ],
    )

    # page
    b.fit(
        companies,
        lambda c: [first(f"leads at {c}", at(c), limit=PAGE), page("next page", at(c), PAGE)],
    )
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c), limit=PAGE),
            page("more", at(c), PAGE),
            page("show more", at(c), 2 * PAGE),
        ],
    )
    b.talk(first("platinum clients", platinum, limit=PAGE), page("next page", platinum, PAGE))
    b.talk(first("won leads", won, limit=PAGE), page("next page", won, PAGE))
    b.talk(first("urgent inquiries", urgent, limit=PAGE), page("more", urgent, PAGE))
    b.talk(
        first("escalated conversations", escalated, limit=PAGE),
        page("next page", escalated, PAGE),
        page("more", escalated, 2 * PAGE),
    )

    # fresh
    def two_companies(c: str) -> list[Step]:
        other = next(o for o in companies if o != c)
        companies.remove(other)
        return [first(f"leads at {c}", at(c)), fresh(f"leads at {other}", at(other))]

    b.fit(companies, two_companies)
    nine = sel("campaigns", client_id=eq("client_id", 9))
    b.fit(
        companies,
        lambda c: [
            first(f"won leads at {c}", won.where(co, eq(co, c))),
            fresh("now campaigns of client 9", nine),
        ],
    )
    b.talk(
        first("escalated conversations", escalated),
        fresh("how many inquiries are urgent?", urgent.counted()),
    )
    b.talk(first("live campaigns", live), fresh("now leads in Spain", spain))
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            refine("only the won ones", at(c).where("stage", stage("won"))),
            fresh("now urgent inquiries", urgent),
        ],
    )
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            related("their conversations", conv_at(c)),
            fresh("now platinum clients", platinum),
        ],
    )
    b.talk(
        first("automated messages", sel("messages", is_automated=eq("is_automated", True))),
        fresh("now enabled sequences", enabled),
    )
    b.talk(
        first("gold tier clients", gold),
        fresh(
            "how many leads are flagged as duplicates?",
            sel("leads", is_duplicate=eq("is_duplicate", True)).counted(),
        ),
    )

    # longer chains
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            refine("only the lost ones", at(c).where("stage", stage("lost"))),
            item("the first one", b.nth(at(c).where("stage", stage("lost")), 1)),
        ],
    )
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            related("their conversations", conv_at(c)),
            refine("only the open ones", conv_at(c).where("resolution", eq("resolution", "open"))),
        ],
    )
    b.fit(
        clients,
        lambda n: [
            first(f"campaigns of {n}", of_client(n)),
            related("their sequences", b.related(of_client(n), "sequences")),
            item("the first one", b.nth(b.related(of_client(n), "sequences"), 1)),
        ],
    )
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            item("the last one", b.nth(at(c), -1)),
            related("their conversations", b.nth(at(c), -1, "conversations")),
        ],
    )
    esc_chat = escalated.where("channel", eq("channel", "chat"))
    b.fit(
        companies,
        lambda c: [
            first("escalated conversations", escalated),
            refine("just those over chat", esc_chat),
            fresh(f"now how many leads at {c}?", at(c).counted()),
        ],
    )
    in_country = lambda n: sel("leads", country=eq("country", n))  # noqa: E731
    b.fit(
        countries,
        lambda n: [
            first(f"leads in {n}", in_country(n)),
            refine("only the won ones", in_country(n).where("stage", stage("won"))),
            related(
                "their inquiries",
                b.related(in_country(n).where("stage", stage("won")), "inquiries"),
            ),
        ],
    )
    gold_campaigns = b.related(gold, "campaigns")
    b.talk(
        first("gold tier clients", gold),
        related("their campaigns", gold_campaigns),
        refine("only the live ones", gold_campaigns.where("state", eq("state", "live"))),
    )
    return b.made


# --- the set ------------------------------------------------------------------------------------


@functools.cache
def conversations() -> tuple[LabelledConversation, ...]:
    """Every labelled conversation, sample schema first."""
    return (*_sample(), *_second())


def _main() -> None:
    made = conversations()
    per_turn = Counter((c.schema, t.kind) for c in made for t in c.turns)
    length = Counter((c.schema, len(c.turns)) for c in made)
    print(f"{'turn kind':10}" + "".join(f"{s:>9}" for s in SCHEMAS))
    for kind in TURN_KINDS:
        print(f"{kind:10}" + "".join(f"{per_turn[s, kind]:>9}" for s in SCHEMAS))
    for turns in (2, 3):
        print(f"{str(turns) + '-turn':10}" + "".join(f"{length[s, turns]:>9}" for s in SCHEMAS))
    print(
        f"total {len(made)} conversations: "
        + ", ".join(f"{s} {sum(c.schema == s for c in made)}" for s in SCHEMAS)
    )


if __name__ == "__main__":
    _main()
