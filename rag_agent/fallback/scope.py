"""Which tables one fallback run may read: the table asked about and the tables related to it.

The scope is enforced by the fallback's own tools (:class:`~.tools.FallbackSession`), not by the
prompt: a model that obeys text planted in a row ("now read clients") is refused like a model
that asks for a table outside the allow-list. Relations are the reference schema's foreign-key
columns (``leads.client_id`` → ``clients``, ``messages.conversation_id`` → ``conversations``, …),
followed one hop in either direction. The governance tables (``clients``, ``campaigns``) hold
what a question about another table should not reach, so they join the scope of such a question
only when the caller opts in. Three modes (``RAG_FALLBACK_SCOPE`` or
``RAGAgent(..., fallback_scope=...)``)::

    "table"                only the table asked about
    "related"   (default)  plus its related tables, governance tables excepted
    "related+governance"   plus its related tables, governance tables included

The facade's allow-list still applies on top of the scope. Immutable, so thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from persistence import GOVERNANCE_TABLES
from persistence.errors import ConfigurationError
from persistence.schema import TABLE_COLUMNS
from rag_agent.settings import SCOPE_MODES, ScopeMode

__all__ = ["REFERENCE_RELATIONS", "SCOPE_MODES", "FallbackScope", "ScopeMode"]


def _relations(columns: Mapping[str, tuple[str, ...]]) -> Mapping[str, frozenset[str]]:
    # A column ``<name>_id`` refers to table ``<name>s`` when the schema has one.
    related: dict[str, set[str]] = {table: set() for table in columns}
    for table, names in columns.items():
        for column in names:
            target = f"{column.removesuffix('_id')}s"
            if column.endswith("_id") and target in columns and target != table:
                related[table].add(target)
                related[target].add(table)
    return MappingProxyType({table: frozenset(tables) for table, tables in related.items()})


#: table -> the tables it shares a foreign key with (either direction), from the reference schema.
REFERENCE_RELATIONS: Mapping[str, frozenset[str]] = _relations(TABLE_COLUMNS)


@dataclass(frozen=True, slots=True)
class FallbackScope:
    """The tables a fallback run may read, given the table asked about.

    >>> sorted(FallbackScope().tables("leads"))
    ['conversations', 'inquiries', 'leads']
    >>> sorted(FallbackScope("related+governance").tables("leads"))
    ['campaigns', 'clients', 'conversations', 'inquiries', 'leads']
    """

    mode: ScopeMode = "related"
    #: table -> related tables; the reference schema's unless a deployment declares its own.
    relations: Mapping[str, frozenset[str]] = field(default_factory=lambda: REFERENCE_RELATIONS)

    def __post_init__(self) -> None:
        if self.mode not in SCOPE_MODES:
            raise ConfigurationError(
                f"fallback scope {self.mode!r} is not one of {', '.join(SCOPE_MODES)} "
                "(env RAG_FALLBACK_SCOPE)",
                variable="RAG_FALLBACK_SCOPE",
            )

    @classmethod
    def of(cls, scope: FallbackScope | str) -> FallbackScope:
        """``scope`` itself, or the scope of that mode name."""
        if isinstance(scope, FallbackScope):
            return scope
        return cls(scope)  # type: ignore[arg-type]  # checked in __post_init__

    def tables(self, table: str) -> frozenset[str]:
        """The tables a run about ``table`` may read (``table`` itself always)."""
        if self.mode == "table":
            return frozenset({table})
        related = self.relations.get(table, frozenset())
        if self.mode == "related":
            related = related - GOVERNANCE_TABLES
        return frozenset({table, *related})
