"""A labelled question set over two schemas: the bundled sample and the second test schema.

Questions are written the way an operational agent or a sales person asks them, from templates
filled with values drawn from the data (companies, people, e-mail addresses, countries), over
the same eight table names on both schemas:

* ``"sample"``: :mod:`persistence.schema`'s reference schema with the bundled sample rows
  (:func:`rag_agent.ops.sample.sample_rows`);
* ``"second"``: :mod:`tests.data.second_schema` (other columns, enums, booleans, values).

Every question carries its **ground truth, computed here in plain Python** from the rows with an
explicit predicate per question (never through the library's parser): for a row question the set
of matching ``id``s, for a "how many" question the count. Conventions of the truths:

* comparisons follow SQL: a NULL never matches, so "leads that are not customers" are the leads
  whose status is set and is not ``customer`` (the second schema's negated columns are all
  ``NOT NULL``, so there the question is unambiguous);
* text values are matched case-insensitively and whole ("clients in the Retail industry" is
  ``industry = 'retail'`` ignoring case); a partial word means every value that holds the word
  ("rejected staged leads": both ``rejected_duplicate`` and ``rejected_invalid``);
* dates are half-open ranges of whole UTC days, read against :data:`NOW` (Wednesday
  2025-09-17): ``last week`` is Monday 2025-09-08 up to Monday 2025-09-15, ``last month`` is
  August 2025, ``last quarter`` Q2 2025, ``in the last 7 days`` the seven days ending today, a
  month without a year the most recent one not in the future, ``since X`` has no upper bound,
  ``between February and April 2025`` is 2025-02-01 up to 2025-05-01;
* related rows follow the foreign keys: "leads of gold-tier clients" are the leads whose client
  is gold, "clients with urgent inquiries" the clients with at least one;
* a question with leftover words ("…, need them before my 9am call") has the rows of its
  conditions alone as its truth: the extra words must neither filter nor empty the answer.

Each question says whether the agent is given its table (:attr:`Question.given_table`): it is
``None`` when the text names the table by its plain noun ("campaigns", "staged leads"), so the
agent must read it from the text, and the table otherwise ("won deals", "who is x@y?").

Classes (:data:`CLASSES`) are those of the vocabulary issue; every class holds questions of both
schemas, and each (schema, class) is split deterministically into halves of equal size (one more
``held_out`` when odd): ``tune`` may be looked at while working on the parser, ``held_out`` not.

``python -m tests.data.schema_questions`` prints the counts per schema, class and half.
"""

from __future__ import annotations

import datetime as dt
import functools
import random
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from tests.data import second_schema
from tests.data.second_schema import NOW

__all__ = [
    "CLASSES",
    "NOW",
    "SCHEMAS",
    "Builder",
    "Question",
    "names_table",
    "questions",
    "schema_rows",
]

Row = dict[str, Any]
Predicate = Callable[[Row], bool]

SCHEMAS = ("sample", "second")
#: The question classes, in report order.
CLASSES = (
    "value_exact",  # a status / enum / category value by its own word
    "value_partial",  # a word that is part of a value (refund -> refund_request)
    "value_synonym",  # another word for a value (won deals, incoming, live, turned off)
    "negation",  # not, isn't/aren't, except, other than, neither ... nor
    "column_value",  # the column named with its value (in the Retail industry)
    "value_alone",  # a value of the one column that holds it (leads in Spain)
    "number",  # numeric columns by their words (budget above 20k)
    "boolean",  # yes/no columns by their words; on the sample, a value present or missing
    "date",  # periods, quarters, since, ranges with the year carried across
    "person_name",  # first/last/full-name columns
    "email",  # an address on the column it matches (own vs owner's)
    "related",  # rows through foreign keys, either direction
    "count",  # "how many" over all of the above
    "leftover",  # harmless extra words that must not change the answer
)

#: The plain nouns that name each table in a question (see Question.given_table).
_TABLE_NOUNS = {
    "leads": r"leads?",
    "campaigns": r"campaigns?",
    "sequences": r"sequences?",
    "clients": r"clients?",
    "conversations": r"conversations?",
    "messages": r"messages?",
    "inquiries": r"inquir(?:y|ies)",
    "staging_leads": r"stag(?:ed|ing) leads?",
}


def names_table(table: str, text: str) -> bool:
    """Whether ``text`` names ``table`` by its plain noun (then the agent is not given it)."""
    named = re.search(rf"\b{_TABLE_NOUNS[table]}\b", text, re.IGNORECASE) is not None
    if table == "leads" and re.search(r"\bstag(?:ed|ing) leads?\b", text, re.IGNORECASE):
        named = re.search(r"(?<!staged )(?<!staging )\bleads?\b", text) is not None
    return named


@dataclass(frozen=True)
class Question:
    """One labelled question. ``kind`` is ``"rows"`` (truth: ``truth_ids``, and its size as
    the expected ``total_count``) or ``"count"`` (truth: ``truth_count``)."""

    id: str
    schema: str
    table: str
    text: str
    cls: str
    half: str
    kind: str
    truth_ids: frozenset[Any]
    truth_count: int
    given_table: str | None
    zero: bool = False

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, with ``class`` for ``cls`` and the ids sorted."""
        data = asdict(self)
        data["class"] = data.pop("cls")
        data["truth_ids"] = sorted(self.truth_ids, key=str)
        return data


# --- rows ---------------------------------------------------------------------------------------


@functools.cache
def _sample() -> dict[str, tuple[Row, ...]]:
    from rag_agent.ops.sample import SAMPLE_TABLES, sample_rows

    return {table: tuple(sample_rows(table)) for table in SAMPLE_TABLES}


@functools.cache
def _second() -> dict[str, tuple[Row, ...]]:
    return {table: tuple(second_schema.rows(table)) for table in second_schema.SECOND_TABLES}


def schema_rows(schema: str) -> Mapping[str, tuple[Row, ...]]:
    """Every table's rows of ``schema`` (``"sample"`` or ``"second"``); do not mutate them."""
    if schema == "sample":
        return _sample()
    if schema == "second":
        return _second()
    raise ValueError(f"unknown schema {schema!r}; one of {SCHEMAS}")


# --- predicates ---------------------------------------------------------------------------------


def _fold(value: Any) -> str | None:
    return value.casefold() if isinstance(value, str) else None


def eq(column: str, value: Any) -> Predicate:
    """The column equals ``value`` (text compared ignoring case)."""
    if isinstance(value, str):
        folded = value.casefold()
        return lambda r: _fold(r[column]) == folded
    return lambda r: r[column] is not None and r[column] == value


def one_of(column: str, values: Iterable[Any]) -> Predicate:
    tests = [eq(column, v) for v in values]
    return lambda r: any(t(r) for t in tests)


def neq(column: str, *values: Any) -> Predicate:
    """SQL ``<>`` / ``NOT IN``: set, and none of ``values``."""
    inside = one_of(column, values)
    return lambda r: r[column] is not None and not inside(r)


def contains(column: str, word: str) -> Predicate:
    folded = word.casefold()
    return lambda r: isinstance(r[column], str) and folded in r[column].casefold()


def is_null(column: str, missing: bool = True) -> Predicate:
    return lambda r: (r[column] is None) == missing


def cmp(column: str, op: str, value: Any) -> Predicate:
    ops: dict[str, Callable[[Any, Any], bool]] = {
        ">": lambda a, b: a > b,
        ">=": lambda a, b: a >= b,
        "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b,
        "==": lambda a, b: a == b,
    }
    test = ops[op]
    return lambda r: r[column] is not None and test(r[column], value)


def span(column: str, start: dt.date | None, end: dt.date | None) -> Predicate:
    """``start <= column < end`` on whole UTC days (either bound may be open)."""

    def test(r: Row) -> bool:
        value = r[column]
        if value is None:
            return False
        if isinstance(value, dt.datetime):
            value = value.astimezone(dt.UTC).date()
        return (start is None or value >= start) and (end is None or value < end)

    return test


def both(*tests: Predicate) -> Predicate:
    return lambda r: all(t(r) for t in tests)


def month(year: int, number: int) -> tuple[dt.date, dt.date]:
    start = dt.date(year, number, 1)
    end = dt.date(year + (number == 12), number % 12 + 1, 1)
    return start, end


def quarter(year: int, number: int) -> tuple[dt.date, dt.date]:
    start = dt.date(year, 3 * number - 2, 1)
    end = dt.date(year + (number == 4), (3 * number) % 12 + 1, 1)
    return start, end


def year(number: int) -> tuple[dt.date, dt.date]:
    return dt.date(number, 1, 1), dt.date(number + 1, 1, 1)


TODAY = NOW.date()
LAST_WEEK = (dt.date(2025, 9, 8), dt.date(2025, 9, 15))
LAST_MONTH = month(2025, 8)
THIS_MONTH = month(2025, 9)
LAST_QUARTER = quarter(2025, 2)
THIS_QUARTER = quarter(2025, 3)
THIS_YEAR = year(2025)
YESTERDAY = (dt.date(2025, 9, 16), TODAY)
LAST_7_DAYS = (TODAY - dt.timedelta(days=6), TODAY + dt.timedelta(days=1))


# --- the builder --------------------------------------------------------------------------------


class Builder:
    """Picks drawn from one schema's rows (seeded) and the related-row predicates; the
    conversation set (:mod:`tests.data.conversations`) builds on it too."""

    def __init__(self, schema: str, seed: int) -> None:
        self.schema = schema
        self.data = schema_rows(schema)
        self.by_id = {t: {r["id"]: r for r in rows} for t, rows in self.data.items()}
        self.rnd = random.Random(seed)  # reproducible picks, not secrets
        self.items: list[dict[str, Any]] = []

    # Related rows.
    def parent(self, table: str, column: str, test: Predicate) -> Predicate:
        """Rows whose ``column`` refers to a row of ``table`` that passes ``test``."""
        ok = {r["id"] for r in self.data[table] if test(r)}
        return lambda r: r[column] in ok

    def child(self, table: str, column: str, test: Predicate) -> Predicate:
        """Rows that at least one row of ``table`` (through its ``column``) passing ``test``
        refers to."""
        ok = {r[column] for r in self.data[table] if test(r)}
        return lambda r: r["id"] in ok

    def add(
        self,
        cls: str,
        table: str,
        text: str,
        test: Predicate,
        *,
        count: bool = False,
        zero: bool = False,
    ) -> None:
        ids = frozenset(r["id"] for r in self.data[table] if test(r))
        if bool(ids) == zero:
            raise AssertionError(f"{self.schema}: {text!r} has {len(ids)} rows (zero={zero})")
        named = names_table(table, text)
        self.items.append(
            {
                "schema": self.schema,
                "table": table,
                "text": text,
                "cls": cls,
                "kind": "count" if count else "rows",
                "truth_ids": frozenset() if count else ids,
                "truth_count": len(ids),
                "given_table": None if named else table,
                "zero": zero,
            }
        )

    # Picks drawn from the data.
    def company_names(self, column: str, low: int, high: int) -> list[str]:
        """Lead companies with ``low`` to ``high`` leads, sorted; none named "Acme …" and none
        whose name is inside another's."""
        counts = Counter(r[column] for r in self.data["leads"])
        names = sorted(counts)
        return [
            n
            for n in names
            if low <= counts[n] <= high
            and not n.startswith("Acme")
            and not any(n != o and n.casefold() in o.casefold() for o in names)
        ]

    def companies(self, column: str, low: int, high: int, k: int) -> list[str]:
        return self.rnd.sample(self.company_names(column, low, high), k)

    def people(self, k: int) -> list[tuple[str, str]]:
        pairs = sorted({(r["first_name"], r["last_name"]) for r in self.data["leads"]})
        return self.rnd.sample(pairs, k)

    def values(self, table: str, column: str, k: int) -> list[Any]:
        found = sorted({r[column] for r in self.data[table] if r[column] is not None}, key=str)
        return self.rnd.sample(found, k)


# --- the sample schema --------------------------------------------------------------------------


def _sample_questions() -> list[dict[str, Any]]:  # one template per line
    b = Builder("sample", 26_001)
    add, parent, child = b.add, b.parent, b.child
    c1, c2, c3, c4, c5, c6 = b.companies("company_name", 15, 60, 6)
    people = b.people(8)
    emails = b.values("leads", "email", 6)
    staged_emails = b.values("staging_leads", "email", 3)
    status = lambda v: eq("status", v)  # noqa: E731

    cls = "value_exact"
    add(cls, "leads", "qualified leads", status("qualified"))
    add(cls, "campaigns", "show me the paused campaigns", status("paused"))
    add(cls, "conversations", "open conversations", status("open"))
    add(cls, "conversations", "conversations that are waiting", status("waiting"))
    add(cls, "campaigns", "completed campaigns", status("completed"))
    add(cls, "campaigns", "which campaigns are active?", status("active"))
    add(cls, "leads", "new leads", status("new"))
    add(cls, "leads", "leads marked as contacted", status("contacted"))
    add(cls, "leads", "list the unqualified leads", status("unqualified"))
    add(cls, "leads", "leads who are customers", status("customer"))
    add(cls, "conversations", "closed conversations", status("closed"))
    add(cls, "messages", "outbound messages", eq("direction", "outbound"))
    add(cls, "messages", "inbound messages please", eq("direction", "inbound"))
    add(cls, "leads", "contacted leads", status("contacted"))

    cls = "value_partial"
    add(cls, "staging_leads", "staged leads from the csv import", eq("source", "csv_import"))
    add(
        cls, "staging_leads", "staging leads that came from trade shows", eq("source", "trade_show")
    )
    add(cls, "staging_leads", "staged leads from the web form", eq("source", "web_form"))
    add(cls, "clients", "our food clients", eq("industry", "food & beverage"))
    add(cls, "campaigns", "webinar campaigns", contains("name", "webinar"))
    add(cls, "campaigns", "the referral campaigns", contains("name", "referral"))
    add(cls, "campaigns", "launch campaigns", contains("name", "launch"))
    add(cls, "inquiries", "invoice inquiries", eq("subject", "Invoice copy"))
    add(cls, "inquiries", "renewal inquiries", eq("subject", "Contract renewal"))
    add(cls, "inquiries", "demo request inquiries", eq("subject", "Request a demo"))
    add(cls, "inquiries", "security inquiries", eq("subject", "Security questionnaire"))
    add(cls, "inquiries", "integration inquiries", eq("subject", "Integration with our CRM"))
    add(cls, "inquiries", "pricing inquiries", eq("subject", "Pricing question"))
    add(cls, "inquiries", "onboarding inquiries", eq("subject", "Onboarding help"))

    cls = "value_synonym"
    add(cls, "leads", "converted leads", status("customer"))
    add(cls, "leads", "disqualified leads", status("unqualified"))
    add(cls, "campaigns", "live campaigns", status("active"))
    add(cls, "campaigns", "campaigns that are still running", status("active"))
    add(cls, "campaigns", "campaigns on hold", status("paused"))
    add(cls, "campaigns", "finished campaigns", status("completed"))
    add(cls, "conversations", "resolved conversations", status("closed"))
    add(cls, "conversations", "conversations awaiting a reply", status("waiting"))
    add(cls, "conversations", "pending conversations", status("waiting"))
    add(cls, "messages", "incoming messages", eq("direction", "inbound"))
    add(cls, "messages", "outgoing messages", eq("direction", "outbound"))
    add(cls, "messages", "replies we received", eq("direction", "inbound"))
    add(cls, "conversations", "ongoing conversations", status("open"))
    add(cls, "leads", "won deals", status("customer"))

    cls = "negation"
    add(cls, "campaigns", "campaigns other than paused ones", neq("status", "paused"))
    add(cls, "conversations", "conversations that aren't closed", neq("status", "closed"))
    add(cls, "messages", "messages that are not inbound", neq("direction", "inbound"))
    add(cls, "staging_leads", "staged leads except referrals", neq("source", "referral"))
    add(
        cls,
        "conversations",
        "conversations that are neither open nor waiting",
        neq("status", "open", "waiting"),
    )
    add(cls, "campaigns", "campaigns not run on linkedin", neq("channel", "linkedin"))
    add(cls, "leads", "leads that are not customers", neq("status", "customer"))
    add(
        cls,
        "leads",
        "leads whose status is neither new nor contacted",
        neq("status", "new", "contacted"),
    )
    add(cls, "clients", "clients not in the software industry", neq("industry", "software"))
    add(cls, "conversations", "conversations not over email", neq("channel", "email"))
    add(cls, "campaigns", "campaigns that aren't completed", neq("status", "completed"))
    add(
        cls,
        "inquiries",
        "inquiries whose subject isn't Pricing question",
        neq("subject", "Pricing question"),
    )
    add(cls, "staging_leads", "staged leads not from linkedin", neq("source", "linkedin"))
    add(cls, "campaigns", "campaigns that are not active", neq("status", "active"))

    cls = "column_value"
    add(cls, "leads", "leads whose status is qualified", status("qualified"))
    add(cls, "campaigns", "campaigns with status paused", status("paused"))
    add(cls, "campaigns", "campaigns on the email channel", eq("channel", "email"))
    add(cls, "conversations", "conversations with channel linkedin", eq("channel", "linkedin"))
    add(cls, "staging_leads", "staged leads whose source is referral", eq("source", "referral"))
    add(cls, "clients", "clients in the Retail industry", eq("industry", "retail"))
    add(cls, "clients", "clients in the healthcare industry", eq("industry", "healthcare"))
    add(cls, "messages", "messages with direction outbound", eq("direction", "outbound"))
    add(
        cls,
        "inquiries",
        "inquiries with subject Contract renewal",
        eq("subject", "Contract renewal"),
    )
    add(cls, "leads", "leads with the title CTO", eq("title", "CTO"))
    add(cls, "leads", f"leads whose company is {c1}", eq("company_name", c1))
    add(cls, "conversations", "conversations whose status is waiting", status("waiting"))
    add(cls, "leads", "leads with job title Founder", eq("title", "Founder"))
    add(cls, "campaigns", "campaigns named Spring outreach", eq("name", "Spring outreach"))

    cls = "value_alone"
    add(cls, "conversations", "linkedin conversations", eq("channel", "linkedin"))
    add(cls, "campaigns", "phone campaigns", eq("channel", "phone"))
    add(cls, "clients", "software clients", eq("industry", "software"))
    add(cls, "clients", "our logistics clients", eq("industry", "logistics"))
    add(cls, "staging_leads", "staged leads from referrals", eq("source", "referral"))
    add(cls, "staging_leads", "linkedin staged leads", eq("source", "linkedin"))
    add(cls, "conversations", "email conversations", eq("channel", "email"))
    add(cls, "leads", "leads who are CFOs", eq("title", "CFO"))
    add(cls, "leads", f"leads at {c2}", eq("company_name", c2))
    add(cls, "leads", f"{c3} leads", eq("company_name", c3))
    add(cls, "leads", "VP Sales contacts", eq("title", "VP Sales"))
    add(cls, "conversations", "phone conversations", eq("channel", "phone"))
    add(cls, "campaigns", "email campaigns", eq("channel", "email"))
    add(cls, "leads", f"people at {c4}", eq("company_name", c4))

    cls = "number"
    add(cls, "leads", "leads with a score above 90", cmp("score", ">", 90))
    add(cls, "leads", "leads with a score of at least 95", cmp("score", ">=", 95))
    add(cls, "leads", "leads scoring below 5", cmp("score", "<", 5))
    add(
        cls,
        "leads",
        "leads with a score between 40 and 45",
        both(cmp("score", ">=", 40), cmp("score", "<=", 45)),
    )
    add(cls, "sequences", "sequences with more than 5 steps", cmp("step_count", ">", 5))
    add(cls, "sequences", "sequences with at most 3 steps", cmp("step_count", "<=", 3))
    add(cls, "sequences", "sequences with exactly 4 steps", cmp("step_count", "==", 4))
    add(cls, "leads", "leads with a score of 100", cmp("score", "==", 100))
    add(cls, "leads", "leads scored under 10", cmp("score", "<", 10))
    add(cls, "sequences", "sequences with fewer than 3 steps", cmp("step_count", "<", 3))
    add(cls, "sequences", "7-step sequences", cmp("step_count", "==", 7))
    add(cls, "leads", "leads whose score is no more than 3", cmp("score", "<=", 3))
    add(cls, "leads", "leads with a score over 97", cmp("score", ">", 97))
    add(
        cls, "sequences", "sequences with more than 10 steps", cmp("step_count", ">", 10), zero=True
    )

    cls = "boolean"
    add(cls, "leads", "leads without a phone number", is_null("phone"))
    add(cls, "leads", "leads that have no title", is_null("title"))
    add(cls, "leads", "leads missing a score", is_null("score"))
    add(cls, "staging_leads", "staged leads without an email", is_null("email"))
    add(cls, "leads", "leads with no status", is_null("status"))
    add(cls, "leads", "leads not attached to any campaign", is_null("campaign_id"))
    add(
        cls,
        "leads",
        f"leads at {c5} with a phone number",
        both(eq("company_name", c5), is_null("phone", False)),
    )
    add(
        cls,
        "leads",
        f"leads at {c6} without a title",
        both(eq("company_name", c6), is_null("title")),
    )
    add(
        cls, "leads", "qualified leads without a phone", both(status("qualified"), is_null("phone"))
    )
    add(
        cls,
        "staging_leads",
        "linkedin staged leads that have an email address",
        both(eq("source", "linkedin"), is_null("email", False)),
    )
    add(
        cls,
        "leads",
        f"leads at {c1} missing a score",
        both(eq("company_name", c1), is_null("score")),
    )
    add(
        cls,
        "leads",
        "customer leads with no phone on file",
        both(status("customer"), is_null("phone")),
    )

    cls = "date"
    add(cls, "leads", "leads created in March 2025", span("created_at", *month(2025, 3)))
    add(cls, "leads", "leads added last month", span("created_at", *LAST_MONTH))
    add(cls, "leads", "leads created in Q1 2025", span("created_at", *quarter(2025, 1)))
    add(
        cls,
        "leads",
        "leads created since last October",
        span("created_at", dt.date(2024, 10, 1), None),
    )
    add(
        cls,
        "leads",
        "leads created between February and April 2025",
        span("created_at", dt.date(2025, 2, 1), dt.date(2025, 5, 1)),
    )
    add(cls, "leads", "leads created before 2025", span("created_at", None, dt.date(2025, 1, 1)))
    add(cls, "campaigns", "campaigns started in April 2024", span("started_at", *month(2024, 4)))
    add(cls, "campaigns", "campaigns launched in May 2024", span("started_at", *month(2024, 5)))
    add(cls, "conversations", "conversations started in July", span("started_at", *month(2025, 7)))
    add(cls, "messages", "messages sent last month", span("sent_at", *LAST_MONTH))
    add(cls, "inquiries", "inquiries received in Q2 2025", span("received_at", *quarter(2025, 2)))
    add(cls, "staging_leads", "staged leads imported in June", span("imported_at", *month(2025, 6)))
    add(cls, "clients", "clients created in February 2024", span("created_at", *month(2024, 2)))
    add(
        cls,
        "conversations",
        "conversations started between November 2024 and January 2025",
        span("started_at", dt.date(2024, 11, 1), dt.date(2025, 2, 1)),
    )
    add(cls, "leads", "leads created in 2019", span("created_at", *year(2019)), zero=True)

    cls = "person_name"
    (f1, l1), (f2, l2), (f3, l3), (f4, l4), (f5, l5), (f6, l6), (f7, _l7), (f8, l8) = people
    full = lambda f, la: both(eq("first_name", f), eq("last_name", la))  # noqa: E731
    add(cls, "leads", f"leads named {f1} {l1}", full(f1, l1))
    add(cls, "leads", f"find {f2} {l2}", full(f2, l2))
    add(cls, "leads", f"the lead called {f3} {l3}", full(f3, l3))
    add(cls, "leads", f"is there a lead {f4} {l4}?", full(f4, l4))
    add(cls, "leads", f"leads with the last name {l5}", eq("last_name", l5))
    add(cls, "leads", f"leads whose surname is {l6}", eq("last_name", l6))
    add(cls, "leads", f"leads whose first name is {f7}", eq("first_name", f7))
    add(cls, "leads", f"contacts called {f8} {l8}", full(f8, l8))
    add(cls, "leads", f"pull up {f5} {l5}", full(f5, l5))
    add(cls, "leads", f"leads named {f6} {l6} at any company", full(f6, l6))
    add(cls, "leads", f"{f1} {l1}'s lead record", full(f1, l1))
    add(cls, "leads", f"leads with first name {f3}", eq("first_name", f3))

    cls = "email"
    e1, e2, e3, e4, e5, e6 = emails
    s1, s2, s3 = staged_emails
    add(cls, "leads", f"the lead with email {e1}", eq("email", e1))
    add(cls, "leads", f"who is {e2}?", eq("email", e2))
    add(cls, "leads", f"lead {e3}", eq("email", e3))
    add(cls, "staging_leads", f"staged leads with the email {s1}", eq("email", s1))
    add(cls, "staging_leads", f"find the staged lead for {s2}", eq("email", s2))
    add(cls, "leads", f"leads with email {e4.upper()}", eq("email", e4))
    add(cls, "leads", f"what do we know about {e5}", eq("email", e5))
    add(cls, "leads", f"the lead whose address is {e6}", eq("email", e6))
    add(cls, "staging_leads", f"is {s3} among the staging leads?", eq("email", s3))
    add(cls, "leads", f"contact details for {e1}", eq("email", e1))

    cls = "related"
    software = parent("clients", "client_id", eq("industry", "software"))
    at_c2 = eq("company_name", c2)
    add(cls, "leads", "leads of software clients", software)
    add(
        cls,
        "messages",
        f"messages of leads at {c2}",
        parent("conversations", "conversation_id", parent("leads", "lead_id", at_c2)),
    )
    add(
        cls,
        "conversations",
        "conversations with qualified leads",
        parent("leads", "lead_id", status("qualified")),
    )
    add(
        cls,
        "inquiries",
        f"inquiries from leads at {c3}",
        parent("leads", "lead_id", eq("company_name", c3)),
    )
    add(
        cls,
        "campaigns",
        "campaigns of Helios Solar",
        parent("clients", "client_id", eq("name", "Helios Solar")),
    )
    add(
        cls,
        "sequences",
        "sequences of paused campaigns",
        parent("campaigns", "campaign_id", status("paused")),
    )
    add(
        cls,
        "clients",
        "clients with paused campaigns",
        child("campaigns", "client_id", status("paused")),
    )
    add(
        cls,
        "leads",
        "leads with closed conversations",
        child("conversations", "lead_id", status("closed")),
    )
    add(
        cls,
        "inquiries",
        "inquiries from our healthcare client",
        parent("clients", "client_id", eq("industry", "healthcare")),
    )
    add(
        cls,
        "messages",
        "messages in waiting conversations",
        parent("conversations", "conversation_id", status("waiting")),
    )
    add(
        cls,
        "leads",
        "leads from linkedin campaigns",
        parent("campaigns", "campaign_id", eq("channel", "linkedin")),
    )
    add(
        cls,
        "conversations",
        f"conversations of leads at {c4}",
        parent("leads", "lead_id", eq("company_name", c4)),
    )
    add(
        cls,
        "leads",
        "leads who sent us a pricing question",
        child("inquiries", "lead_id", eq("subject", "Pricing question")),
    )
    add(
        cls,
        "campaigns",
        "campaigns of clients in the retail industry",
        parent("clients", "client_id", eq("industry", "retail")),
    )

    cls = "count"
    add(cls, "leads", "how many qualified leads are there?", status("qualified"), count=True)
    add(cls, "leads", f"how many leads at {c5}?", eq("company_name", c5), count=True)
    add(cls, "campaigns", "number of paused campaigns", status("paused"), count=True)
    add(cls, "conversations", "how many conversations are still open?", status("open"), count=True)
    add(
        cls,
        "messages",
        "how many inbound messages did we get last month?",
        both(eq("direction", "inbound"), span("sent_at", *LAST_MONTH)),
        count=True,
    )
    add(cls, "leads", "count the leads with a score above 90", cmp("score", ">", 90), count=True)
    add(
        cls,
        "sequences",
        "how many sequences have more than 5 steps?",
        cmp("step_count", ">", 5),
        count=True,
    )
    add(cls, "leads", "how many leads have no phone number?", is_null("phone"), count=True)
    add(
        cls,
        "leads",
        "how many leads were created in March 2025?",
        span("created_at", *month(2025, 3)),
        count=True,
    )
    add(
        cls,
        "staging_leads",
        "how many staged leads came from referrals?",
        eq("source", "referral"),
        count=True,
    )
    add(cls, "leads", "how many leads of software clients?", software, count=True)
    add(
        cls,
        "conversations",
        "how many conversations aren't closed?",
        neq("status", "closed"),
        count=True,
    )
    add(
        cls,
        "inquiries",
        "how many inquiries were received in Q2 2025?",
        span("received_at", *quarter(2025, 2)),
        count=True,
    )
    add(cls, "leads", f"how many leads named {f2} {l2}?", full(f2, l2), count=True)

    cls = "leftover"
    add(cls, "conversations", "open conversations, need them before my 9am call", status("open"))
    add(cls, "leads", f"leads at {c6} for the quarterly review", eq("company_name", c6))
    add(cls, "campaigns", "paused campaigns - the CMO wants to know why", status("paused"))
    add(cls, "leads", "qualified leads please, prepping the pipeline deck", status("qualified"))
    add(
        cls,
        "messages",
        "inbound messages from last month so I can catch up on replies",
        both(eq("direction", "inbound"), span("sent_at", *LAST_MONTH)),
    )
    add(
        cls,
        "leads",
        "leads with a score above 90, shortlist for the sales huddle",
        cmp("score", ">", 90),
    )
    add(
        cls,
        "conversations",
        "conversations awaiting a reply, want to clear the backlog",
        status("waiting"),
    )
    add(
        cls,
        "staging_leads",
        "staged leads from the csv import, checking data quality",
        eq("source", "csv_import"),
    )
    add(
        cls,
        "clients",
        "clients in the retail industry for the board pack",
        eq("industry", "retail"),
    )
    add(cls, "leads", "leads without a phone number, we need to enrich them", is_null("phone"))
    add(
        cls,
        "sequences",
        "sequences with more than 5 steps, they feel too long to me",
        cmp("step_count", ">", 5),
    )
    add(
        cls,
        "messages",
        f"messages of leads at {c2}, my manager asked",
        parent("conversations", "conversation_id", parent("leads", "lead_id", at_c2)),
    )
    add(cls, "campaigns", "completed campaigns for the retro", status("completed"))
    add(cls, "leads", f"leads named {f4} {l4}, she called back about the proposal", full(f4, l4))
    return b.items


# --- the second schema --------------------------------------------------------------------------


def _second_questions() -> list[dict[str, Any]]:  # one template per line
    b = Builder("second", 26_002)
    add, parent, child = b.add, b.parent, b.child
    c1, c2, c3, c4, c5 = b.companies("company", 15, 60, 5)
    people = b.people(8)
    emails = b.values("leads", "email", 5)
    owners = b.values("leads", "owner_email", 4)
    contacts = b.values("staging_leads", "contact_email", 2)
    staged_names = b.values("staging_leads", "full_name", 2)
    stage = lambda v: eq("stage", v)  # noqa: E731
    state = lambda v: eq("state", v)  # noqa: E731

    cls = "value_exact"
    add(cls, "leads", "nurture leads", stage("nurture"))
    add(cls, "leads", "won leads", stage("won"))
    add(cls, "leads", "show me the lost leads", stage("lost"))
    add(cls, "leads", "new leads", stage("new"))
    add(cls, "campaigns", "live campaigns", state("live"))
    add(cls, "campaigns", "draft campaigns", state("draft"))
    add(cls, "campaigns", "which campaigns are paused?", state("paused"))
    add(cls, "campaigns", "finished campaigns", state("finished"))
    add(cls, "conversations", "escalated conversations", eq("resolution", "escalated"))
    add(cls, "conversations", "resolved conversations", eq("resolution", "resolved"))
    add(cls, "inquiries", "urgent inquiries", eq("priority", "urgent"))
    add(cls, "clients", "platinum clients", eq("tier", "platinum"))
    add(cls, "clients", "our gold clients", eq("tier", "gold"))
    add(cls, "staging_leads", "valid staged leads", eq("validation", "valid"))

    cls = "value_partial"
    add(cls, "inquiries", "refund inquiries", eq("topic", "refund_request"))
    add(cls, "inquiries", "security inquiries", eq("topic", "security_review"))
    add(cls, "inquiries", "billing inquiries", eq("topic", "billing_dispute"))
    add(cls, "inquiries", "API inquiries", eq("topic", "api_integration"))
    add(cls, "campaigns", "social campaigns", eq("medium", "paid_social"))
    add(cls, "campaigns", "syndication campaigns", eq("medium", "content_syndication"))
    add(cls, "campaigns", "event campaigns", eq("medium", "field_event"))
    add(cls, "clients", "financial clients", eq("industry", "Financial Services"))
    add(cls, "clients", "media clients", eq("industry", "Media & Entertainment"))
    add(
        cls,
        "staging_leads",
        "rejected staged leads",
        one_of("validation", ("rejected_duplicate", "rejected_invalid")),
    )
    add(cls, "staging_leads", "staged leads pending review", eq("validation", "pending_review"))
    add(cls, "staging_leads", "staged leads from the crm sync", eq("origin", "crm_sync"))
    add(cls, "leads", "trade show leads", eq("source", "trade_show"))
    add(cls, "campaigns", "email campaigns", eq("medium", "cold_email"))

    cls = "value_synonym"
    add(cls, "leads", "won deals", stage("won"))
    add(cls, "leads", "lost deals", stage("lost"))
    add(cls, "campaigns", "running campaigns", state("live"))
    add(cls, "campaigns", "campaigns that are on hold", state("paused"))
    add(cls, "campaigns", "completed campaigns", state("finished"))
    add(cls, "sequences", "turned off sequences", eq("enabled", False))
    add(cls, "sequences", "disabled sequences", eq("enabled", False))
    add(cls, "messages", "incoming messages", eq("direction", "in"))
    add(cls, "messages", "outgoing messages", eq("direction", "out"))
    add(cls, "messages", "inbound messages", eq("direction", "in"))
    add(cls, "conversations", "closed conversations", eq("resolution", "resolved"))
    add(cls, "inquiries", "critical inquiries", eq("priority", "urgent"))
    add(cls, "clients", "top-tier clients", eq("tier", "platinum"))
    add(cls, "leads", "leads being worked", stage("working"))

    cls = "negation"
    add(cls, "leads", "leads that are not won", neq("stage", "won"))
    add(cls, "campaigns", "campaigns other than paused ones", neq("state", "paused"))
    add(cls, "conversations", "conversations that aren't resolved", neq("resolution", "resolved"))
    add(cls, "leads", "leads except the lost ones", neq("stage", "lost"))
    add(cls, "leads", "leads whose stage is neither won nor lost", neq("stage", "won", "lost"))
    add(cls, "clients", "clients not in EMEA", neq("region", "EMEA"))
    add(cls, "messages", "messages that aren't incoming", neq("direction", "in"))
    add(cls, "inquiries", "inquiries other than low priority ones", neq("priority", "low"))
    add(cls, "campaigns", "campaigns that aren't live", neq("state", "live"))
    add(cls, "conversations", "conversations not over the phone", neq("channel", "phone"))
    add(cls, "clients", "clients that are not in the gold tier", neq("tier", "gold"))
    add(cls, "conversations", "unresolved conversations", neq("resolution", "resolved"))
    add(cls, "staging_leads", "staged leads other than the valid ones", neq("validation", "valid"))
    add(cls, "leads", "leads not from webinars", neq("source", "webinar"))

    cls = "column_value"
    add(cls, "clients", "clients in the Retail industry", eq("industry", "Retail"))
    add(cls, "clients", "clients from the EMEA region", eq("region", "EMEA"))
    add(cls, "leads", "leads whose source is referral", eq("source", "referral"))
    add(cls, "leads", "leads in stage nurture", stage("nurture"))
    add(cls, "clients", "clients with tier gold", eq("tier", "gold"))
    add(cls, "campaigns", "campaigns with state draft", state("draft"))
    add(cls, "campaigns", "campaigns whose medium is paid social", eq("medium", "paid_social"))
    add(cls, "inquiries", "inquiries with priority high", eq("priority", "high"))
    add(cls, "inquiries", "inquiries on the topic pricing", eq("topic", "pricing"))
    add(
        cls,
        "conversations",
        "conversations with resolution escalated",
        eq("resolution", "escalated"),
    )
    add(cls, "leads", "leads whose country is Germany", eq("country", "Germany"))
    add(cls, "staging_leads", "staged leads with origin api", eq("origin", "api"))
    add(cls, "messages", "messages with direction out", eq("direction", "out"))
    add(cls, "conversations", "conversations on the chat channel", eq("channel", "chat"))

    cls = "value_alone"
    add(cls, "leads", "leads in Spain", eq("country", "Spain"))
    add(cls, "leads", "leads from Italy", eq("country", "Italy"))
    add(cls, "leads", "webinar leads", eq("source", "webinar"))
    add(cls, "leads", "referral leads", eq("source", "referral"))
    add(cls, "clients", "APAC clients", eq("region", "APAC"))
    add(cls, "clients", "healthcare clients", eq("industry", "Healthcare"))
    add(cls, "conversations", "chat conversations", eq("channel", "chat"))
    add(cls, "conversations", "phone conversations", eq("channel", "phone"))
    add(cls, "leads", f"leads at {c1}", eq("company", c1))
    add(cls, "leads", f"{c2} leads", eq("company", c2))
    add(cls, "staging_leads", "staged leads from csv files", eq("origin", "csv"))
    add(cls, "clients", "software clients", eq("industry", "Software"))
    add(cls, "leads", "leads in Japan", eq("country", "Japan"))
    add(cls, "inquiries", "pricing inquiries", eq("topic", "pricing"))

    cls = "number"
    add(cls, "campaigns", "campaigns with a budget above 20k", cmp("budget", ">", 20_000))
    add(cls, "leads", "leads with a lead score of at least 80", cmp("lead_score", ">=", 80))
    add(cls, "sequences", "sequences with more than 3 steps", cmp("steps", ">", 3))
    add(cls, "campaigns", "campaigns with a budget under 5,000", cmp("budget", "<", 5_000))
    add(
        cls,
        "leads",
        "leads with a score between 40 and 60",
        both(cmp("lead_score", ">=", 40), cmp("lead_score", "<=", 60)),
    )
    add(cls, "leads", "leads scoring below 10", cmp("lead_score", "<", 10))
    add(cls, "sequences", "sequences with fewer than 3 steps", cmp("steps", "<", 3))
    add(cls, "campaigns", "campaigns whose budget is at least 50000", cmp("budget", ">=", 50_000))
    add(cls, "conversations", "conversations with a csat of 2 or lower", cmp("csat", "<=", 2))
    add(cls, "staging_leads", "staged leads in batch 120", cmp("batch_no", "==", 120))
    add(cls, "leads", "leads with a lead score over 95.5", cmp("lead_score", ">", 95.5))
    add(cls, "sequences", "9-step sequences", cmp("steps", "==", 9))
    add(
        cls,
        "campaigns",
        "campaigns with a budget between 10k and 12k",
        both(cmp("budget", ">=", 10_000), cmp("budget", "<=", 12_000)),
    )
    add(cls, "conversations", "conversations with a csat of 5", cmp("csat", "==", 5))

    cls = "boolean"
    add(cls, "clients", "clients that are not active", eq("is_active", False))
    add(cls, "clients", "active clients", eq("is_active", True))
    add(cls, "leads", "leads flagged as duplicates", eq("is_duplicate", True))
    add(
        cls,
        "leads",
        "won leads that aren't duplicates",
        both(stage("won"), eq("is_duplicate", False)),
    )
    add(cls, "sequences", "enabled sequences", eq("enabled", True))
    add(cls, "sequences", "sequences switched off", eq("enabled", False))
    add(cls, "messages", "automated messages", eq("is_automated", True))
    add(cls, "messages", "messages that were not automated", eq("is_automated", False))
    add(cls, "inquiries", "unanswered inquiries", eq("is_answered", False))
    add(cls, "inquiries", "inquiries that have been answered", eq("is_answered", True))
    add(
        cls,
        "clients",
        "inactive clients in EMEA",
        both(eq("is_active", False), eq("region", "EMEA")),
    )
    add(
        cls,
        "leads",
        "duplicate leads in Germany",
        both(eq("is_duplicate", True), eq("country", "Germany")),
    )
    add(
        cls,
        "inquiries",
        "urgent inquiries that are still unanswered",
        both(eq("priority", "urgent"), eq("is_answered", False)),
    )
    add(cls, "clients", "inactive clients", eq("is_active", False))

    cls = "date"
    add(cls, "leads", "leads opened in March 2025", span("opened_at", *month(2025, 3)))
    add(cls, "leads", "leads opened in Q1 2025", span("opened_at", *quarter(2025, 1)))
    add(
        cls,
        "leads",
        "leads opened since August last year",
        span("opened_at", dt.date(2024, 8, 1), None),
    )
    add(
        cls,
        "leads",
        "leads opened between February and April 2025",
        span("opened_at", dt.date(2025, 2, 1), dt.date(2025, 5, 1)),
    )
    add(cls, "leads", "leads opened before 2025", span("opened_at", None, dt.date(2025, 1, 1)))
    add(cls, "leads", "leads opened last month", span("opened_at", *LAST_MONTH))
    add(cls, "campaigns", "campaigns launched in 2024", span("launched_on", *year(2024)))
    add(cls, "campaigns", "campaigns launched last quarter", span("launched_on", *LAST_QUARTER))
    add(
        cls,
        "campaigns",
        "campaigns launched between November 2024 and January 2025",
        span("launched_on", dt.date(2024, 11, 1), dt.date(2025, 2, 1)),
    )
    add(cls, "conversations", "conversations opened last week", span("opened_at", *LAST_WEEK))
    add(cls, "conversations", "conversations opened in July", span("opened_at", *month(2025, 7)))
    add(cls, "messages", "messages sent yesterday", span("sent_at", *YESTERDAY))
    add(cls, "messages", "messages sent in the last 7 days", span("sent_at", *LAST_7_DAYS))
    add(cls, "inquiries", "inquiries received this month", span("received_at", *THIS_MONTH))
    add(
        cls,
        "inquiries",
        "inquiries received since June",
        span("received_at", dt.date(2025, 6, 1), None),
    )
    add(cls, "clients", "clients signed in 2023", span("signed_on", *year(2023)))
    add(cls, "sequences", "sequences created in Q4 2024", span("created_on", *quarter(2024, 4)))
    add(cls, "staging_leads", "staged leads loaded last week", span("loaded_at", *LAST_WEEK))
    add(cls, "leads", "leads opened in 2019", span("opened_at", *year(2019)), zero=True)

    cls = "person_name"
    (f1, l1), (f2, l2), (f3, l3), (f4, l4), (f5, l5), (_f6, l6), (f7, _l7), (f8, l8) = people
    full = lambda f, la: both(eq("first_name", f), eq("last_name", la))  # noqa: E731
    n1, n2 = staged_names
    add(cls, "leads", f"leads named {f1} {l1}", full(f1, l1))
    add(cls, "leads", f"find {f2} {l2}", full(f2, l2))
    add(cls, "leads", f"the lead called {f3} {l3}", full(f3, l3))
    add(cls, "leads", f"is there a lead {f4} {l4}?", full(f4, l4))
    add(cls, "leads", f"leads with the last name {l5}", eq("last_name", l5))
    add(cls, "leads", f"leads whose surname is {l6}", eq("last_name", l6))
    add(cls, "leads", f"leads whose first name is {f7}", eq("first_name", f7))
    add(cls, "leads", f"contacts called {f8} {l8}", full(f8, l8))
    add(cls, "staging_leads", f"the staged lead {n1}", eq("full_name", n1))
    add(cls, "staging_leads", f"staged leads named {n2}", eq("full_name", n2))
    add(cls, "leads", f"pull up {f5} {l5}", full(f5, l5))
    add(cls, "leads", f"leads with first name {f3}", eq("first_name", f3))

    cls = "email"
    e1, e2, e3, e4, e5 = emails
    o1, o2, o3, o4 = owners
    k1, k2 = contacts
    add(cls, "leads", f"the lead with email {e1}", eq("email", e1))
    add(cls, "leads", f"who is {e2}?", eq("email", e2))
    add(cls, "leads", f"leads owned by {o1}", eq("owner_email", o1))
    add(cls, "leads", f"leads whose owner is {o2}", eq("owner_email", o2))
    add(cls, "leads", f"which deals does {o3} own?", eq("owner_email", o3))
    add(cls, "staging_leads", f"staged leads with contact email {k1}", eq("contact_email", k1))
    add(cls, "leads", f"lead {e3.upper()}", eq("email", e3))
    add(cls, "leads", f"won leads owned by {o4}", both(stage("won"), eq("owner_email", o4)))
    add(
        cls,
        "leads",
        f"leads in Spain owned by {o1}",
        both(eq("country", "Spain"), eq("owner_email", o1)),
    )
    add(cls, "leads", f"{o2}'s leads", eq("owner_email", o2))
    add(cls, "staging_leads", f"the staged record for {k2}", eq("contact_email", k2))
    add(cls, "leads", f"the lead whose address is {e4}", eq("email", e4))
    add(cls, "leads", f"what do we know about {e5}", eq("email", e5))

    cls = "related"
    gold = parent("clients", "client_id", eq("tier", "gold"))
    at_c3 = eq("company", c3)
    italy = parent("leads", "lead_id", eq("country", "Italy"))
    add(cls, "leads", "leads of gold-tier clients", gold)
    add(
        cls,
        "leads",
        "leads of clients in the Retail industry",
        parent("clients", "client_id", eq("industry", "Retail")),
    )
    add(
        cls,
        "messages",
        f"messages of leads at {c3}",
        parent("conversations", "conversation_id", parent("leads", "lead_id", at_c3)),
    )
    add(cls, "inquiries", "inquiries from leads in Italy", italy)
    add(
        cls,
        "campaigns",
        "campaigns of EMEA clients",
        parent("clients", "client_id", eq("region", "EMEA")),
    )
    add(
        cls,
        "sequences",
        "sequences of live campaigns",
        parent("campaigns", "campaign_id", state("live")),
    )
    add(
        cls,
        "conversations",
        "conversations with leads from webinars",
        parent("leads", "lead_id", eq("source", "webinar")),
    )
    add(
        cls,
        "clients",
        "clients with urgent inquiries",
        child("inquiries", "client_id", eq("priority", "urgent")),
    )
    add(
        cls,
        "leads",
        "leads with escalated conversations",
        child("conversations", "lead_id", eq("resolution", "escalated")),
    )
    add(
        cls,
        "campaigns",
        "campaigns of inactive clients",
        parent("clients", "client_id", eq("is_active", False)),
    )
    add(
        cls,
        "inquiries",
        "inquiries from platinum clients",
        parent("clients", "client_id", eq("tier", "platinum")),
    )
    add(
        cls,
        "messages",
        "messages in escalated conversations",
        parent("conversations", "conversation_id", eq("resolution", "escalated")),
    )
    add(
        cls,
        "leads",
        "leads of silver-tier clients",
        parent("clients", "client_id", eq("tier", "silver")),
    )
    add(
        cls, "conversations", "conversations of won leads", parent("leads", "lead_id", stage("won"))
    )

    cls = "count"
    add(
        cls,
        "leads",
        "how many won deals this year?",
        both(stage("won"), span("opened_at", *THIS_YEAR)),
        count=True,
    )
    add(cls, "leads", "how many leads in Spain?", eq("country", "Spain"), count=True)
    add(cls, "campaigns", "number of live campaigns", state("live"), count=True)
    add(cls, "sequences", "count the disabled sequences", eq("enabled", False), count=True)
    add(cls, "inquiries", "how many inquiries are urgent?", eq("priority", "urgent"), count=True)
    add(cls, "leads", "how many leads of gold-tier clients?", gold, count=True)
    add(
        cls,
        "conversations",
        "how many conversations were opened last month?",
        span("opened_at", *LAST_MONTH),
        count=True,
    )
    add(cls, "clients", "how many clients are not active?", eq("is_active", False), count=True)
    add(
        cls,
        "campaigns",
        "how many campaigns have a budget above 20k?",
        cmp("budget", ">", 20_000),
        count=True,
    )
    add(
        cls,
        "leads",
        "how many leads are flagged as duplicates?",
        eq("is_duplicate", True),
        count=True,
    )
    add(cls, "leads", f"how many leads does {o3} own?", eq("owner_email", o3), count=True)
    add(
        cls,
        "inquiries",
        "how many refund inquiries did we get?",
        eq("topic", "refund_request"),
        count=True,
    )
    add(
        cls,
        "leads",
        "how many leads are neither won nor lost?",
        neq("stage", "won", "lost"),
        count=True,
    )
    add(
        cls,
        "messages",
        "how many incoming messages last week?",
        both(eq("direction", "in"), span("sent_at", *LAST_WEEK)),
        count=True,
    )

    cls = "leftover"
    add(
        cls,
        "conversations",
        "open conversations, need them before my 9am call",
        eq("resolution", "open"),
    )
    add(cls, "leads", f"leads at {c4} for the quarterly review", eq("company", c4))
    add(cls, "campaigns", "live campaigns - boss wants the list before lunch", state("live"))
    add(cls, "clients", "gold tier clients please, prepping the QBR deck", eq("tier", "gold"))
    add(
        cls,
        "inquiries",
        "urgent inquiries asap, the support lead is chasing",
        eq("priority", "urgent"),
    )
    add(cls, "leads", "leads in Spain for the territory planning session", eq("country", "Spain"))
    add(
        cls,
        "leads",
        "won deals this quarter, putting together the board slides",
        both(stage("won"), span("opened_at", *THIS_QUARTER)),
    )
    add(
        cls,
        "conversations",
        "escalated conversations - I want to understand what went wrong",
        eq("resolution", "escalated"),
    )
    add(
        cls,
        "sequences",
        "sequences switched off, we might revive some of them",
        eq("enabled", False),
    )
    add(
        cls,
        "campaigns",
        "campaigns with a budget above 20k, finance is asking",
        cmp("budget", ">", 20_000),
    )
    add(
        cls, "leads", "leads flagged as duplicates so I can clean them up", eq("is_duplicate", True)
    )
    add(cls, "inquiries", "inquiries from leads in Italy, our Milan office will follow up", italy)
    add(cls, "clients", "clients that are not active, churn review", eq("is_active", False))
    add(
        cls,
        "leads",
        f"leads at {c5} opened this year, weekly pipeline sync",
        both(eq("company", c5), span("opened_at", *THIS_YEAR)),
    )
    return b.items


# --- the set ------------------------------------------------------------------------------------


def _split(items: list[dict[str, Any]]) -> list[Question]:
    """Ids and halves: within each (schema, class), a seeded shuffle, the first half ``tune``."""
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for item in items:
        grouped[item["schema"], item["cls"]].append(item)
    out = []
    for (schema, cls), group in grouped.items():
        order = list(range(len(group)))
        random.Random(f"{schema}/{cls}").shuffle(order)  # a fixed split
        tune = set(order[: len(group) // 2])
        for index, item in enumerate(group):
            out.append(
                Question(
                    id=f"{schema}-{cls}-{index + 1:02d}",
                    half="tune" if index in tune else "held_out",
                    **item,
                )
            )
    return out


@functools.cache
def questions() -> tuple[Question, ...]:
    """Every labelled question, sample schema first, in class order."""
    made = _split(_sample_questions()) + _split(_second_questions())
    rank = {c: i for i, c in enumerate(CLASSES)}
    return tuple(sorted(made, key=lambda q: (SCHEMAS.index(q.schema), rank[q.cls], q.id)))


def _main() -> None:
    made = questions()
    counts = Counter((q.schema, q.cls, q.half) for q in made)
    print(
        f"{'class':15} "
        + " ".join(f"{s + '/' + h:>17}" for s in SCHEMAS for h in ("tune", "held_out"))
    )
    for cls in CLASSES:
        cells = " ".join(f"{counts[s, cls, h]:>17}" for s in SCHEMAS for h in ("tune", "held_out"))
        print(f"{cls:15} {cells}")
    print(
        f"total {len(made)}: "
        + ", ".join(f"{s} {sum(q.schema == s for q in made)}" for s in SCHEMAS)
    )


if __name__ == "__main__":
    _main()
