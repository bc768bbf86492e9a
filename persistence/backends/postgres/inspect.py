"""What ``rag-agent doctor`` reads of a PostgreSQL database (:func:`inspect_database`), and
which database a DSN names (:func:`data_target`), without any secret."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import NamedTuple

import psycopg
from psycopg.conninfo import conninfo_to_dict

from persistence.backends.postgres.catalog import (
    Catalog,
    IndexFacts,
    RoleFacts,
    Table,
    read_available_extensions,
    read_extensions,
    read_indexes,
    read_role,
)
from persistence.backends.postgres.errors import translate
from persistence.backends.postgres.pool import DEFAULT_STATEMENT_TIMEOUT_MS
from persistence.backends.postgres.words import SpellingFacts, read_spelling_facts

__all__ = ["DatabaseFacts", "data_target", "inspect_database"]


def data_target(dsn: str, schema: str) -> tuple[str, str, str, str, str]:
    """``("postgres", host, port, dbname, schema)`` of ``dsn``, with libpq's defaults filled in
    (port 5432, the user's name as database); no secret. Two DSNs name the same target only
    when they spell the host the same way (``localhost`` is not ``127.0.0.1``)."""
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:  # unparseable: connecting will say so
        parts = {}
    host, port = str(parts.get("host") or ""), str(parts.get("port") or "5432")
    dbname = str(parts.get("dbname") or parts.get("user") or "")
    return ("postgres", host, port, dbname, schema)


class DatabaseFacts(NamedTuple):
    """What :func:`inspect_database` read: the target, the connected role, the readable tables
    with their column types, the tables the role may write, the indexes, the extensions."""

    target: tuple[str, str, str, str, str]
    role: RoleFacts | None
    tables: Mapping[str, Table]
    writable: frozenset[str]
    indexes: tuple[IndexFacts, ...]
    extensions: frozenset[str]
    #: The extensions the server could install (``pg_available_extensions``).
    available: frozenset[str] = frozenset()
    #: Tables under row-level security and tables with a readable words table.
    spelling: SpellingFacts = SpellingFacts()


def inspect_database(
    dsn: str,
    *,
    schema: str = "public",
    connect_timeout: float = 5.0,
    statement_timeout_ms: int = DEFAULT_STATEMENT_TIMEOUT_MS,
) -> DatabaseFacts:
    """Read the catalog facts ``rag-agent doctor`` reports, over one short ``READ ONLY``
    connection: nothing is written, and a privileged role is described rather than refused."""
    try:
        with psycopg.connect(dsn, connect_timeout=max(1, round(connect_timeout))) as conn:
            conn.read_only = True
            conn.execute(
                b"SELECT pg_catalog.set_config('statement_timeout', %s, true)",
                (str(statement_timeout_ms),),
            )
            catalog = Catalog(schema, time.monotonic)
            catalog.load(conn)
            tables = {name: entry for name in catalog.names() if (entry := catalog.get(name))}
            return DatabaseFacts(
                target=data_target(dsn, schema),
                role=read_role(conn),
                tables=tables,
                writable=catalog.writable,
                indexes=read_indexes(conn, schema),
                extensions=read_extensions(conn),
                available=read_available_extensions(conn),
                spelling=read_spelling_facts(conn, schema),
            )
    except psycopg.Error as exc:
        raise translate(exc, "inspect") from exc
