"""Which index serves each filter the agent generates, and the statement that would create it.

Pure functions over catalog facts (no I/O): ``rag-agent doctor`` reads the facts and prints what
these return. The knowledge, in one place (column → operator the agent generates → index):

==============================  ==========  ===========================  ========================
column                          operator    PostgreSQL backend's SQL     index that serves it
==============================  ==========  ===========================  ========================
``id``, ``*_id``                ``eq``      ``col = $1``                 btree ``(col)``
``email``, ``*_email`` (text)   ``ieq``     ``lower(col) = lower($1)``   btree ``(lower(col))``
``name``, ``*_name``,           ``icontains``  ``col ILIKE '%…%'``       GIN ``(col gin_trgm_ops)``
``title``, ``subject`` (text)
``title`` (text), acronyms      ``ieq``     ``lower(col) = lower($1)``   btree ``(lower(col))``
``status``, ``state``,          ``eq``      ``col = $1``                 btree ``(col)``
``stage``, ``channel``,
``direction`` (text)
``status`` (text), the          ``ieq``     ``lower(col) = lower($1)``   btree ``(lower(col))``
``query_leads`` tool's field
any of these names, an enum     ``eq``      ``col = $1`` / ``= ANY($1)``  btree ``(col)``
date, timestamp[tz] columns     ``range``   ``col >= $1 AND col < $2``   btree ``(col)``
==============================  ==========  ===========================  ========================

**Required** or **recommended**: the indexes of the point lookups the rules make on every
request naming a row or its owner (``id`` and ``*_id`` equality, e-mail equality) are required:
without them each such request scans the table. The others (substring, status, dates, titles)
serve broader filters and are recommended: a read still answers, more slowly on a large table.
Only a missing *required* index (or a privilege problem) makes the report fail.

The rules ask for a ``title`` acronym ("CTO") as a whole value (``ieq``) and for other titles by
substring (``icontains``), so a text ``title`` column is checked for both indexes. On an enum column
every filter is rewritten onto the enum's labels (``ieq``, ``icontains`` and order comparisons
become ``=``/``= ANY`` on labels, see ``persistence.values.enum_filters``): a plain btree serves
them all, and a ``lower(col::text)`` index could not be built anyway (``enum_out`` is not
immutable).

Over PostgREST (Supabase) ``ieq`` is sent as ``ILIKE`` too, which a ``lower(col)`` btree does
not serve: there email columns want the ``pg_trgm`` GIN index as well. An index serves a filter
when it is valid, not partial, of the right access method, and its key is the column (the
*leading* key, for a btree), the exact ``lower(col)`` expression, or the column with the
trigram operator class; index names are never trusted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from persistence.backends.postgres.indexes import IndexKind, serving_index

if TYPE_CHECKING:  # the facts come from the postgres backend, which needs psycopg
    from persistence.backends.postgres import IndexFacts, RoleFacts

__all__ = [
    "Check",
    "IndexKind",
    "Report",
    "column_operator",
    "column_operators",
    "create_statement",
    "format_report",
    "is_required",
    "memory_report",
    "postgres_report",
    "role_problems",
    "serving_index",
    "supabase_report",
    "type_class",
]

TEXT, TEMPORAL, ENUM, OTHER = "text", "temporal", "enum", "other"
TRGM_EXTENSION = "CREATE EXTENSION IF NOT EXISTS pg_trgm;"
_TEMPORAL_TYPES = frozenset({"date", "timestamp", "timestamptz"})
_STATUS_COLUMNS = frozenset({"status", "state", "stage", "channel", "direction"})
_SEARCHED_COLUMNS = frozenset({"name", "title", "subject"})
_PLAIN_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]*")
# PostgreSQL's reserved key words (also those allowed as function or type names): a name among
# them must be quoted to be an identifier.
_RESERVED = frozenset(
    """all analyse analyze and any array as asc asymmetric authorization binary both case cast
    check collate collation column concurrently constraint create cross current_catalog
    current_date current_role current_schema current_time current_timestamp current_user default
    deferrable desc distinct do else end except false fetch for foreign freeze from full grant
    group having ilike in initially inner intersect into is isnull join lateral leading left
    like limit localtime localtimestamp natural not notnull null offset on only or order outer
    overlaps placing primary references returning right select session_user similar some
    symmetric system_user table tablesample then to trailing true union unique user using
    variadic verbose when where window with""".split()  # noqa: SIM905
)


@dataclass(frozen=True, slots=True)
class Check:
    """One filtered column: the operator the agent generates, the index it needs, the index
    found (``served_by``; ``None`` when none, or when the catalog could not be read:
    ``checked`` false) and the statement that would create one."""

    table: str
    column: str
    operator: str
    index: IndexKind
    statement: str
    served_by: str | None = None
    checked: bool = True

    @property
    def required(self) -> bool:
        """Whether this index serves a point lookup (see the module docstring)."""
        return is_required(self.column, self.operator)

    @property
    def missing(self) -> bool:
        """True when the catalog was read and no index serves this column."""
        return self.checked and self.served_by is None

    def as_json(self) -> dict[str, Any]:
        """This check as a JSON-ready dict."""
        return {
            "table": self.table,
            "column": self.column,
            "operator": self.operator,
            "index": self.index.value,
            "served_by": self.served_by,
            "served": self.served_by is not None if self.checked else None,
            "required": self.required,
            "statement": None if self.served_by is not None else self.statement,
        }


@dataclass(frozen=True, slots=True)
class Report:
    """What ``rag-agent doctor`` prints: ``ok`` is false when an index is missing or the role
    can do more than read."""

    backend: str
    checked: bool
    checks: tuple[Check, ...] = ()
    statements: tuple[str, ...] = ()
    role: Mapping[str, Any] | None = None
    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """No missing required index and no privilege problem (a missing recommended index
        is advice)."""
        return not self.problems and not any(c.missing and c.required for c in self.checks)

    def as_json(self) -> dict[str, Any]:
        """The report as a JSON-ready dict (the ``--json`` output)."""
        return {
            "backend": self.backend,
            "checked": self.checked,
            "ok": self.ok,
            "missing_required": sum(c.missing and c.required for c in self.checks),
            "missing_recommended": sum(c.missing and not c.required for c in self.checks),
            "role": dict(self.role) if self.role is not None else None,
            "problems": list(self.problems),
            "columns": [check.as_json() for check in self.checks],
            "statements": list(self.statements),
            "notes": list(self.notes),
        }


def is_required(column: str, operator: str) -> bool:
    """Whether the index for ``operator`` on ``column`` is required: the point lookups the rules
    make (``id``/``*_id`` equality, e-mail equality), not the broader filters."""
    if operator == "eq":
        return column == "id" or column.endswith("_id")
    return operator == "ieq" and (column == "email" or column.endswith("_email"))


def type_class(type_name: str | None, category: str | None = None) -> str | None:
    """``"text"``, ``"temporal"``, ``"enum"`` or ``"other"`` for a catalog type (``None`` when
    unknown)."""
    if type_name is None:
        return None
    if type_name in _TEMPORAL_TYPES:
        return TEMPORAL
    if category == "E":
        return ENUM
    return TEXT if category == "S" else OTHER


def column_operators(column: str, kind: str | None) -> tuple[str, ...]:
    """Every indexable operator the agent generates for ``column`` of type class ``kind``
    (``None``: unknown, as over PostgREST, where the name decides); empty when none."""
    if column == "id" or column.endswith("_id"):
        return ("eq",)
    if column in _STATUS_COLUMNS:
        # query_leads' status field matches ignoring case; on an enum that is a label equality.
        return ("eq", "ieq") if column == "status" and kind in (TEXT, None) else ("eq",)
    temporal_name = column.endswith(("_at", "_date")) or column == "date"
    if kind == TEMPORAL or (kind is None and temporal_name):
        return ("range",)
    searched = column in _SEARCHED_COLUMNS or column.endswith("_name")
    emailed = column == "email" or column.endswith("_email")
    if kind == ENUM:
        return ("eq",) if searched or emailed else ()
    if kind not in (TEXT, None):
        return ()
    if emailed:
        return ("ieq",)
    if column == "title":
        return ("icontains", "ieq")  # words by substring, an acronym ("CTO") whole
    if searched:
        return ("icontains",)
    return ()


def column_operator(column: str, kind: str | None) -> str | None:
    """The first operator of :func:`column_operators` (``None`` when there is none)."""
    return next(iter(column_operators(column, kind)), None)


def _index_kind(operator: str, *, over_postgrest: bool) -> IndexKind:
    if operator == "icontains" or (operator == "ieq" and over_postgrest):
        return IndexKind.TRIGRAM
    return IndexKind.LOWER_BTREE if operator == "ieq" else IndexKind.BTREE


def _identifier(name: str) -> str:
    if _PLAIN_IDENTIFIER.fullmatch(name) and name not in _RESERVED:
        return name
    return '"' + name.replace('"', '""') + '"'


def create_statement(schema: str, table: str, column: str, kind: IndexKind) -> str:
    """The ``CREATE INDEX CONCURRENTLY IF NOT EXISTS`` statement for a ``kind`` index."""
    suffix = {IndexKind.BTREE: "idx", IndexKind.LOWER_BTREE: "lower_idx"}.get(kind, "trgm_idx")
    name = _identifier(f"{table}_{column}_{suffix}"[:63])
    target = f"{_identifier(schema)}.{_identifier(table)}"
    col = _identifier(column)
    if kind is IndexKind.BTREE:
        keys = f"({col})"
    elif kind is IndexKind.LOWER_BTREE:
        keys = f"(lower({col}))"
    else:
        keys = f"USING gin ({col} gin_trgm_ops)"
    return f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {target} {keys};"


def _checks(
    schema: str, tables: Mapping[str, Mapping[str, str | None]], *, over_postgrest: bool
) -> list[tuple[str, str, str, IndexKind, str]]:
    found = []
    for table in sorted(tables):
        for column, kind in tables[table].items():
            seen: set[IndexKind] = set()
            for operator in column_operators(column, kind):
                index = _index_kind(operator, over_postgrest=over_postgrest)
                if index in seen:  # over PostgREST one trigram index serves ieq and icontains
                    continue
                seen.add(index)
                statement = create_statement(schema, table, column, index)
                found.append((table, column, operator, index, statement))
    return found


def role_problems(
    role: RoleFacts | None, writable: Iterable[str], allowed: Iterable[str]
) -> list[str]:
    """What the connected role may do beyond reading the allowed tables, in words."""
    problems = []
    if role is not None and role.superuser:
        problems.append(f"role {role.name} is a superuser: it bypasses row-level security")
    if role is not None and role.bypass_rls and not role.superuser:
        problems.append(f"role {role.name} has BYPASSRLS: it bypasses row-level security")
    if role is not None and role.powers:
        problems.append(
            f"role {role.name} belongs to, or can SET ROLE to, {', '.join(role.powers)}: "
            "revoke the membership"
        )
    written = sorted(set(writable) & set(allowed))
    if written:
        problems.append(
            "the role may INSERT, UPDATE or DELETE on " + ", ".join(written) + ": grant SELECT only"
        )
    return problems


def postgres_report(
    *,
    schema: str,
    tables: Mapping[str, Mapping[str, tuple[str, str]]],
    indexes: Sequence[IndexFacts],
    extensions: Iterable[str],
    role: RoleFacts | None,
    writable: Iterable[str],
    where: str = "",
) -> Report:
    """The report for a PostgreSQL database: ``tables`` maps each allowed table to its columns'
    ``(type name, type category)``."""
    classes = {
        table: {column: type_class(*types) for column, types in columns.items()}
        for table, columns in tables.items()
    }
    checks = tuple(
        Check(table, column, operator, kind, statement, serving_index(table, column, kind, indexes))
        for table, column, operator, kind, statement in _checks(
            schema, classes, over_postgrest=False
        )
    )
    statements = [check.statement for check in checks if check.missing]
    notes = []
    needs_trgm = any(c.missing and c.index is IndexKind.TRIGRAM for c in checks)
    if needs_trgm and "pg_trgm" not in set(extensions):
        statements.insert(0, TRGM_EXTENSION)
        notes.append("pg_trgm is not installed: the trigram indexes need it first")
    if where:
        notes.insert(0, where)
    role_json = None
    if role is not None:
        role_json = {
            "name": role.name,
            "superuser": role.superuser,
            "bypassrls": role.bypass_rls,
            "writable_tables": sorted(set(writable) & set(tables)),
        }
    return Report(
        "postgres",
        True,
        checks,
        tuple(statements),
        role_json,
        tuple(role_problems(role, writable, tables)),
        tuple(notes),
    )


def supabase_report(schema: str, tables: Mapping[str, Sequence[str]]) -> Report:
    """Advice for a Supabase project, whose catalog PostgREST does not expose: the statements
    to run in the SQL editor, for every column the agent filters on (by its name)."""
    classes = {table: dict.fromkeys(columns) for table, columns in tables.items()}
    checks = tuple(
        # Supabase tables have their primary key on id, which its constraint indexes.
        Check(table, column, operator, kind, statement, _primary_key(column), checked=False)
        for table, column, operator, kind, statement in _checks(
            schema, classes, over_postgrest=True
        )
    )
    statements = [check.statement for check in checks if check.served_by is None]
    if any(check.index is IndexKind.TRIGRAM for check in checks):
        statements.insert(0, TRGM_EXTENSION)
    return Report(
        "supabase",
        False,
        checks,
        tuple(statements),
        notes=(
            "the catalog cannot be read over PostgREST: indexes were not checked",
            "run these in the Supabase SQL editor, one at a time (CONCURRENTLY cannot run "
            "inside a transaction); ieq and icontains reach the database as ILIKE, which the "
            "pg_trgm GIN indexes serve",
        ),
    )


def _primary_key(column: str) -> str | None:
    return "primary key" if column == "id" else None


def memory_report() -> Report:
    """The memory backend filters rows in process memory: there is no index to create."""
    return Report(
        "memory", True, notes=("the memory backend filters rows in memory: no index is needed",)
    )


def format_report(report: Report) -> str:
    """The report for a person: the role, a table of columns and indexes, the statements."""
    lines = [f"{report.backend}: {note}" for note in report.notes[:1]]
    lines += [f"  {note}" for note in report.notes[1:]]
    if report.role is not None:
        lines.append(f"role {report.role['name']}:")
        lines += [f"  problem: {problem}" for problem in report.problems] or [
            "  ok: not a superuser, no BYPASSRLS, SELECT only on the allowed tables"
        ]
    if report.checks:
        rows = [[c.table, c.column, c.operator, c.index.value, _status(c)] for c in report.checks]
        lines.append("")
        lines.append(_grid(["table", "column", "operator", "needs", "index"], rows))
    if report.statements and report.checked:
        lines += _missing_lines(report)
    elif report.statements:
        lines += ["", "recommended statements:", *report.statements]
    if report.checked and report.checks and not report.statements:
        lines.append("")
        lines.append("every filtered column has an index that serves it")
    return "\n".join(lines)


def _missing_lines(report: Report) -> list[str]:
    """The missing indexes, required first (they fail the check), then recommended (advice)."""
    lines: list[str] = []
    extension = [s for s in report.statements if s == TRGM_EXTENSION]
    for required, title in (
        (True, "required (point lookups scan the table without them; the check fails)"),
        (False, "recommended (broader filters; advice, the check does not fail)"),
    ):
        missing = [c for c in report.checks if c.missing and c.required is required]
        if not missing:
            continue
        trigram = any(c.index is IndexKind.TRIGRAM for c in missing)
        lines += ["", f"{len(missing)} {title}:"]
        lines += extension if trigram else []
        lines += [c.statement for c in missing]
    return lines


def _status(check: Check) -> str:
    if check.served_by is not None:
        return check.served_by
    if not check.checked:
        return "not checked"
    return "MISSING" if check.required else "missing (recommended)"


def _grid(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    body = [headers, ["-" * w for w in widths], *rows]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in body
    )
