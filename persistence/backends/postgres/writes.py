"""The PostgreSQL backend's writes (``PersistenceAgent`` only): explicit ``READ WRITE``
transactions with a statement timeout, and the id sequence moved past written ids."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from persistence.backends.postgres import sql as _pg_sql
from persistence.backends.postgres.session import _PostgresSession
from persistence.query import Filter
from persistence.read_only import refuse_write
from persistence.values.types import ColumnKind

Row = dict[str, Any]

# Moves an identity/serial sequence past explicitly written ids, never backwards, so that a later
# insert without an id does not collide (the memory backend behaves the same way).
_BUMP_SEQUENCE_SQL = b"""
SELECT setval(s.seq::regclass, s.m) FROM (
  SELECT pg_get_serial_sequence(%s, 'id') AS seq, (SELECT max(id) FROM {table}) AS m
) AS s
WHERE s.seq IS NOT NULL AND s.m >= 1
  AND s.m > COALESCE(pg_sequence_last_value(s.seq::regclass), 0)
"""


class _PostgresWrites(_PostgresSession):
    """The writes of the PostgreSQL backend; refused when it was built read-only."""

    # --- writes (PersistenceAgent only) ----------------------------------------------------------

    def _check_writable(self, table: str, operation: str) -> None:
        if self._read_only:
            refuse_write(operation, table, "this postgres backend")

    def _write(
        self,
        table: str,
        rows: Sequence[Mapping[str, Any]],
        operation: str,
        build: Callable[[Row], sql.Composed],
        keys: Collection[str] = (),
    ) -> list[Row]:
        """Run ``build``'s statement for each row in one transaction; ``keys`` must be columns."""
        self._check_writable(table, operation)
        checked = [{k: v for k, v in r.items() if not (k == "id" and v is None)} for r in rows]
        entry = self._table(table).require(table, keys, operation)
        for row in checked:
            entry.require(table, list(row), operation)
        # Only an integer key has a sequence to move (max() of a uuid does not even exist).
        id_type = entry.types.get("id")
        bump = (
            id_type is not None
            and id_type.kind is ColumnKind.INTEGER
            and any("id" in row for row in checked)
        )
        set_timeout = self._connections.set_timeout

        def work(conn: psycopg.Connection[Any]) -> list[Row]:
            stored: list[Row] = []
            with conn.transaction(), conn.cursor(row_factory=dict_row) as cursor:
                cursor.execute(set_timeout)
                for row in checked:
                    cursor.execute(build(row), list(row.values()))
                    stored.extend(cursor.fetchall())
                if bump:
                    cursor.execute(
                        sql.SQL(_BUMP_SEQUENCE_SQL.decode()).format(
                            table=sql.Identifier(self._schema, table)
                        ),
                        (sql.Identifier(self._schema, table).as_string(None),),
                    )
            return stored

        result: list[Row] = self._connections.run(work, operation, read=False)
        return result

    def insert(self, table: str, rows: Sequence[Mapping[str, Any]]) -> list[Row]:
        return self._write(
            table, rows, "insert", lambda row: _pg_sql.build_insert(table, self._schema, row)
        )

    def upsert(
        self, table: str, rows: Sequence[Mapping[str, Any]], on_conflict: str = "id"
    ) -> list[Row]:
        return self._write(
            table,
            rows,
            "upsert",
            lambda row: _pg_sql.build_upsert(table, self._schema, row, on_conflict),
            (on_conflict,),
        )

    def delete(self, table: str, filters: Sequence[Filter]) -> int:
        self._check_writable(table, "delete")
        _, filters = self._checked_filters(table, filters, "delete")
        statement = _pg_sql.build_delete(table, self._schema, filters)
        params = _pg_sql.filter_params(filters)
        set_timeout = self._connections.set_timeout

        def work(conn: psycopg.Connection[Any]) -> int:
            with conn.transaction(), conn.cursor() as cursor:
                cursor.execute(set_timeout)
                cursor.execute(statement, params)
                return cursor.rowcount

        result: int = self._connections.run(work, "delete", read=False)
        return result
