"""Resource embedding for the PostgREST emulator: the ``select`` grammar with embedded
resources, and the rows of one embedded level.

Grammar mirrored (the subset the Supabase adapter may send): ``select`` is a comma-separated
list of column names and embedded resources ``[alias:]table[!hint](select)``, nested to any
depth; an embedded resource is found among the emulator's relations from the current table to
``table`` (``hint`` naming the child's column when two relations qualify; none qualifying is
PostgREST's ``PGRST200``, two its ``PGRST201``). Parameters prefixed by an embedded path
(``conversations.limit``, ``conversations.order``, ``conversations.status=eq.open``,
``conversations.messages.limit``) apply to that level's children of each parent only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from persistence.relations import Relation

__all__ = ["Embed", "EmbedError", "parse_select", "resolve"]

_IDENT = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_HEAD = re.compile(r"(?:([a-z_][a-z0-9_]*):)?([a-z_][a-z0-9_]*)(?:!([a-z_][a-z0-9_]*))?")


class EmbedError(Exception):
    """A request the server refuses: ``status``, PostgREST's ``code`` and a message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


@dataclass
class Embed:
    """One embedded resource of a ``select``: the key its lists sit under, the table, the hint,
    its columns (``None`` for ``*``) and its own embedded resources."""

    key: str
    table: str
    hint: str | None
    columns: list[str] | None
    embeds: list[Embed] = field(default_factory=list)


def _split(text: str) -> list[str]:
    terms, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                raise EmbedError(400, "PGRST100", "failed to parse select parameter")
        elif char == "," and depth == 0:
            terms.append(text[start:index])
            start = index + 1
    if depth:
        raise EmbedError(400, "PGRST100", "failed to parse select parameter")
    terms.append(text[start:])
    return terms


def parse_select(text: str) -> tuple[list[str] | None, list[Embed]]:
    """The columns (``None`` for ``*``) and embedded resources of a ``select`` value."""
    columns: list[str] = []
    embeds: list[Embed] = []
    star = False
    for term in _split(text):
        if "(" in term:
            if not term.endswith(")"):
                raise EmbedError(400, "PGRST100", f"failed to parse select parameter: {term}")
            head, _, inner = term[:-1].partition("(")
            match = _HEAD.fullmatch(head)
            if match is None:
                raise EmbedError(400, "PGRST100", f"failed to parse select parameter: {head}")
            alias, table, hint = match.groups()
            inner_columns, inner_embeds = parse_select(inner)
            embeds.append(Embed(alias or table, table, hint, inner_columns, inner_embeds))
        elif term == "*":
            star = True
        elif _IDENT.fullmatch(term):
            columns.append(term)
        else:
            raise EmbedError(400, "PGRST100", f"failed to parse select parameter: {term}")
    return (None if star or not columns else columns), embeds


def resolve(parent: str, embed: Embed, relations: Sequence[Relation]) -> Relation:
    """The relation from ``parent`` that ``embed`` names (its table, and its hint if any)."""
    found = [
        r
        for r in relations
        if r.parent_table == parent
        and r.child_table == embed.table
        and (embed.hint is None or embed.hint == r.child_column)
    ]
    if not found:
        raise EmbedError(
            400,
            "PGRST200",
            f"Could not find a relationship between '{parent}' and '{embed.table}' in the "
            "schema cache",
        )
    if len(found) > 1:
        raise EmbedError(
            300,
            "PGRST201",
            f"Could not embed because more than one relationship was found "
            f"for '{parent}' and '{embed.table}'",
        )
    return found[0]
