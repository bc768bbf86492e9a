"""The Supabase backend's writes (``PersistenceAgent`` only): inserts, upserts grouped by their
columns, deletes (chunked by id after an exact re-check)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from persistence.backends.supabase.postgrest.client import json_body, json_rows
from persistence.backends.supabase.postgrest.encoding import filter_params, needs_client_check
from persistence.backends.supabase.reads import Params, Row, _SupabaseReads
from persistence.query import Filter, Op
from persistence.read_only import refuse_write

# Ids per DELETE when rows were selected on the client; keeps URLs well under gateway limits.
_DELETE_CHUNK = 200


class _SupabaseWrites(_SupabaseReads):
    """The writes of the Supabase backend; refused when it was built read-only."""

    _read_only: bool

    # --- writes (PersistenceAgent only) ------------------------------------------------------

    def insert(self, table: str, rows: Sequence[Mapping[str, Any]]) -> list[Row]:
        if not rows:
            return []
        columns = list(dict.fromkeys(k for row in rows for k in row))
        return self._post(
            table,
            rows,
            [("columns", ",".join(columns))],
            "return=representation,missing=default",
            "insert",
        )

    def upsert(
        self, table: str, rows: Sequence[Mapping[str, Any]], on_conflict: str = "id"
    ) -> list[Row]:
        # PostgREST updates every column named in ``columns`` on conflict, so rows naming
        # different columns go in separate requests: no row gets another row's columns reset.
        groups: dict[tuple[str, ...], list[Mapping[str, Any]]] = {}
        for row in rows:
            groups.setdefault(tuple(row), []).append(row)
        stored: list[Row] = []
        for columns, group in groups.items():
            stored.extend(
                self._post(
                    table,
                    group,
                    [("on_conflict", on_conflict), ("columns", ",".join(columns))],
                    "resolution=merge-duplicates,return=representation",
                    "upsert",
                )
            )
        return stored

    def delete(self, table: str, filters: Sequence[Filter]) -> int:
        self._check_writable(table, "delete")
        checks = [f for f in filters if needs_client_check(f)]
        base = self._filter_params(table, filters, "delete")
        if not checks:
            return self._delete(table, base)
        rows = self._client.drive(self._checked_rows(table, base, checks, "delete", ("id",)))
        ids = [row["id"] for row in rows]
        deleted = 0
        for start in range(0, len(ids), _DELETE_CHUNK):
            chunk = Filter("id", Op.IN, ids[start : start + _DELETE_CHUNK])
            deleted += self._delete(table, [filter_params(chunk)])
        return deleted

    def _check_writable(self, table: str, operation: str) -> None:
        # The read-only facade never calls a write; this keeps the backend itself honest too.
        if self._read_only:
            refuse_write(operation, table, "this Supabase backend")

    def _delete(self, table: str, params: Params) -> int:
        """One DELETE request; :meth:`delete` has checked the backend may write."""
        response = self._client.request(
            "DELETE",
            table,
            "delete",
            [*params, ("select", "id")],
            headers={"Prefer": "return=representation"},
            columns=[k for k, _ in params],
        )
        return len(json_rows(response, table, "delete"))

    def _post(
        self,
        table: str,
        rows: Sequence[Mapping[str, Any]],
        params: Params,
        prefer: str,
        operation: str,
    ) -> list[Row]:
        self._check_writable(table, operation)
        response = self._client.request(
            "POST",
            table,
            operation,
            params,
            headers={"Prefer": prefer, "Content-Type": "application/json"},
            content=json_body(rows, table, operation),
            columns={k for row in rows for k in row},
        )
        return json_rows(response, table, operation)
