"""What the PostgreSQL backend knows of the database: the catalog of readable tables and their
column types (``pg_type.typname`` and ``typcategory``, read by
:func:`persistence.values.types.column_type`; an enum's labels from ``pg_enum``), and the start-up
check of the connected role's privileges; and, for ``rag-agent doctor``, the role's
privileges, the indexes and the extensions as plain facts.

Every catalog name is schema-qualified (``pg_catalog.``): a table or function of the same name
earlier on the ``search_path`` cannot stand in for it.

The catalog is a snapshot replaced whole on reload, never mutated, so a concurrent reader sees
the old one or the new one. A table missing from it may be looked for again, at most once every
few seconds (:meth:`Catalog.may_reload`), so a table created after start-up is found.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterable, Mapping
from collections.abc import Set as AbstractSet
from types import MappingProxyType
from typing import Any, NamedTuple

import psycopg

from persistence.backends.postgres.indexes import (
    IndexFacts,
    IndexKey,
    IndexKind,
    served_lookups,
    unique_columns,
)
from persistence.errors import ColumnNotAllowedError, ConfigurationError
from persistence.logs import get_logger
from persistence.relations import Relation, foreign_key_relations
from persistence.steps import Steps, drive
from persistence.values.types import ColumnType, column_type, enum_type

__all__ = [
    "Catalog",
    "IndexFacts",
    "IndexKey",
    "RoleFacts",
    "Table",
    "check_role",
    "read_available_extensions",
    "read_extensions",
    "read_indexes",
    "read_role",
]

log = get_logger("persistence.postgres")

#: A catalog statement and its parameters: what the catalog's steps yield.
Statement = tuple[bytes, tuple[Any, ...] | None]

# ``writable``: the connected role, or any role it can SET ROLE to (MEMBER, which a NOINHERIT
# role's own privileges leave out), may write the table.
_CATALOG_SQL = b"""
SELECT c.relname, a.attname, t.typname, t.typcategory,
       (SELECT pg_catalog.array_agg(e.enumlabel ORDER BY e.enumsortorder)
        FROM pg_catalog.pg_enum e WHERE e.enumtypid = t.oid) AS labels,
       EXISTS (SELECT FROM pg_catalog.pg_roles r
               WHERE pg_catalog.pg_has_role(current_user, r.oid, 'MEMBER')
                 AND (pg_catalog.has_table_privilege(r.oid, c.oid,
                                                     'INSERT, UPDATE, DELETE, TRUNCATE')
                      OR pg_catalog.has_any_column_privilege(r.oid, c.oid, 'INSERT, UPDATE')))
         AS writable
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid
JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
WHERE n.nspname = %s AND c.relkind IN ('r', 'v', 'm', 'p', 'f')
  AND a.attnum > 0 AND NOT a.attisdropped
  AND pg_catalog.has_column_privilege(c.oid, a.attnum, 'SELECT')
ORDER BY c.relname, a.attnum
"""
# Single-column foreign keys between tables of the schema: parent, its column, child, its column.
_RELATIONS_SQL = b"""
SELECT p.relname, pa.attname, c.relname, ca.attname
FROM pg_catalog.pg_constraint k
JOIN pg_catalog.pg_class c ON c.oid = k.conrelid
JOIN pg_catalog.pg_namespace cn ON cn.oid = c.relnamespace
JOIN pg_catalog.pg_class p ON p.oid = k.confrelid
JOIN pg_catalog.pg_namespace pn ON pn.oid = p.relnamespace
JOIN pg_catalog.pg_attribute ca ON ca.attrelid = k.conrelid AND ca.attnum = k.conkey[1]
JOIN pg_catalog.pg_attribute pa ON pa.attrelid = k.confrelid AND pa.attnum = k.confkey[1]
WHERE k.contype = 'f' AND pg_catalog.cardinality(k.conkey) = 1
  AND cn.nspname = %s AND pn.nspname = %s
ORDER BY p.relname, c.relname, ca.attname
"""
_ROLE_SQL = (
    b"SELECT current_user, rolsuper, rolbypassrls FROM pg_catalog.pg_roles"
    b" WHERE rolname = current_user"
)
# Every other role the connected one belongs to or can SET ROLE to, directly or not, that
# bypasses row-level security or reaches past SELECT (the predefined roles below).
_POWERS_SQL = b"""
SELECT r.rolname FROM pg_catalog.pg_roles r
WHERE r.rolname <> current_user
  AND pg_catalog.pg_has_role(current_user, r.oid, 'MEMBER')
  AND (r.rolsuper OR r.rolbypassrls OR r.rolname = ANY(%s))
ORDER BY r.rolname
"""
#: Predefined roles that read or write any table or reach the server's files or programs.
#: ``pg_read_all_data`` reads every table, view and sequence of every schema whatever the grants
#: say: a member is no least-privilege reader, as the table allow-list is then its only bound.
POWERFUL_ROLES = (
    "pg_read_all_data",
    "pg_write_all_data",
    "pg_read_server_files",
    "pg_write_server_files",
    "pg_execute_server_program",
)
# One row per key column of every index on a table of the schema (INCLUDE columns left out):
# a plain column's name, or the expression's text as pg_get_indexdef prints it, and its opclass.
_INDEXES_SQL = b"""
SELECT t.relname, i.relname, am.amname, x.indisvalid AND x.indisready, x.indpred IS NOT NULL,
       a.attname, pg_catalog.pg_get_indexdef(x.indexrelid, k.ord::int, true), oc.opcname,
       x.indisunique
FROM pg_catalog.pg_index x
JOIN pg_catalog.pg_class i ON i.oid = x.indexrelid
JOIN pg_catalog.pg_class t ON t.oid = x.indrelid
JOIN pg_catalog.pg_namespace n ON n.oid = t.relnamespace
JOIN pg_catalog.pg_am am ON am.oid = i.relam
CROSS JOIN LATERAL ROWS FROM (pg_catalog.unnest(x.indkey::pg_catalog.int2[]),
                              pg_catalog.unnest(x.indclass::pg_catalog.oid[]))
     WITH ORDINALITY AS k(attnum, opclass, ord)
LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum AND k.attnum > 0
LEFT JOIN pg_catalog.pg_opclass oc ON oc.oid = k.opclass
WHERE n.nspname = %s AND k.ord <= x.indnkeyatts
ORDER BY t.relname, i.relname, k.ord
"""
_EXTENSIONS_SQL = b"SELECT extname FROM pg_catalog.pg_extension"
_AVAILABLE_EXTENSIONS_SQL = b"SELECT name FROM pg_catalog.pg_available_extensions"
_RELOAD_SECONDS = 5.0


class Table(NamedTuple):
    """One table of the catalog: its column types, names in table order, name set, and the
    ``(column, kind)`` lookups its indexes serve."""

    types: Mapping[str, ColumnType]
    names: tuple[str, ...]
    column_set: frozenset[str]
    served: frozenset[tuple[str, IndexKind]] = frozenset()
    #: The columns a unique index keys alone (see ``indexes.unique_columns``).
    unique: frozenset[str] = frozenset()

    def require(self, table: str, names: Collection[str], operation: str) -> Table:
        """This entry, once every one of ``names`` is a column; ``ColumnNotAllowedError`` names
        the first missing one (in the order given, or sorted when ``names`` is a set)."""
        if not self.column_set.issuperset(names):
            ordered = sorted(names) if isinstance(names, AbstractSet) else names
            column = next(c for c in ordered if c not in self.column_set)
            raise ColumnNotAllowedError(
                f"table {table!r} has no column {column!r}",
                table=table,
                column=column,
                operation=operation,
            )
        return self


class _Snapshot(NamedTuple):
    tables: Mapping[str, Table]
    writable: frozenset[str]
    loaded_at: float
    relations: tuple[Relation, ...] = ()


class Catalog:
    """The readable tables of one schema, loaded over a connection the caller lends."""

    def __init__(self, schema: str, clock: Callable[[], float]) -> None:
        self._schema = schema
        self._clock = clock
        self._snapshot = _Snapshot({}, frozenset(), float("-inf"))

    def load(self, conn: psycopg.Connection[Any]) -> None:
        """Read the schema's tables, columns and the role's write privileges afresh."""
        drive(self.load_steps(), functools.partial(fetch_all, conn))

    def load_steps(self) -> Steps[Statement, None]:
        """:meth:`load` as steps, each a statement whose rows it is sent (blocking or
        awaited: see :mod:`persistence.steps`)."""
        tables: dict[str, dict[str, ColumnType]] = {}
        writable: set[str] = set()
        for table, column, type_name, category, labels, can_write in (
            yield (_CATALOG_SQL, (self._schema,))
        ):
            tables.setdefault(table, {})[column] = (
                enum_type(type_name, labels)
                if labels  # an enum: its labels in declaration order, from pg_enum
                else column_type(type_name, category=category)
            )
            if can_write:
                writable.add(table)
        keys = [tuple(row) for row in (yield (_RELATIONS_SQL, (self._schema, self._schema)))]
        indexes = index_facts((yield (_INDEXES_SQL, (self._schema,))))
        self._snapshot = _Snapshot(
            {
                table: Table(
                    MappingProxyType(columns),
                    tuple(columns),
                    frozenset(columns),
                    served_lookups(table, columns, indexes),
                    unique_columns(table, indexes),
                )
                for table, columns in tables.items()
            },
            frozenset(writable),
            self._clock(),
            foreign_key_relations(keys, tables),
        )

    def names(self) -> tuple[str, ...]:
        """The readable tables, sorted."""
        return tuple(sorted(self._snapshot.tables))

    def get(self, table: str) -> Table | None:
        """``table``'s entry, or ``None`` when it is missing or not readable."""
        return self._snapshot.tables.get(table)

    def may_reload(self) -> bool:
        """True when the last load is old enough to look for a missing table again."""
        return self._clock() - self._snapshot.loaded_at >= _RELOAD_SECONDS

    @property
    def relations(self) -> tuple[Relation, ...]:
        """The schema's single-column foreign keys between readable tables, as relations."""
        return self._snapshot.relations

    @property
    def writable(self) -> frozenset[str]:
        """Tables the connected role may insert into, update or delete from."""
        return self._snapshot.writable


class RoleFacts(NamedTuple):
    """The connected role: its name, the two attributes that bypass row-level security, and the
    powerful roles it belongs to or can ``SET ROLE`` to (superusers, ``BYPASSRLS`` roles,
    :data:`POWERFUL_ROLES`)."""

    name: str
    superuser: bool
    bypass_rls: bool
    powers: tuple[str, ...] = ()


def read_role(conn: psycopg.Connection[Any]) -> RoleFacts | None:
    """The connected role's facts (``None`` when ``pg_roles`` does not show it)."""
    return drive(read_role_steps(), functools.partial(fetch_all, conn))


def read_role_steps() -> Steps[Statement, RoleFacts | None]:
    """:func:`read_role` as steps (see :meth:`Catalog.load_steps`)."""
    rows = yield (_ROLE_SQL, None)
    if not rows:
        return None
    row = rows[0]
    powers = tuple(str(r[0]) for r in (yield (_POWERS_SQL, (list(POWERFUL_ROLES),))))
    return RoleFacts(str(row[0]), bool(row[1]), bool(row[2]), powers)


def fetch_all(conn: psycopg.Connection[Any], statement: Statement) -> list[Any]:
    """The rows of one catalog ``statement`` on ``conn``."""
    return conn.execute(*statement).fetchall()


def read_indexes(conn: psycopg.Connection[Any], schema: str) -> tuple[IndexFacts, ...]:
    """Every index on the tables of ``schema``, from ``pg_catalog.pg_index``."""
    return index_facts(conn.execute(_INDEXES_SQL, (schema,)).fetchall())


def index_facts(rows: Iterable[Any]) -> tuple[IndexFacts, ...]:
    """The indexes described by the rows of ``_INDEXES_SQL`` (one row per key)."""
    found: dict[tuple[str, str], IndexFacts] = {}
    for table, name, method, valid, partial, column, expression, opclass, unique in rows:
        key = IndexKey(column, str(expression), str(opclass or ""))
        entry = found.get((table, name))
        keys = (*entry.keys, key) if entry is not None else (key,)
        found[(table, name)] = IndexFacts(
            table, name, method, keys, bool(valid), bool(partial), bool(unique)
        )
    return tuple(found.values())


def read_extensions(conn: psycopg.Connection[Any]) -> frozenset[str]:
    """The names of the extensions installed in the database."""
    return frozenset(str(row[0]) for row in conn.execute(_EXTENSIONS_SQL))


def read_available_extensions(conn: psycopg.Connection[Any]) -> frozenset[str]:
    """The names of the extensions the server could install (installed or not)."""
    return frozenset(str(row[0]) for row in conn.execute(_AVAILABLE_EXTENSIONS_SQL))


def role_problems(role: RoleFacts | None, writable: Collection[str]) -> list[str]:
    """Why ``role`` is not a least-privilege reader: empty when it is one. A role the catalog
    does not show cannot be vouched for, so it is a problem too."""
    if role is None:
        return ["the connected role is not visible in pg_catalog.pg_roles"]
    problems = []
    if role.superuser:
        problems.append("is a superuser")
    if role.bypass_rls:
        problems.append("has BYPASSRLS")
    if role.powers:
        problems.append("belongs to, or can SET ROLE to, " + ", ".join(role.powers))
    if writable:
        problems.append("may INSERT, UPDATE or DELETE on " + ", ".join(sorted(writable)))
    return problems


def check_role(conn: psycopg.Connection[Any], writable: Collection[str], allow: bool) -> None:
    """See :func:`check_role_steps`."""
    drive(check_role_steps(writable, allow), functools.partial(fetch_all, conn))


def check_role_steps(writable: Collection[str], allow: bool) -> Steps[Statement, None]:
    """Refuse, for a read-only backend, a role that is more than a reader: a superuser, a
    ``BYPASSRLS`` role, one that can become either or a :data:`POWERFUL_ROLES` member, one that
    can write an allowed table, or one the catalog does not show. ``allow`` accepts it with one
    warning."""
    role = yield from read_role_steps()
    problems = role_problems(role, writable)
    if not problems:
        return
    user = role.name if role is not None else "?"
    if not allow:
        # The remedy before the list: the list of roles can be long, and a message cut to fit
        # an envelope must still say what to do.
        raise ConfigurationError(
            f"postgres role {user!r} may do more than read: connect the read-only facade as a "
            "least-privilege role that may only SELECT (see docs/backends/postgres.md), or pass "
            "allow_privileged=True to accept the risk; the role " + "; ".join(problems)
        )
    log.warning("postgres.privileged_role", role=user, problems=problems)
