"""The executed plan of the PostgreSQL backend's read statement, for tests that assert what the
server did (which scans ran, how many rows each counted), not only what it answered."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg

from persistence import Query
from persistence.backends.postgres import sql as _pg_sql


def executed_nodes(
    dsn: str, query: Query, columns: tuple[str, ...], *, probe: bool
) -> list[dict[str, Any]]:
    """Every plan node of ``query``'s read statement (the probing form if ``probe``) that ran,
    by ``EXPLAIN (ANALYZE, FORMAT JSON)`` as the role of ``dsn``; a node's children follow it."""
    statement = _pg_sql.build_read(query, "public", columns, True, probe=probe).as_bytes(None)
    params = _pg_sql.read_params(query, probe=probe)
    with psycopg.connect(dsn) as conn:
        row = conn.execute(b"EXPLAIN (ANALYZE, FORMAT JSON) " + statement, params).fetchone()
    assert row is not None
    document = row[0] if not isinstance(row[0], str) else json.loads(row[0])

    def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
        yield plan
        for child in plan.get("Plans", ()):
            yield from nodes(child)

    return [node for node in nodes(document[0]["Plan"]) if node.get("Actual Loops", 0) > 0]
