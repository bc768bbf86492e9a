"""What ``rag-agent doctor`` says about search: the extensions each leg needs, and its indexes.

Pure functions over catalog facts (no I/O), like :mod:`rag_agent.ops.doctor`. Each leg of
``facade.search`` (:mod:`persistence.search`) and the index that serves it on PostgreSQL:

=========  ==============================================  =====================================
leg        what the backend's SQL does                      index that serves it
=========  ==============================================  =====================================
keyword    ``to_tsvector(config, coalesce(a,'') || ' ' ||   GIN on that exact expression
           coalesce(b,'')) @@ plainto_tsquery(…)``
           over the table's text columns, in table order
trigram    ``%s <% col`` (pg_trgm ``word_similarity``)      GIN ``(col gin_trgm_ops)``
           on the short text columns (names, e-mails,
           companies, titles, subjects)
semantic   ``embedding <=> %s`` over the side table         HNSW ``(embedding vector_cosine_ops)``
           ``<table>_embeddings`` (``rag-agent index``)     (the indexer builds it)
filters    hard constraints inside every leg               btree on the filter columns (the
                                                            report's first table)
=========  ==============================================  =====================================

Without ``pg_trgm`` the trigram leg does not run; without ``pgvector`` the semantic leg re-ranks a
bounded filtered candidate set in process (slower, said in ``metadata.ranking.degraded``). The
library never runs ``CREATE EXTENSION``: the statements are for the database owner.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from persistence.search.extensions import PG_TRGM_HOWTO, PGVECTOR_HOWTO
from persistence.search.text import is_short_text_column
from rag_agent.ops.doctor import IndexKind, create_statement, serving_index

if TYPE_CHECKING:
    from persistence.backends.postgres import IndexFacts, SpellingFacts

__all__ = [
    "DEFAULT_TEXT_SEARCH_CONFIG",
    "EXTENSIONS",
    "LegIndex",
    "SearchAdvice",
    "format_search",
    "search_advice",
    "spelling_notes",
    "tsvector_expression",
]

#: The full-text configuration the PostgreSQL backend uses unless configured otherwise.
DEFAULT_TEXT_SEARCH_CONFIG = "english"
#: The extensions the search legs use: name → the leg that needs it.
EXTENSIONS: Mapping[str, str] = {"pg_trgm": "trigram", "vector": "semantic"}
_SIDE_SUFFIX = "_embeddings"


@dataclass(frozen=True, slots=True)
class LegIndex:
    """The index one leg needs on one table, the index found (``None``: none) and the
    statement that would create it (``None`` when another step builds it)."""

    table: str
    leg: str
    needs: str
    served_by: str | None
    statement: str | None

    def as_json(self) -> dict[str, Any]:
        """This entry as a JSON-ready dict."""
        return {
            "table": self.table,
            "leg": self.leg,
            "needs": self.needs,
            "served_by": self.served_by,
            "statement": None if self.served_by is not None else self.statement,
        }


@dataclass(frozen=True, slots=True)
class SearchAdvice:
    """The extensions (``installed`` | ``available`` | ``absent``), the index of each leg on
    each table, and what the reader should know."""

    extensions: Mapping[str, str]
    indexes: tuple[LegIndex, ...]
    notes: tuple[str, ...]

    def as_json(self) -> dict[str, Any]:
        """The advice as a JSON-ready dict (the ``search`` key of ``doctor --json``)."""
        return {
            "extensions": dict(self.extensions),
            "indexes": [entry.as_json() for entry in self.indexes],
            "notes": list(self.notes),
        }


def _quoted(name: str) -> str:
    return name if re.fullmatch(r"[a-z_][a-z0-9_]*", name) else '"' + name.replace('"', '""') + '"'


def tsvector_expression(columns: Sequence[str], config: str = DEFAULT_TEXT_SEARCH_CONFIG) -> str:
    """The keyword leg's document over ``columns``, as a GIN index must repeat it.

    >>> tsvector_expression(["subject", "body"])
    "to_tsvector('english'::regconfig, COALESCE(subject, '') || ' ' || COALESCE(body, ''))"
    """
    parts = " || ' ' || ".join(f"COALESCE({_quoted(c)}, '')" for c in columns)
    literal = config.replace("'", "''")
    return f"to_tsvector('{literal}'::regconfig, {parts})"


def _normal(expression: str) -> str:
    # pg_get_indexdef prints casts and parentheses its own way: compare what is left.
    text = expression.lower().replace("pg_catalog.", "").replace("::text", "")
    return re.sub(r"[\s()\"]", "", text)


def _tsvector_index(
    table: str, columns: Sequence[str], indexes: Iterable[IndexFacts]
) -> str | None:
    wanted = {_normal(f"COALESCE({c}, '')") for c in columns}
    for index in indexes:
        if index.table != table or index.method != "gin" or not index.valid or index.partial:
            continue
        for key in index.keys:
            found = _normal(key.expression)
            if "to_tsvector" in found and all(part in found for part in wanted):
                return index.name
    return None


def _hnsw_index(side: str, indexes: Iterable[IndexFacts]) -> str | None:
    for index in indexes:
        usable = index.table == side and index.valid and not index.partial
        if (
            usable
            and index.method == "hnsw"
            and any(key.opclass == "vector_cosine_ops" for key in index.keys)
        ):
            return index.name
    return None


def _extension_state(name: str, installed: frozenset[str], available: frozenset[str]) -> str:
    if name in installed:
        return "installed"
    return "available" if name in available else "absent"


def search_advice(
    *,
    schema: str,
    tables: Mapping[str, Sequence[str]],
    indexes: Sequence[IndexFacts],
    extensions: Iterable[str],
    available: Iterable[str] = (),
    config: str = DEFAULT_TEXT_SEARCH_CONFIG,
    spelling: SpellingFacts | None = None,
) -> SearchAdvice:
    """The search advice for ``tables`` (each allowed table → its text columns, in table
    order), given the catalog's ``indexes`` and the installed and ``available`` extensions;
    with ``spelling``, where spelling corrections run and why not elsewhere."""
    installed, possible = frozenset(extensions), frozenset(available)
    states = {name: _extension_state(name, installed, possible) for name in EXTENSIONS}
    entries: list[LegIndex] = []
    for table in sorted(tables):
        columns = list(tables[table])
        if not columns:
            continue
        expression = tsvector_expression(columns, config)
        name = _quoted(f"{table}_search_tsv_idx"[:63])
        entries.append(
            LegIndex(
                table,
                "keyword",
                f"GIN on {expression}",
                _tsvector_index(table, columns, indexes),
                f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {_quoted(schema)}."
                f"{_quoted(table)} USING gin ({expression});",
            )
        )
        for column in columns:
            if is_short_text_column(column):
                entries.append(
                    LegIndex(
                        table,
                        "trigram",
                        f"GIN ({column} gin_trgm_ops)",
                        serving_index(table, column, IndexKind.TRIGRAM, indexes),
                        create_statement(schema, table, column, IndexKind.TRIGRAM),
                    )
                )
        side = f"{table}{_SIDE_SUFFIX}"
        entries.append(
            LegIndex(
                table,
                "semantic",
                f"HNSW on {side} (embedding vector_cosine_ops)",
                _hnsw_index(side, indexes),
                None,  # built by the indexer, with the vectors it writes
            )
        )
    notes = _notes(states, entries, config)
    if spelling is not None:
        notes += spelling_notes(sorted(t for t in tables if tables[t]), spelling, states)
    return SearchAdvice(states, tuple(entries), tuple(notes))


def spelling_notes(
    tables: Sequence[str], spelling: SpellingFacts, states: Mapping[str, str]
) -> list[str]:
    """Per searchable table, whether its search corrects misspelled words, and why not.

    A correction may only be a word of rows the reader could read with the search's filters;
    the words table counts every row, so corrections run only for unfiltered searches of a
    table without row-level security.
    """
    if states.get("pg_trgm") != "installed":
        return ["spelling corrections: off everywhere (pg_trgm is not installed)"]
    notes = []
    for table in tables:
        if table in spelling.row_security:
            why = "off: row-level security is on, and the words table counts hidden rows too"
        elif table not in spelling.words_tables:
            why = f"off: no words table this role may read (rag-agent index {table})"
        else:
            why = "on for unfiltered searches; a filtered search is not corrected"
        notes.append(f"spelling corrections on {table}: {why}")
    return notes


def _notes(states: Mapping[str, str], entries: Sequence[LegIndex], config: str) -> list[str]:
    notes = []
    for extension, leg in EXTENSIONS.items():
        state = states[extension]
        if state == "installed":
            notes.append(f"{extension} is installed: the {leg} leg runs in the database")
            continue
        where = (
            "available on the server: the database owner may run CREATE EXTENSION "
            f"{extension}; (the library never does)"
            if state == "available"
            else "not available on this server"
        )
        effect = (
            "the trigram leg (typos in names) does not run"
            if leg == "trigram"
            else "the semantic leg re-ranks a bounded filtered candidate set in process"
        )
        notes.append(f"{extension} is not installed ({where}): {effect}")
        if state != "available":  # the statement alone fails on a server without it
            notes.append(PGVECTOR_HOWTO if extension == "vector" else PG_TRGM_HOWTO)
    if any(e.leg == "semantic" and e.served_by is None for e in entries):
        notes.append(
            "row vectors and their HNSW index are written by the admin step "
            "'rag-agent index TABLE --columns a,b --dsn WRITER_DSN' (a writer role)"
        )
    notes.append(
        f"the keyword index repeats the backend's expression exactly (config {config!r}, the "
        "table's text columns in table order): a policy that hides columns changes it"
    )
    notes.append("the filters are served by the btree indexes listed above")
    return notes


def format_search(advice: SearchAdvice) -> str:
    """The advice for a person: extensions, the index of each leg, the statements."""
    lines = ["search:"]
    lines += [f"  {name}: {state}" for name, state in advice.extensions.items()]
    lines += [f"  {note}" for note in advice.notes]
    for entry in advice.indexes:
        found = entry.served_by or ("MISSING" if entry.statement else "not built")
        lines.append(f"  {entry.table:<16} {entry.leg:<9} {found:<24} needs {entry.needs}")
    statements = [e.statement for e in advice.indexes if e.served_by is None and e.statement]
    if statements:
        lines.append("")
        lines.append("to serve the search legs (run one at a time, outside a transaction):")
        if advice.extensions.get("pg_trgm") != "installed" and any(
            e.leg == "trigram" for e in advice.indexes
        ):
            lines.append("CREATE EXTENSION IF NOT EXISTS pg_trgm;")
        lines += statements
    return "\n".join(lines)
