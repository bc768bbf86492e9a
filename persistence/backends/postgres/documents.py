"""The documents table of a PostgreSQL table: each row's keyword document, stored, so the keyword
leg ranks its candidates without computing their ``tsvector`` again (written by ``rag-agent
index``, read by the search).

The documents table of ``T`` is ``T_documents`` in ``T``'s schema::

    CREATE TABLE T_documents (row_id <T.id's type> PRIMARY KEY, source text NOT NULL,
                              document tsvector NOT NULL);
    COMMENT ON TABLE T_documents IS '{"columns": [...], "config": "english", "format": 1}';

``document`` is the keyword leg's document of the row (:func:`~persistence.backends.postgres.
search_sql.document`, the same expression), ``source`` the ``md5`` of the text it was made of.
The search uses a stored document only where ``source`` still equals the ``md5`` of the row's
text now (hashing 150 characters costs a twentieth of parsing them into a ``tsvector``), and
computes it otherwise, so a row changed since the last run ranks by its new text, and the order
is the same with or without the table. Candidates still come from the table itself (its GIN
index): a row added since the last run is found too.

Each run brings the table up to date in one statement per step, on the server: rows whose text
changed or that are new are (re)written, rows gone are removed; another column list or
configuration rewrites it whole.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql

from persistence.backends.postgres.search_sql import document, document_text

__all__ = ["DOCUMENTS_TABLE_SUFFIX", "documents_table", "usable", "write_documents"]

#: The documents table of ``T`` is ``T_documents``, in ``T``'s schema.
DOCUMENTS_TABLE_SUFFIX = "_documents"
_FORMAT = 1


def documents_table(table: str) -> str:
    """The documents table of ``table``."""
    return f"{table}{DOCUMENTS_TABLE_SUFFIX}"


def describe(columns: Sequence[str], config: str) -> str:
    """The table's description: the columns its documents join, in order, and the configuration
    that parsed them."""
    return json.dumps({"columns": list(columns), "config": config, "format": _FORMAT})


def usable(description: str | None, columns: Sequence[str], config: str) -> bool:
    """Whether a documents table described by ``description`` holds the documents of a search
    over ``columns`` (in that order) with ``config``."""
    if description is None:
        return False
    try:
        meta = json.loads(description)
    except ValueError:
        return False
    return (
        isinstance(meta, dict)
        and meta.get("format") == _FORMAT
        and meta.get("columns") == list(columns)
        and meta.get("config") == config
    )


def write_documents(
    conn: psycopg.Connection[Any],
    schema: str,
    table: str,
    id_type: str,
    columns: Sequence[str],
    config: str,
    grant_to: Sequence[str],
) -> int:
    """Bring ``table``'s documents table up to date (creating it); the rows (re)written."""
    relation = sql.Identifier(schema, documents_table(table))
    base = sql.Identifier(schema, table)
    text = document_text(columns, "t")
    meta = describe(columns, config)
    with conn.transaction():
        found = conn.execute(
            b"SELECT pg_catalog.obj_description(pg_catalog.to_regclass(%s), 'pg_class')",
            [relation.as_string(None)],
        ).fetchone()
        if found is not None and found[0] is not None and found[0] != meta:
            conn.execute(sql.SQL("DROP TABLE {}").format(relation))
        # id_type comes from format_type() of the catalog, not from a caller.
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (row_id {} PRIMARY KEY, source text NOT NULL, "
                "document tsvector NOT NULL)"
            ).format(relation, sql.SQL(id_type))
        )
        conn.execute(
            sql.SQL(
                "DELETE FROM {docs} AS d WHERE NOT EXISTS "
                "(SELECT 1 FROM {base} AS t WHERE t.id = d.row_id)"
            ).format(docs=relation, base=base)
        )
        written = conn.execute(
            sql.SQL(
                "INSERT INTO {docs} (row_id, source, document) "
                "SELECT t.id, pg_catalog.md5({text}), {doc} FROM {base} AS t "
                "LEFT JOIN {docs} AS d ON d.row_id = t.id "
                "WHERE d.row_id IS NULL OR d.source <> pg_catalog.md5({text}) "
                "ON CONFLICT (row_id) DO UPDATE SET source = EXCLUDED.source, "
                "document = EXCLUDED.document"
            ).format(docs=relation, base=base, text=text, doc=document(columns, config, "t"))
        ).rowcount
        conn.execute(sql.SQL("COMMENT ON TABLE {} IS {}").format(relation, sql.Literal(meta)))
        for role in grant_to:
            conn.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(relation, sql.Identifier(role)))
    conn.execute(sql.SQL("ANALYZE {}").format(relation))
    return written
