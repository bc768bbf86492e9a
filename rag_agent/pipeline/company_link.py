"""A company named on a table without a company column, read through the tables it refers to:
"inquiries from Globex about shipping delays" → ``client_id in (2)``; "messages from Globex
about login problems" → ``conversation_id in (…)``, the conversations of the leads at Globex.

The rules read "from Globex" as a company, but no column of ``inquiries`` (or ``messages``) holds
one (:func:`rag_agent.understanding.rules.parser.no_company_column`). A *route* leads from a table
whose rows name companies (:data:`COMPANY_TABLES`, each by its learned company column) down
the relations ``facade.relations`` offers to the asked table, at most :data:`MAX_HOPS` of them:
``clients → inquiries`` (``inquiries.client_id``), ``leads → conversations → messages``. The
shortest route of each company table is tried, shortest first (``clients`` before ``leads`` at equal
length): the rows whose name is the company (case-insensitively; else whose name contains it) give
the keys, each further hop reads the keys of the next table (``conversations`` whose ``lead_id`` is
in the leads' keys), and ``<column> in (keys)`` becomes a condition of the run (source ``rules``).

Bounded: a name held by more than :data:`MAX_LINKED_KEYS` different names is too vague to be one
company, and no hop reads more than :data:`MAX_HOP_KEYS` keys. A bound that is hit is never
cut silently: the company is then not applied and its ``ignored`` entry says why (the answer is
not narrowed to it), as it does when a table on the route has no row for it.

A name no route finds ("Globx") is matched by trigram similarity against each company table
(:func:`rag_agent.pipeline.similar.closest_name`), never when two names are about equally close; the
condition read through the similar name is a :class:`LinkedCondition` with ``typed`` set, which
the run reports as a ``similar_company`` reformulation (:func:`similar_link_attempt`).

Everything goes through the facade: the relations are those it offers (both join columns
allowed), every lookup is a ``facade.read`` or ``facade.search`` yielded as a pipeline call (the
column policy applies to the name column), and the condition is checked like any other. When any
of that is refused, the company stays in ``metadata.ignored`` as before. When it is read, its
``ignored`` entry says how (``metadata.filters`` lists the condition).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from persistence import BackendError, Filter, Op, PersistenceError, ReadOnlyPersistenceFacade
from persistence.relations import Relation
from rag_agent.envelope import ReformulationAttempt
from rag_agent.envelope.assemble import Outcome
from rag_agent.pipeline.similar import Closest, closest_name
from rag_agent.runtime.effects import Call, Steps
from rag_agent.specs import Condition, Ignored
from rag_agent.understanding.rules import names
from rag_agent.understanding.rules.lexicon import lexicon_of
from rag_agent.understanding.rules.parser import no_company_column

__all__ = [
    "COMPANY_TABLES",
    "MAX_HOPS",
    "MAX_HOP_KEYS",
    "MAX_LINKED_KEYS",
    "LinkedCondition",
    "company_links",
    "similar_link_attempt",
]

#: Tables whose rows are companies, with the column naming the company, tried in this order
#: when their routes are as long.
COMPANY_TABLES: tuple[str, ...] = ("clients", "leads")
#: The column naming the company on a company table whose vocabulary cannot be learned.
_REFERENCE_COMPANY = {"clients": "name", "leads": "company_name"}
#: A name matching more different names than this is too vague to be one company.
MAX_LINKED_KEYS = 20
#: Keys one hop may read (and one condition may list); more are reported, never cut.
MAX_HOP_KEYS = 500
#: Relations one route may follow (``clients → leads → conversations → messages``).
MAX_HOPS = 3
_SHOWN_KEYS = 10
_TRIGGER = ("at ", "from ", "for ", "by ", "with ")

_Linked = tuple["LinkedCondition", str]


@dataclass(frozen=True, slots=True)
class LinkedCondition(Condition):
    """A condition read through related tables; ``typed`` is the company as the request spelled
    it when the most similar existing name was read instead ("Globx" → "Globex")."""

    typed: str | None = None


@dataclass(frozen=True, slots=True)
class _Route:
    """From ``company`` (its ``column`` names companies) down ``path`` to the asked table."""

    company: str
    column: str
    path: tuple[Relation, ...]

    @property
    def through(self) -> str:
        tables = [relation.parent_table for relation in self.path]
        return tables[0] if len(tables) == 1 else ", ".join(tables[:-1]) + " and " + tables[-1]


def company_links(
    facade: ReadOnlyPersistenceFacade,
    table: str,
    ignored: Sequence[Ignored],
    applied: Sequence[Condition],
) -> Steps[tuple[tuple[Condition, ...], tuple[Ignored, ...]]]:
    """The conditions reading an ignored company through related tables, and ``ignored`` with
    each company so read, or found but not applied, explained (pipeline steps: the lookups are
    yielded as :class:`~rag_agent.runtime.effects.Call`). One company per request, as the rules read
    one."""
    reason = no_company_column(table)
    added: list[Condition] = []
    kept: list[Ignored] = []
    done = False
    for part in ignored:
        if part.reason != reason or done:
            kept.append(part)
            continue
        found = yield from _link(facade, table, _company_name(part.text), applied)
        if found is None:
            kept.append(part)
            continue
        done = True
        if isinstance(found, str):  # found, but not applied: why
            kept.append(Ignored(part.text, f"{reason}; {found}"))
            continue
        condition, how = found
        added.append(condition)
        kept.append(Ignored(part.text, f"{reason}; {how}"))
    return tuple(added), tuple(kept)


def similar_link_attempt(outcome: Outcome, linked: Iterable[Condition]) -> None:
    """When a company was read through the most similar name ("inquiries from Globx"), the
    query the run answered with is that reformulation: it is listed first in
    ``reformulation_attempts`` (``similar_company``), and a query that found rows sets
    ``fallback: "reformulation"``, as for a misspelled company on ``leads``."""
    similar = next((c for c in linked if isinstance(c, LinkedCondition) and c.typed), None)
    if similar is None or outcome.error is not None or outcome.filters is None:
        return
    if not any(f.column == similar.column and f.op == Op.IN.value for f in outcome.applied):
        return  # refused by the facade's check: nothing was reformulated
    attempt = ReformulationAttempt(
        reason="similar_company", filters=dict(outcome.filters), result_count=outcome.total_count
    )
    outcome.attempts.insert(0, attempt)
    if outcome.total_count and outcome.fallback is None:
        outcome.fallback = "reformulation"


def _company_name(text: str) -> str:
    found = names.find_company(text)
    if found is not None:
        return found.value
    lowered = text.lower()
    for trigger in _TRIGGER:
        if lowered.startswith(trigger):
            return text[len(trigger) :].strip()
    return text.strip()


def _relations(
    facade: ReadOnlyPersistenceFacade, parent: str, known: dict[str, tuple[Relation, ...]]
) -> tuple[Relation, ...]:
    if parent not in known:
        try:
            offered = facade.relations(parent)
        except BackendError:
            raise
        except PersistenceError:  # the table is not allowed: nothing to read it through
            offered = ()
        known[parent] = tuple(
            sorted(offered, key=lambda r: (r.child_table, r.child_column, r.name))
        )
    return known[parent]


def _shortest(
    facade: ReadOnlyPersistenceFacade,
    start: str,
    goal: str,
    known: dict[str, tuple[Relation, ...]],
) -> tuple[Relation, ...] | None:
    # Breadth first from the company table down to the asked one: the first route found is
    # one of the shortest, the same one every time (relations in sorted order).
    frontier: list[tuple[str, tuple[Relation, ...]]] = [(start, ())]
    seen = {start}
    for _ in range(MAX_HOPS):
        following = []
        for parent, path in frontier:
            for relation in _relations(facade, parent, known):
                if relation.child_table == goal:
                    return (*path, relation)
                if relation.child_table not in seen:
                    seen.add(relation.child_table)
                    following.append((relation.child_table, (*path, relation)))
        frontier = following
    return None


def _company_columns(facade: ReadOnlyPersistenceFacade) -> list[tuple[str, str]]:
    """Each company table with the column naming its company, from the database's learned
    vocabulary (the reference column where it could not be learned)."""
    try:
        vocabulary = facade.vocabulary()
    except BackendError:
        raise
    except PersistenceError:
        vocabulary = None
    found = []
    for table in COMPANY_TABLES:
        if vocabulary is None or vocabulary.table(table) is None:
            found.append((table, _REFERENCE_COMPANY[table]))
            continue
        column = lexicon_of(vocabulary, table).first("company")
        if column is not None:
            found.append((table, column))
    return found


def _routes(facade: ReadOnlyPersistenceFacade, table: str) -> list[_Route]:
    known: dict[str, tuple[Relation, ...]] = {}
    found = []
    for rank, (company, column) in enumerate(_company_columns(facade)):
        path = None if company == table else _shortest(facade, company, table, known)
        if path is not None:
            found.append((len(path), rank, _Route(company, column, path)))
    return [route for _, _, route in sorted(found, key=lambda item: item[:2])]


def _link(
    facade: ReadOnlyPersistenceFacade, table: str, name: str, applied: Sequence[Condition]
) -> Steps[_Linked | str | None]:
    if not name:
        return None
    # A request that already names the row it refers to ("client 4") is not read on top of it.
    named = {c.column for c in applied}
    routes = [r for r in _routes(facade, table) if r.path[-1].child_column not in named]
    for route in routes:
        for op, how in ((Op.IEQ, "is"), (Op.ICONTAINS, "contains")):
            found = yield from _through(route, (route.column, op, name), f"{how} {name!r}")
            if found is not None:
                return found
    for route in routes:  # no name holds it: the most similar one, never a guess
        closest = yield from closest_name(route.company, route.column, name)
        if closest is None:
            continue
        if closest.ambiguous:
            return _ambiguous(route, name, closest)
        how = (
            f"is {closest.name!r}, the most similar to {name!r} "
            f"(trigram word similarity {closest.similarity:.2f})"
        )
        found = yield from _through(route, (route.column, Op.IEQ, closest.name), how, name)
        if found is not None:
            return found
    return None


def _ambiguous(route: _Route, name: str, closest: Closest) -> str:
    shown = [(closest.name, closest.similarity), *closest.rivals]
    names_ = ", ".join(f"{n!r} ({s:.2f})" for n, s in shown)
    return (
        f"not applied: no {route.company} {route.column} matches {name!r}, and the most "
        f"similar ones are about equally close (trigram word similarity): {names_}"
    )


def _read(table: str, where: tuple[str, Op, Any], columns: Sequence[str], key: str) -> Steps[Any]:
    # At most one key past the bound: enough to know it was hit (total_count says by how much).
    try:
        return (
            yield Call(
                "read",
                (table, [Filter(*where)]),
                {"columns": list(columns), "order": [key], "limit": MAX_HOP_KEYS + 1},
            )
        )
    except BackendError:
        raise
    except PersistenceError:  # a column the policy hides, a value the column cannot take …
        return None


def _keys(rows: Iterable[Mapping[str, Any]], column: str) -> tuple[Any, ...]:
    return tuple(dict.fromkeys(row[column] for row in rows if row.get(column) is not None))


def _through(
    route: _Route, where: tuple[str, Op, str], how: str, typed: str | None = None
) -> Steps[_Linked | str | None]:
    """The condition reading ``route.company``'s rows matching ``where`` down the route, a
    reason it is not applied, or ``None`` when no row matches (or the route cannot be read)."""
    first = route.path[0]
    columns = tuple(dict.fromkeys((first.parent_column, route.column)))
    page = yield from _read(route.company, where, columns, first.parent_column)
    if page is None or not page.rows:
        return None
    described = f"the {route.company} whose {route.column} {how}"
    if len({str(row.get(route.column)).casefold() for row in page.rows}) > MAX_LINKED_KEYS:
        return (
            f"not applied: {described} have more than {MAX_LINKED_KEYS} different "
            f"{route.column}s: too vague to be one company"
        )
    if page.total_count > MAX_HOP_KEYS:
        return _capped(page.total_count, route.company, f"whose {route.column} {how}")
    keys = _keys(page.rows, first.parent_column)
    for previous, relation in itertools.pairwise(route.path):
        if not keys:
            break
        hop = relation.parent_table
        where_in = (previous.child_column, Op.IN, keys)
        page = yield from _read(hop, where_in, (relation.parent_column,), relation.parent_column)
        if page is None:
            return None
        if page.total_count > MAX_HOP_KEYS:
            return _capped(page.total_count, hop, f"of {described}")
        keys = _keys(page.rows, relation.parent_column)
        if not keys:
            return f"not applied: there are no {hop} of {described}"
        described = f"the {hop} of {described}"
    if not keys:
        return None
    last = route.path[-1]
    condition = LinkedCondition(last.child_column, Op.IN, keys, "rules", typed)
    return condition, (
        f"read through {route.through}: {last.child_column} in ({_shown(keys)}), {described}"
    )


def _capped(total: int, table: str, which: str) -> str:
    return (
        f"not applied: {total} {table} {which}, more than the {MAX_HOP_KEYS} "
        "one condition may list (the answer is not narrowed to the company)"
    )


def _shown(keys: Sequence[Any]) -> str:
    if len(keys) <= MAX_LINKED_KEYS:
        return ", ".join(repr(key) for key in keys)
    return ", ".join(repr(key) for key in keys[:_SHOWN_KEYS]) + f", … {len(keys)} in all"
