"""What the PostgreSQL backend knows of the database: the catalog of readable tables and their
column types (``pg_type.typname`` and ``typcategory``, read by
:func:`persistence.types.column_type`), and the start-up check of the connected role's privileges.

The catalog is a snapshot replaced whole on reload, never mutated, so a concurrent reader sees
the old one or the new one. A table missing from it may be looked for again, at most once every
few seconds (:meth:`Catalog.may_reload`), so a table created after start-up is found.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from collections.abc import Set as AbstractSet
from types import MappingProxyType
from typing import Any, NamedTuple

import psycopg

from persistence._logs import get_logger
from persistence.errors import ColumnNotAllowedError, ConfigurationError
from persistence.types import ColumnType, column_type

__all__ = ["Catalog", "Table", "check_role"]

log = get_logger("persistence.postgres")

_CATALOG_SQL = b"""
SELECT c.relname, a.attname, t.typname, t.typcategory,
       has_table_privilege(c.oid, 'INSERT, UPDATE, DELETE') AS writable
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid
JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
WHERE n.nspname = %s AND c.relkind IN ('r', 'v', 'm', 'p', 'f')
  AND a.attnum > 0 AND NOT a.attisdropped
  AND has_column_privilege(c.oid, a.attnum, 'SELECT')
ORDER BY c.relname, a.attnum
"""
_ROLE_SQL = (
    b"SELECT current_user, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user"
)
_RELOAD_SECONDS = 5.0


class Table(NamedTuple):
    """One table of the catalog: its column types, names in table order, and name set."""

    types: Mapping[str, ColumnType]
    names: tuple[str, ...]
    column_set: frozenset[str]

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


class Catalog:
    """The readable tables of one schema, loaded over a connection the caller lends."""

    def __init__(self, schema: str, clock: Callable[[], float]) -> None:
        self._schema = schema
        self._clock = clock
        self._snapshot = _Snapshot({}, frozenset(), float("-inf"))

    def load(self, conn: psycopg.Connection[Any]) -> None:
        """Read the schema's tables, columns and the role's write privileges afresh."""
        tables: dict[str, dict[str, ColumnType]] = {}
        writable: set[str] = set()
        for table, column, type_name, category, can_write in conn.execute(
            _CATALOG_SQL, (self._schema,)
        ):
            tables.setdefault(table, {})[column] = column_type(type_name, category=category)
            if can_write:
                writable.add(table)
        self._snapshot = _Snapshot(
            {
                table: Table(MappingProxyType(columns), tuple(columns), frozenset(columns))
                for table, columns in tables.items()
            },
            frozenset(writable),
            self._clock(),
        )

    def get(self, table: str) -> Table | None:
        """``table``'s entry, or ``None`` when it is missing or not readable."""
        return self._snapshot.tables.get(table)

    def may_reload(self) -> bool:
        """True when the last load is old enough to look for a missing table again."""
        return self._clock() - self._snapshot.loaded_at >= _RELOAD_SECONDS

    @property
    def writable(self) -> frozenset[str]:
        """Tables the connected role may insert into, update or delete from."""
        return self._snapshot.writable


def check_role(conn: psycopg.Connection[Any], writable: Collection[str], allow: bool) -> None:
    """Refuse a superuser or ``BYPASSRLS`` role for a read-only backend unless ``allow``; warn
    about an allowed one, and about ``writable`` tables (the role should only SELECT)."""
    role = conn.execute(_ROLE_SQL).fetchone()
    if role is None:
        return
    user, superuser, bypass_rls = str(role[0]), bool(role[1]), bool(role[2])
    if superuser or bypass_rls:
        what = "a superuser" if superuser else "a BYPASSRLS role"
        if not allow:
            raise ConfigurationError(
                f"postgres role {user!r} is {what}: connect the read-only facade as a "
                "least-privilege role (see docs/backends/postgres.md), or pass "
                "allow_privileged=True to accept the risk"
            )
        log.warning("postgres.privileged_role", role=user, privilege=what)
    if writable:
        log.warning(
            "postgres.role_can_write",
            role=user,
            tables=sorted(writable),
            hint="grant the read-only role SELECT only",
        )
