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
configuration rewrites it whole, and so does another parse of the same configuration (its
``fingerprint``: a fixed sentence's document and the server's version, which move when the
configuration's dictionaries or stemmers change). A table of that name that this step did not
write is never touched: the run stops with a :class:`ConfigurationError` instead.

Its documents are close to the row's text, so it is granted only to a role that may read every
indexed column of ``T``, and never when ``T`` has row-level security: such a role searches by
documents computed from the rows it may see.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql

from persistence.backends.postgres.search_sql import document, document_text
from persistence.errors import ConfigurationError
from persistence.logs import get_logger

__all__ = ["DOCUMENTS_TABLE_SUFFIX", "documents_table", "usable", "write_documents"]

#: The documents table of ``T`` is ``T_documents``, in ``T``'s schema.
DOCUMENTS_TABLE_SUFFIX = "_documents"
_FORMAT = 1
#: Parsed at each run: its document changes when the configuration's parse does.
_FINGERPRINT_TEXT = "Running runners ran past the stopping points of their databases"
_FINGERPRINT = (
    b"SELECT pg_catalog.md5(pg_catalog.to_tsvector(%s::regconfig, %s)::text) || ':' || "
    b"pg_catalog.current_setting('server_version_num')"
)
log = get_logger("persistence.documents")


def documents_table(table: str) -> str:
    """The documents table of ``table``."""
    return f"{table}{DOCUMENTS_TABLE_SUFFIX}"


def describe(columns: Sequence[str], config: str, fingerprint: str) -> str:
    """The table's description: the columns its documents join, in order, the configuration
    that parsed them and that parse's fingerprint."""
    return json.dumps(
        {"columns": list(columns), "config": config, "fingerprint": fingerprint, "format": _FORMAT}
    )


def _parsed(description: str | None) -> dict[str, Any] | None:
    """The description of a documents table this module wrote, or ``None``."""
    try:
        meta = json.loads(description) if description is not None else None
    except ValueError:
        return None
    if not isinstance(meta, dict) or not isinstance(meta.get("format"), int):
        return None
    return meta


def usable(description: str | None, columns: Sequence[str], config: str) -> bool:
    """Whether a documents table described by ``description`` holds the documents of a search
    over ``columns`` (in that order) with ``config``."""
    meta = _parsed(description)
    return (
        meta is not None
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
    with conn.transaction():
        fingerprint = conn.execute(_FINGERPRINT, [config, _FINGERPRINT_TEXT]).fetchone()
        assert fingerprint is not None
        meta = describe(columns, config, str(fingerprint[0]))
        found = conn.execute(
            b"SELECT c.oid IS NOT NULL, pg_catalog.obj_description(c.oid, 'pg_class') "
            b"FROM (SELECT pg_catalog.to_regclass(%s) AS oid) AS c",
            [relation.as_string(None)],
        ).fetchone()
        assert found is not None
        exists, description = found
        if exists and _parsed(description) is None:
            raise ConfigurationError(
                f"{schema}.{documents_table(table)} exists and is not a documents table this "
                f"step wrote: rename or drop it to index {table!r} for keyword search"
            )
        if exists and description != meta:
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
            if _may_read_all(conn, schema, table, columns, role):
                grant = sql.SQL("GRANT SELECT ON {} TO {}")
                conn.execute(grant.format(relation, sql.Identifier(role)))
            else:
                log.warning(
                    "persistence.documents.not_granted",
                    table=table,
                    role=role,
                    reason="the role may not read every indexed column, or the table has "
                    "row-level security: it searches by documents computed from what it sees",
                )
    if written:
        conn.execute(sql.SQL("ANALYZE {}").format(relation))
    return written


def _may_read_all(
    conn: psycopg.Connection[Any], schema: str, table: str, columns: Sequence[str], role: str
) -> bool:
    """Whether ``role`` may read every row's ``columns`` of ``table``: SELECT on each column and
    no row-level security on the table (the documents hold every row's text)."""
    row = conn.execute(
        b"SELECT NOT c.relrowsecurity AND pg_catalog.bool_and("
        b"pg_catalog.has_column_privilege(%s, c.oid, col, 'SELECT')) "
        b"FROM pg_catalog.pg_class AS c, pg_catalog.unnest(%s::text[]) AS col "
        b"WHERE c.oid = pg_catalog.to_regclass(%s) GROUP BY c.relrowsecurity",
        [role, list(columns), sql.Identifier(schema, table).as_string(None)],
    ).fetchone()
    return bool(row and row[0])
