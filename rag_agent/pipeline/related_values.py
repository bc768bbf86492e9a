"""Conditions on related tables, read through the foreign keys: "leads of software clients" →
the clients whose industry is ``software`` → ``leads.client_id in (…)``; "leads with closed
conversations" → the conversations whose status is ``closed`` → ``leads.id in (their lead_id)``.

The rules read a value of another table's column as a :class:`~rag_agent.specs.Through` when
foreign keys lead from that table to the asked one (:func:`rag_agent.understanding.rules.columns.
related`). Here each is followed along the shortest route of relations the facade offers, in
either direction, at most :data:`MAX_HOPS` of them: the rows matching the condition give keys,
each hop reads the next table's keys, and ``<column> in (keys)`` becomes a condition of the run.

Bounded like the company links: no hop may yield more keys than one ``in`` condition may list
(:data:`~persistence.query.MAX_IN_VALUES`); a bound that is hit, a table with no matching row or
a route the policy refuses is reported in ``metadata.ignored``, never applied partly. Every
lookup is a ``facade.read`` yielded as a pipeline call, checked by the facade like any read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from persistence import BackendError, Filter, Op, PersistenceError, ReadOnlyPersistenceFacade
from persistence.query import MAX_IN_VALUES
from persistence.relations import Relation
from rag_agent.runtime.effects import Call, Steps
from rag_agent.specs import Condition, Ignored, Through

__all__ = ["MAX_HOPS", "Route", "related_values", "route", "route_keys"]

#: Relations one route may follow ("messages of leads in Italy": leads → conversations →
#: messages).
MAX_HOPS = 2

#: One step of a route: read ``table`` rows whose ``column`` is in the keys, keep ``key``.
_Hop = tuple[str, str, str]
#: A route: the key column read on the start table, the hops between, and the column of the goal
#: table the last keys are matched against.
Route = tuple[str, tuple[_Hop, ...], str]


def related_values(
    facade: ReadOnlyPersistenceFacade, table: str, through: Sequence[Through]
) -> Steps[tuple[tuple[Condition, ...], tuple[Ignored, ...]]]:
    """The conditions reading each of ``through`` on ``table``, and what could not be read."""
    added: list[Condition] = []
    ignored: list[Ignored] = []
    for item in through:
        route = _route_between(facade, item.table, table)
        if route is None:
            ignored.append(Ignored(item.text, f"no relation leads from {item.table} to {table}"))
            continue
        found = yield from _follow(item, route)
        if isinstance(found, str):
            ignored.append(Ignored(item.text, found))
        else:
            added.append(found)
    return tuple(added), tuple(ignored)


def route(facade: ReadOnlyPersistenceFacade, start: str, goal: str) -> Route | None:
    """The shortest route from ``start`` to ``goal`` (at most :data:`MAX_HOPS` relations, in
    either direction), or ``None`` when no relation leads there."""
    return _route_between(facade, start, goal)


def _route_between(facade: ReadOnlyPersistenceFacade, start: str, goal: str) -> Route | None:
    edges = _edges(facade)
    frontier: list[tuple[str, tuple[tuple[Relation, bool], ...]]] = [(start, ())]
    seen = {start}
    for _ in range(MAX_HOPS):
        following = []
        for table, path in frontier:
            for relation, downward in edges.get(table, ()):
                other = relation.child_table if downward else relation.parent_table
                step = (*path, (relation, downward))
                if other == goal:
                    return _as_hops(step)
                if other not in seen:
                    seen.add(other)
                    following.append((other, step))
        frontier = following
    return None


def _edges(facade: ReadOnlyPersistenceFacade) -> dict[str, list[tuple[Relation, bool]]]:
    # Each relation in both directions: downward (parent → child) and upward (child → parent).
    edges: dict[str, list[tuple[Relation, bool]]] = {}
    for table in facade.tables():
        try:
            offered = facade.relations(table)
        except PersistenceError:
            continue
        for relation in sorted(offered, key=lambda r: (r.child_table, r.child_column)):
            edges.setdefault(relation.parent_table, []).append((relation, True))
            edges.setdefault(relation.child_table, []).append((relation, False))
    return edges


def _as_hops(path: tuple[tuple[Relation, bool], ...]) -> tuple[str, tuple[_Hop, ...], str]:
    def key_of(relation: Relation, downward: bool) -> tuple[str, str]:
        # (the column read on the table we leave, the column matched on the table we reach)
        if downward:
            return relation.parent_column, relation.child_column
        return relation.child_column, relation.parent_column

    first_key, matched = key_of(*path[0])
    hops: list[_Hop] = []
    for relation, downward in path[1:]:
        table = relation.parent_table if downward else relation.child_table
        key, next_matched = key_of(relation, downward)
        hops.append((table, matched, key))
        matched = next_matched
    return first_key, tuple(hops), matched


def _follow(item: Through, route: Route) -> Steps[Condition | str]:
    condition = item.condition
    described = f"the {item.table} whose {condition.column} is {condition.value!r}"
    keys = yield from route_keys(item.table, (condition.to_filter(),), route, described)
    if isinstance(keys, str):
        return f"not applied: {keys}"
    return Condition(route[2], Op.IN, keys, "rules")


def route_keys(
    start: str, where: Sequence[Filter], route: Route, described: str | None = None
) -> Steps[tuple[Any, ...] | str]:
    """The keys of the goal table's rows related to ``start``'s rows matching ``where``, along
    ``route``; a sentence saying why not when a bound is hit or no row is related."""
    first_key, hops, _ = route
    described = described or f"the {start} asked about"
    keys = yield from _keys(start, where, first_key)
    for table, column, key in hops:
        if isinstance(keys, str) or not keys:
            break
        described = f"the {table} of {described}"
        keys = yield from _keys(table, (Filter(column, Op.IN, keys),), key)
    if isinstance(keys, str):
        return f"{keys} ({described})"
    if not keys:
        return f"there are no {described}"
    return keys


def _keys(table: str, where: Sequence[Filter], key: str) -> Steps[tuple[Any, ...] | str]:
    # The distinct keys, as groups of one aggregate: bounded by the groups it returns, however
    # many rows share a key (the conversations of one lead).
    try:
        result = yield Call(
            "aggregate", (table, list(where)), {"group_by": [key], "limit": MAX_IN_VALUES}
        )
    except BackendError:
        raise
    except PersistenceError as exc:  # a column the policy hides, a value it cannot take …
        return f"{table} cannot be read so: {exc}"
    if result.capped:
        return f"more than {MAX_IN_VALUES} {table} keys, more than one condition may list"
    return tuple(g.keys[key] for g in result.groups if g.keys.get(key) is not None)
