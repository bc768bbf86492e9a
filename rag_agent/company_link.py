"""A company named on a table without a company column, read through the table it refers to:
"inquiries from Globex about shipping delays" → ``client_id in (2)``.

The rules read "from Globex" as a company, but no column of ``inquiries`` holds one
(:func:`rag_agent.rules.parser.no_company_column`). ``inquiries.client_id`` refers to
``clients.id``, and ``clients.name`` is a company: the ``clients`` rows whose name is the company
(case-insensitively; else whose name contains it) give the keys, and ``client_id in (keys)``
becomes a condition of the run (source ``rules``), at most :data:`MAX_LINKED_KEYS` of them.

Everything goes through the facade: the relation is one ``facade.relations`` offers (so both
tables and both join columns are allowed), the lookup is a ``facade.read`` (the column policy
applies to the name column), and the condition is checked like any other. When any of that is
refused — ``clients`` not allowed, no such relation, no or too many matching names — the
company stays in ``metadata.ignored`` as before. When it is read, its ``ignored`` entry says how
(``metadata.filters`` lists the condition).

Only a direct relation is followed: ``messages`` reach a company through ``conversations`` and
``leads`` (two hops, and the keys in between are unbounded), so a company stays ignored there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from persistence import BackendError, Filter, Op, PersistenceError, ReadOnlyPersistenceFacade
from persistence.relations import Relation
from rag_agent.effects import Call, Steps
from rag_agent.rules import names
from rag_agent.rules.parser import no_company_column
from rag_agent.specs import Condition, Ignored

__all__ = ["COMPANY_TABLES", "MAX_LINKED_KEYS", "company_links"]

#: Tables whose rows are companies, with the column naming the company, tried in order.
COMPANY_TABLES: tuple[tuple[str, str], ...] = (("clients", "name"),)
#: A name matching more rows than this is too vague to be one company: it stays ignored.
MAX_LINKED_KEYS = 20
_TRIGGER = ("at ", "from ", "for ", "by ", "with ")


def company_links(
    facade: ReadOnlyPersistenceFacade,
    table: str,
    ignored: Sequence[Ignored],
    applied: Sequence[Condition],
) -> Steps[tuple[tuple[Condition, ...], tuple[Ignored, ...]]]:
    """The conditions reading an ignored company through a related table, and ``ignored`` with
    each company so read explained (pipeline steps: the lookups are yielded as
    :class:`~rag_agent.effects.Call`). One company per request, as the rules read one."""
    reason = no_company_column(table)
    added: list[Condition] = []
    kept: list[Ignored] = []
    for part in ignored:
        if part.reason != reason or added:
            kept.append(part)
            continue
        found = yield from _link(facade, table, _company_name(part.text), applied)
        if found is None:
            kept.append(part)
            continue
        condition, how = found
        added.append(condition)
        kept.append(Ignored(part.text, f"{reason}; {how}"))
    return tuple(added), tuple(kept)


def _company_name(text: str) -> str:
    found = names.find_company(text)
    if found is not None:
        return found.value
    lowered = text.lower()
    for trigger in _TRIGGER:
        if lowered.startswith(trigger):
            return text[len(trigger) :].strip()
    return text.strip()


def _relation(facade: ReadOnlyPersistenceFacade, parent: str, table: str) -> Relation | None:
    try:
        relations = facade.relations(parent)
    except BackendError:
        raise
    except PersistenceError:  # the parent table is not allowed: nothing to read it through
        return None
    return next((r for r in relations if r.child_table == table), None)


def _link(
    facade: ReadOnlyPersistenceFacade, table: str, name: str, applied: Sequence[Condition]
) -> Steps[tuple[Condition, str] | None]:
    if not name:
        return None
    for parent, column in COMPANY_TABLES:
        relation = _relation(facade, parent, table)
        if relation is None or any(c.column == relation.child_column for c in applied):
            continue  # no way through, or the request already names the row it refers to
        keys = yield from _keys(relation, column, name)
        if keys is None:
            continue
        keys, how = keys
        condition = Condition(relation.child_column, Op.IN, keys, "rules")
        shown = ", ".join(repr(key) for key in keys)
        return condition, (
            f"read through {parent}: {relation.child_column} in ({shown}), "
            f"the {parent} whose {column} {how} {name!r}"
        )
    return None


def _keys(relation: Relation, column: str, name: str) -> Steps[tuple[tuple[Any, ...], str] | None]:
    # The exact name first ("Globex"), then the names holding it ("Acme" → "Acme Logistics").
    for op, how in ((Op.IEQ, "is"), (Op.ICONTAINS, "contains")):
        try:
            page = yield Call(
                "read",
                (relation.parent_table, [Filter(column, op, name)]),
                {
                    "columns": [relation.parent_column],
                    "order": [relation.parent_column],
                    "limit": MAX_LINKED_KEYS + 1,
                },
            )
        except BackendError:
            raise
        except PersistenceError:  # the name column is not allowed, say: not readable here
            return None
        keys = tuple(
            dict.fromkeys(
                row[relation.parent_column]
                for row in page.rows
                if row.get(relation.parent_column) is not None
            )
        )
        if len(keys) > MAX_LINKED_KEYS:
            return None
        if keys:
            return keys, how
    return None
