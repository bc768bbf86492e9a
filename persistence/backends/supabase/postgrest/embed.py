"""Related rows over PostgREST: resource embedding, and relations from the API description.

A read with ``include`` is one request (per page the server's row cap allows): the parent
``select`` embeds each relation, ``select=id,email,conversations(id,lead_id,messages(...))``,
and each embedded level gets its own parameters, prefixed by its path: ``conversations.order=
id.asc``, ``conversations.limit=<per-parent limit + 1>``, ``conversations.status=eq.open``. An
embedded filter narrows the children only, never the parents (no ``!inner``). A relation named
otherwise than its child table is embedded under that name as an alias
(``leads_by_owner:leads(...)``); when a parent has two relations to the same child table, the
child column disambiguates (``leads!owner_id(...)``, PostgREST's hint). The answer's lists are
then bounded exactly as on every backend by :func:`persistence.relations.attach`.

PostgREST describes foreign keys in its OpenAPI document: a referencing column's
``description`` ends with ``<fk table='clients' column='id'/>``; :func:`parse_relations` reads
them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from persistence.backends.supabase.postgrest.encoding import (
    RESERVED_PARAMETERS,
    filter_params,
    needs_client_check,
    order_param,
)
from persistence.errors import ColumnNotAllowedError, UnsupportedOperatorError
from persistence.relations import RelatedPlan, Relation, fetch_columns, foreign_key_relations

__all__ = ["embedded", "embedding", "parse_relations"]

Params = list[tuple[str, str]]
_FK_NOTE = re.compile(r"<fk table='([^']*)' column='([^']*)'/>")


def parse_relations(document: Any) -> tuple[Relation, ...]:
    """The single-column foreign keys an OpenAPI document's column descriptions note, as
    relations named after the child table (``<child>_<column>`` when a child refers to the same
    parent twice); names that are not identifiers are left out."""
    definitions = document.get("definitions") if isinstance(document, Mapping) else None
    if not isinstance(definitions, Mapping):
        return ()
    keys: list[tuple[str, str, str, str]] = []
    for child, definition in definitions.items():
        properties = definition.get("properties") if isinstance(definition, Mapping) else None
        if not isinstance(properties, Mapping):
            continue
        for column, prop in properties.items():
            note = prop.get("description") if isinstance(prop, Mapping) else None
            match = _FK_NOTE.search(note) if isinstance(note, str) else None
            if match is not None:
                keys.append((match[1], match[2], str(child), str(column)))
    return foreign_key_relations(keys)


def embedding(plans: Sequence[RelatedPlan], relations: Sequence[Relation]) -> tuple[str, Params]:
    """The ``select`` terms embedding ``plans`` (to append to the parent's columns) and the
    embedded levels' parameters."""
    params: Params = []
    terms = [_embed(plan, "", relations, params) for plan in plans]
    return ",".join(terms), params


def _embed(plan: RelatedPlan, prefix: str, relations: Sequence[Relation], params: Params) -> str:
    relation = plan.relation
    path = f"{prefix}{plan.name}"
    for flt in plan.filters:
        if flt.column in RESERVED_PARAMETERS:
            raise ColumnNotAllowedError(
                f"column {flt.column!r} of {relation.child_table!r} cannot be filtered over the "
                "Supabase API: PostgREST reads that query parameter as part of its own grammar",
                table=relation.child_table,
                column=flt.column,
                operation="read",
            )
        if needs_client_check(flt):
            raise UnsupportedOperatorError(
                "a literal '*' in a text filter of included rows cannot be sent to the Supabase "
                "API (PostgREST reads every '*' as a wildcard)",
                operator=flt.op.value,
                backend="supabase",
            )
        column, value = filter_params(flt)
        params.append((f"{path}.{column}", value))
    params.append((f"{path}.order", order_param(())))
    params.append((f"{path}.limit", str(plan.limit + 1)))
    twins = [
        r
        for r in relations
        if r.parent_table == relation.parent_table and r.child_table == relation.child_table
    ]
    alias = "" if plan.name == relation.child_table else f"{plan.name}:"
    hint = f"!{relation.child_column}" if len(twins) > 1 else ""
    inner = [
        *fetch_columns(plan),
        *(_embed(c, f"{path}.", relations, params) for c in plan.children),
    ]
    return f"{alias}{relation.child_table}{hint}({','.join(inner)})"


def embedded(plan: RelatedPlan, parents: Sequence[dict[str, Any]], budget: int) -> list[Any]:
    """The children the server embedded under ``plan``'s name in ``parents``, in parent order
    (taken out of the parent rows: :func:`persistence.relations.attach` puts them back,
    bounded)."""
    children: list[Any] = []
    for parent in parents:
        found = parent.pop(plan.name, None)
        if isinstance(found, list):
            children.extend(found)
    return children
