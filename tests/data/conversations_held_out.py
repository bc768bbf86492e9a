"""A held-out set of two- and three-turn conversations over the two schemas of
:mod:`tests.data.schema_questions`, written after the library's follow-up rules were tuned on the
labelled set (:mod:`tests.data.conversations`) and never used to tune them.

The turn kinds, the truths' semantics and the builder are those of
:mod:`tests.data.conversations` (imported, not copied): every truth is computed here in plain
Python from the rows, from an explicit :class:`~tests.data.conversations.Selection` per turn,
never through the library's parser. What differs is the **wording**: each follow-up is phrased
the way people and operational agents type them and no follow-up text of the labelled set is
reused ("just the ones from last month", "drop the Globex filter", "any of those in Spain?",
"who are their contacts?", "show me the 2nd", "go on", "and for Initech instead?", "excluding
the closed ones", "what did they say?", "count them", "previous page" …).

A few readings the truths settle where a person could hesitate, all following the labelled
set's documented semantics:

* "drop the X filter" / "leave out X" / "leaving out …" / "without …" / "but not …" are
  negations: a previous condition X names is removed, otherwise X is excluded (SQL ``<>``);
* "and for X instead?" names a value of a column the previous turn conditioned on, so it
  replaces that condition and keeps the others (a refinement, like "and in March?");
  a short company name ("Initech", "Globex") means every company holding the word;
* "any new ones?", "any of those in Spain?", "which ones haven't been answered yet?" ask rows;
  "how many is that?", "count them", "how many are qualified?" ask the count of the previous
  selection (with the new condition, if any); after a count, "and by phone?" is still a count;
* "who are their contacts?" are the related leads; "what did they say?" after conversations
  are the messages of those conversations (both directions); "who sent them?" after inquiries
  are their leads; "the leads behind them" likewise;
* "tell me more about the first one" is an item, not a page; "go back a page" and "previous
  page" are the previous window;
* "forget that, leads at X", "new question: …", "switching topics: …" and an unrelated table
  named in full are fresh questions, nothing carried over.

Some of these the agent may legitimately miss; that is the point of a held-out set.

``python -m tests.data.conversations_held_out`` prints the counts per schema and kind.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
from collections import Counter

from tests.data.conversations import (
    PAGE,
    SCHEMAS,
    TURN_KINDS,
    LabelledConversation,
    Step,
    Turn,
    _Talks,
    first,
    fresh,
    item,
    named,
    page,
    refine,
    related,
    sel,
)
from tests.data.schema_questions import (
    LAST_MONTH,
    Predicate,
    cmp,
    contains,
    eq,
    month,
    neq,
    span,
)

__all__ = ["held_out"]


class _HeldOut(_Talks):
    """The labelled set's builder, with its own conversation ids (``sample-h01`` …) and one
    more paging step: a last page turn whose offset goes back ("previous page")."""

    def talk(self, *steps: Step) -> None:
        *head, last = steps
        if last.kind == "page" and head and last.offset < head[-1].offset:
            before = head[-1]
            if not (
                before.kind == "page"
                and last.offset == before.offset - PAGE >= 0
                and last.limit == before.limit == PAGE
                and self.ids(last.selection) == self.ids(before.selection)
            ):
                raise AssertionError(f"bad previous page {[s.text for s in steps]}")
            super().talk(*head)
            made = self.made[-1]
            ids = self.ids(last.selection)
            back = Turn(
                text=last.text,
                kind="page",
                table=last.selection.table,
                answer="rows",
                truth_ids=ids,
                truth_count=len(ids),
                limit=PAGE,
                offset=last.offset,
            )
            self.made[-1] = dataclasses.replace(
                made, kinds=(*made.kinds, "page"), turns=(*made.turns, back)
            )
        else:
            super().talk(*steps)
        self.made[-1] = dataclasses.replace(
            self.made[-1], id=f"{self.schema}-h{len(self.made):02d}"
        )


def span_of(column: str, bounds: tuple[dt.date, dt.date]) -> Predicate:
    """``bounds[0] <= column < bounds[1]`` on whole UTC days."""
    return span(column, *bounds)


def span_month(column: str, year: int, number: int) -> Predicate:
    return span(column, *month(year, number))


def _short(company: str) -> str:
    """A company's first word ("Bluebell" for "Bluebell Textiles S.p.A.")."""
    return company.split()[0]


# --- the sample schema --------------------------------------------------------------------------


def _sample() -> list[LabelledConversation]:
    b = _HeldOut("sample", 31_001)
    co = "company_name"
    companies = b.pool(b.company_names(co, 12, 60))
    at = lambda c: sel("leads", company_name=eq(co, c))  # noqa: E731
    status = lambda v: eq("status", v)  # noqa: E731
    created = lambda y, m: span_month("created_at", y, m)  # noqa: E731
    surnames = b.pool(sorted({r["last_name"] for r in b.data["leads"]}))
    lead_ids = b.pool(sorted({r["lead_id"] for r in b.data["conversations"]}))
    clients = b.pool(sorted(r["name"] for r in b.data["clients"]))
    by_name = {r["name"]: r["id"] for r in b.data["clients"]}
    of_client = lambda n: sel("campaigns", client_id=eq("client_id", by_name[n]))  # noqa: E731
    qualified = sel("leads", status=status("qualified"))
    paused = sel("campaigns", status=status("paused"))
    open_conv = sel("conversations", status=status("open"))
    last_month = lambda column: span_of(column, LAST_MONTH)  # noqa: E731

    # refine
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            refine(
                "just the ones from last month", at(c).where("created_at", last_month("created_at"))
            ),
        ],
    )
    globex_q = qualified.where(co, contains(co, "Globex"))
    b.talk(
        first("qualified leads at Globex", globex_q),
        refine("drop the Globex filter", qualified),
    )
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            refine("which of them are customers?", at(c).where("status", status("customer"))),
            refine("how many is that?", at(c).where("status", status("customer")).counted()),
        ],
    )
    b.fit(
        companies, lambda c: [first(f"leads at {c}", at(c)), refine("count them", at(c).counted())]
    )
    open_n = open_conv.counted()
    b.talk(
        first("how many open conversations are there?", open_n),
        refine("and by phone?", open_n.where("channel", eq("channel", "phone"))),
    )
    b.talk(
        first("paused campaigns", paused),
        refine(
            "leaving out the linkedin ones", paused.where("channel", neq("channel", "linkedin"))
        ),
    )
    by_email = sel("conversations", channel=eq("channel", "email"))
    b.talk(
        first("conversations over email", by_email),
        refine("excluding the closed ones", by_email.where("status", neq("status", "closed"))),
    )
    may = sel("leads", created_at=created(2025, 5))
    b.talk(
        first("leads created in May 2025", may),
        refine("what about June?", may.where("created_at", created(2025, 6))),
    )
    b.fit(
        [c for c in companies if "Initech" not in c],
        lambda c: [
            first(f"qualified leads at {c}", qualified.where(co, eq(co, c))),
            refine("and for Initech instead?", qualified.where(co, contains(co, "Initech"))),
        ],
    )
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            refine("how many are qualified?", at(c).where("status", status("qualified")).counted()),
        ],
    )
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c} who are customers", at(c).where("status", status("customer"))),
            refine("and the contacted ones instead?", at(c).where("status", status("contacted"))),
        ],
    )
    waiting = sel("conversations", status=status("waiting"))
    b.talk(
        first("conversations that are waiting", waiting),
        refine("without the email ones", waiting.where("channel", neq("channel", "email"))),
    )
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            refine("any new ones?", at(c).where("status", status("new"))),
        ],
    )

    # related
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            related("any inquiries from them?", b.related(at(c), "inquiries")),
        ],
    )
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            related("pull up their conversations", b.related(at(c), "conversations")),
        ],
    )
    b.talk(
        first("paused campaigns", paused),
        related("which clients run them?", b.related(paused, "clients")),
    )
    one = lambda i: sel("leads", id=eq("id", i))  # noqa: E731
    b.fit(
        lead_ids,
        lambda i: [
            first(f"lead {i}", one(i)),
            related("any conversations with them?", b.related(one(i), "conversations")),
            related(
                "what did they say?", b.related(b.related(one(i), "conversations"), "messages")
            ),
        ],
    )
    b.fit(
        clients,
        lambda n: [
            first(f"campaigns of {n}", of_client(n)),
            related("who are the leads on those?", b.related(of_client(n), "leads")),
        ],
    )
    health = sel("clients", industry=eq("industry", "healthcare"))
    b.talk(
        first("clients in the healthcare industry", health),
        related("who are their contacts?", b.related(health, "leads")),
    )
    two_steps = sel("sequences", step_count=cmp("step_count", "==", 2))
    b.talk(
        first("sequences with exactly 2 steps", two_steps),
        related("which campaigns are those in?", b.related(two_steps, "campaigns")),
    )
    recent = sel("inquiries", received_at=last_month("received_at"))
    b.talk(
        first("inquiries received last month", recent),
        related("and the leads behind them?", b.related(recent, "leads")),
    )

    # item
    b.fit(
        companies,
        lambda c: [first(f"leads at {c}", at(c)), item("show me the 2nd", b.nth(at(c), 2))],
    )
    b.fit(
        companies,
        lambda c: [first(f"leads at {c}", at(c)), item("open the third one", b.nth(at(c), 3))],
    )
    b.talk(first("paused campaigns", paused), item("details on the first", b.nth(paused, 1)))
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            item("the last lead's conversations", b.nth(at(c), -1, "conversations")),
        ],
    )
    b.fit(
        clients,
        lambda n: [
            first(f"campaigns of {n}", of_client(n)),
            item("sequences of the 2nd one", b.nth(of_client(n), 2, "sequences")),
        ],
    )
    surname = lambda s: sel("leads", last_name=eq("last_name", s))  # noqa: E731
    b.fit(
        surnames,
        lambda s: [
            first(f"leads with the last name {s}", surname(s)),
            item("what about #2?", b.nth(surname(s), 2)),
        ],
    )
    b.fit(
        companies,
        lambda c: [
            first(f"qualified leads at {c}", qualified.where(co, eq(co, c))),
            item("tell me more about the first one", b.nth(qualified.where(co, eq(co, c)), 1)),
        ],
    )

    # page
    b.fit(
        companies,
        lambda c: [first(f"leads at {c}", at(c), limit=PAGE), page("go on", at(c), PAGE)],
    )
    b.talk(
        first("qualified leads", qualified, limit=PAGE),
        page("keep going", qualified, PAGE),
        page("next 5", qualified, 2 * PAGE),
    )
    b.talk(first("open conversations", open_conv, limit=PAGE), page("page 2", open_conv, PAGE))
    b.talk(first("paused campaigns", paused, limit=PAGE), page("next page please", paused, PAGE))
    b.talk(
        first("inquiries received last month", recent, limit=PAGE),
        page("more please", recent, PAGE),
        page("go back a page", recent, 0),
    )

    # fresh
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            fresh("ok, now show me paused campaigns", paused),
        ],
    )
    b.talk(
        first("open conversations", open_conv),
        fresh("switching topics: how many clients are in healthcare?", health.counted()),
    )

    def forget(c: str) -> list[Step]:
        other = next(o for o in companies if o != c)
        companies.remove(other)
        return [
            first(f"qualified leads at {c}", qualified.where(co, eq(co, c))),
            fresh(f"forget that, leads at {other}", at(other)),
        ]

    b.fit(companies, forget)
    b.talk(
        first("paused campaigns", paused),
        fresh("what inquiries came in last month?", recent),
    )
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            fresh("new question: which sequences have 2 steps?", two_steps),
        ],
    )
    b.talk(
        first("inbound messages", sel("messages", direction=eq("direction", "inbound"))),
        fresh("campaigns on linkedin", sel("campaigns", channel=eq("channel", "linkedin"))),
    )
    return b.made


# --- the second schema --------------------------------------------------------------------------


def _second() -> list[LabelledConversation]:
    b = _HeldOut("second", 31_002)
    co = "company"
    companies = b.pool(b.company_names(co, 11, 100))
    at = lambda c: sel("leads", company=eq(co, c))  # noqa: E731
    stage = lambda v: eq("stage", v)  # noqa: E731
    opened = lambda y, m: span_month("opened_at", y, m)  # noqa: E731
    people = b.pool(sorted({(r["first_name"], r["last_name"]) for r in b.data["leads"]}))
    surnames = b.pool(sorted({r["last_name"] for r in b.data["leads"]}))
    lead_ids = b.pool(sorted({r["lead_id"] for r in b.data["conversations"]}))
    clients = b.pool(sorted(r["name"] for r in b.data["clients"] if "Partner" not in r["name"]))
    by_name = {r["name"]: r["id"] for r in b.data["clients"]}
    of_client = lambda n: sel("campaigns", client_id=eq("client_id", by_name[n]))  # noqa: E731
    batches = b.pool(sorted({r["batch_no"] for r in b.data["staging_leads"]}))
    won = sel("leads", stage=stage("won"))
    urgent = sel("inquiries", priority=eq("priority", "urgent"))
    escalated = sel("conversations", resolution=eq("resolution", "escalated"))
    platinum = sel("clients", tier=eq("tier", "platinum"))
    gold = sel("clients", tier=eq("tier", "gold"))
    live = sel("campaigns", state=eq("state", "live"))
    spain = sel("leads", country=eq("country", "Spain"))

    # refine
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            refine("any of those in Spain?", at(c).where("country", eq("country", "Spain"))),
        ],
    )
    b.fit(
        companies,
        lambda c: [
            first(f"won leads at {c}", won.where(co, eq(co, c))),
            refine(f"drop the {_short(c)} filter", won),
        ],
    )
    germany = sel("leads", country=eq("country", "Germany"))
    b.talk(
        first("leads in Germany", germany),
        refine(
            "just the ones from last month",
            germany.where("opened_at", span_of("opened_at", LAST_MONTH)),
        ),
    )
    b.talk(
        first("urgent inquiries", urgent),
        refine(
            "which ones haven't been answered yet?",
            urgent.where("is_answered", eq("is_answered", False)),
        ),
    )
    b.talk(
        first("escalated conversations", escalated),
        refine("leave out the email ones", escalated.where("channel", neq("channel", "email"))),
    )
    b.talk(
        first("live campaigns", live),
        refine("excluding paid social", live.where("medium", neq("medium", "paid_social"))),
    )
    b.talk(
        first("gold tier clients", gold),
        refine("how many are in EMEA?", gold.where("region", eq("region", "EMEA")).counted()),
    )
    won_n = won.counted()
    b.talk(
        first("how many won leads are there?", won_n),
        refine("and lost?", won_n.where("stage", stage("lost"))),
    )
    may = sel("leads", opened_at=opened(2025, 5))
    b.talk(
        first("leads opened in May 2025", may),
        refine("what about June?", may.where("opened_at", opened(2025, 6))),
    )
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            refine("only referrals", at(c).where("source", eq("source", "referral"))),
        ],
    )
    batch = lambda n: sel("staging_leads", batch_no=cmp("batch_no", "==", n))  # noqa: E731
    b.fit(
        batches,
        lambda n: [
            first(f"staged leads in batch {n}", batch(n)),
            refine(
                "just the rejected ones",
                batch(n).where("validation", contains("validation", "rejected")),
            ),
        ],
    )
    webinar = sel("leads", source=eq("source", "webinar"))
    b.talk(
        first("leads from webinars", webinar),
        refine(
            "but not the ones in the United States",
            webinar.where("country", neq("country", "United States")),
        ),
    )

    def instead(c: str) -> list[Step]:
        other = next(o for o in companies if o != c and _short(o) != _short(c))
        return [
            first(f"won leads at {c}", won.where(co, eq(co, c))),
            refine(f"and for {_short(other)} instead?", won.where(co, contains(co, _short(other)))),
        ]

    b.fit(companies, instead)
    emea = sel("clients", region=eq("region", "EMEA"))
    b.talk(first("clients in EMEA", emea), refine("count them", emea.counted()))
    enabled = sel("sequences", enabled=eq("enabled", True))
    b.talk(
        first("enabled sequences", enabled),
        refine("with at least 8 steps", enabled.where("steps", cmp("steps", ">=", 8))),
    )
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            refine("excluding duplicates", at(c).where("is_duplicate", eq("is_duplicate", False))),
        ],
    )

    # related
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            related("pull up their inquiries", b.related(at(c), "inquiries")),
        ],
    )
    b.talk(first("urgent inquiries", urgent), related("who sent them?", b.related(urgent, "leads")))
    b.talk(
        first("platinum clients", platinum),
        related("what campaigns do they have?", b.related(platinum, "campaigns")),
    )
    b.fit(
        people,
        lambda p: [
            first(f"leads named {p[0]} {p[1]}", named(p)),
            related("any conversations with them?", b.related(named(p), "conversations")),
        ],
    )
    one = lambda i: sel("leads", id=eq("id", i))  # noqa: E731
    b.fit(
        lead_ids,
        lambda i: [
            first(f"lead {i}", one(i)),
            related("and their conversations", b.related(one(i), "conversations")),
            related(
                "what did they say?", b.related(b.related(one(i), "conversations"), "messages")
            ),
        ],
    )
    b.fit(
        clients,
        lambda n: [
            first(f"campaigns of {n}", of_client(n)),
            related("who are the leads on those?", b.related(of_client(n), "leads")),
        ],
    )
    paused = sel("campaigns", state=eq("state", "paused"))
    b.talk(
        first("paused campaigns", paused),
        related("which clients own them?", b.related(paused, "clients")),
    )
    b.talk(
        first("gold tier clients", gold),
        related("who are their contacts?", b.related(gold, "leads")),
    )
    esc_chat = escalated.where("channel", eq("channel", "chat"))
    b.talk(
        first("escalated conversations over chat", esc_chat),
        related("show me the leads behind them", b.related(esc_chat, "leads")),
    )

    # item
    b.fit(
        companies,
        lambda c: [first(f"leads at {c}", at(c)), item("show me the 2nd", b.nth(at(c), 2))],
    )
    b.talk(first("platinum clients", platinum), item("open the third one", b.nth(platinum, 3)))
    b.fit(
        companies,
        lambda c: [
            first(f"won leads at {c}", won.where(co, eq(co, c))),
            item("and the last one?", b.nth(won.where(co, eq(co, c)), -1)),
        ],
    )
    b.fit(
        clients,
        lambda n: [
            first(f"campaigns of {n}", of_client(n)),
            item("the 1st one's sequences", b.nth(of_client(n), 1, "sequences")),
        ],
    )
    surname = lambda s: sel("leads", last_name=eq("last_name", s))  # noqa: E731
    b.fit(
        surnames,
        lambda s: [
            first(f"leads with the last name {s}", surname(s)),
            item("give me number four", b.nth(surname(s), 4)),
        ],
    )
    b.talk(first("urgent inquiries", urgent), item("the 5th one", b.nth(urgent, 5)))
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            item("tell me more about the first one", b.nth(at(c), 1)),
        ],
    )
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            item("inquiries for the second lead", b.nth(at(c), 2, "inquiries")),
        ],
    )

    # page
    b.fit(
        companies,
        lambda c: [first(f"leads at {c}", at(c), limit=PAGE), page("go on", at(c), PAGE)],
    )
    b.talk(first("won leads", won, limit=PAGE), page("next 5", won, PAGE))
    b.talk(
        first("escalated conversations", escalated, limit=PAGE),
        page("keep going", escalated, PAGE),
        page("more please", escalated, 2 * PAGE),
    )
    b.talk(first("urgent inquiries", urgent, limit=PAGE), page("page 2", urgent, PAGE))
    b.talk(
        first("platinum clients", platinum, limit=PAGE),
        page("nxt page", platinum, PAGE),
        page("previous page", platinum, 0),
    )
    b.talk(first("live campaigns", live, limit=PAGE), page("continue", live, PAGE))

    # fresh
    def forget(c: str) -> list[Step]:
        other = next(o for o in companies if o != c)
        companies.remove(other)
        return [
            first(f"won leads at {c}", won.where(co, eq(co, c))),
            fresh(f"forget that, leads at {other}", at(other)),
        ]

    b.fit(companies, forget)
    b.talk(
        first("leads in Spain", spain),
        fresh("ok now how many platinum clients do we have?", platinum.counted()),
    )
    b.talk(
        first("escalated conversations", escalated),
        fresh("new question: paused campaigns", paused),
    )
    b.talk(
        first("urgent inquiries", urgent),
        fresh(
            "switching gears: staged leads from csv files",
            sel("staging_leads", origin=eq("origin", "csv")),
        ),
    )
    b.talk(
        first("gold tier clients", gold),
        fresh("leads in Portugal please", sel("leads", country=eq("country", "Portugal"))),
    )
    b.fit(
        companies,
        lambda c: [
            first(f"leads at {c}", at(c)),
            related("any conversations with them?", b.related(at(c), "conversations")),
            fresh(
                "how many inquiries are about pricing?",
                sel("inquiries", topic=eq("topic", "pricing")).counted(),
            ),
        ],
    )
    return b.made


# --- the set ------------------------------------------------------------------------------------


@functools.cache
def held_out() -> tuple[LabelledConversation, ...]:
    """Every held-out conversation, sample schema first."""
    return (*_sample(), *_second())


def _check_new_wording() -> None:
    """No follow-up text of the held-out set is one of the labelled set's."""
    from tests.data.conversations import conversations

    seen = {t.text.casefold() for c in conversations() for t in c.turns[1:]}
    reused = sorted({t.text for c in held_out() for t in c.turns[1:] if t.text.casefold() in seen})
    if reused:
        raise AssertionError(f"follow-ups reused from the labelled set: {reused}")


def _main() -> None:
    made = held_out()
    _check_new_wording()
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
