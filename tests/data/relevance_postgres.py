"""The relevance corpus in a scratch PostgreSQL database, for ``--backend postgres``.

``--dsn`` (or ``RELEVANCE_DSN``) names a server and a role that may create databases; the harness
creates ``relevance_<pid>`` and a login role of that name that may only SELECT, creates the
reference tables, copies the corpus in, and drops both when the process exits. On a server with
pgvector it builds the row vectors the way ``rag-agent index`` does (the side tables of
``inquiries`` and ``messages``, with the harness's embeddings), so the semantic leg is pgvector's;
without it the PostgreSQL backend re-ranks in process, and says so.
"""

from __future__ import annotations

import atexit
import os
from typing import Any

from persistence.schema import REFERENCE
from tests.data.search_corpus import Corpus

_TABLES = ("clients", "leads", "conversations", "messages", "inquiries")
#: The searched tables and the text columns their vectors embed (what the facade ranks by).
_SEARCHED = {"inquiries": ("subject", "body"), "messages": ("direction", "body")}


def postgres_facade(corpus: Corpus, embeddings: Any, dsn: str) -> Any:
    """A read-only facade over a new scratch database holding ``corpus``."""
    import psycopg
    from psycopg import sql

    from persistence import create_read_only_facade

    if not dsn:
        raise SystemExit(
            "--backend postgres needs --dsn (or RELEVANCE_DSN), e.g. postgresql://127.0.0.1/postgres"
        )
    name = f"relevance_{os.getpid()}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    atexit.register(_drop, dsn, name)
    scratch = psycopg.conninfo.make_conninfo(dsn, dbname=name)
    with psycopg.connect(scratch) as conn:
        # The extensions the keyword and semantic legs use, where the server has them (the
        # database owner's step; the library never creates an extension).
        available = {
            name
            for (name,) in conn.execute(
                "SELECT name FROM pg_catalog.pg_available_extensions"
                " WHERE name IN ('pg_trgm', 'vector')"
            )
        }
        for extension in sorted(available):
            conn.execute(
                sql.SQL("CREATE EXTENSION IF NOT EXISTS {}").format(sql.Identifier(extension))
            )
        for statement in REFERENCE.statements():
            conn.execute(statement.encode())
        for table in _TABLES:
            rows = corpus.rows[table]
            columns = list(rows[0])
            copy = sql.SQL("COPY {} ({}) FROM STDIN").format(
                sql.Identifier(table), sql.SQL(", ").join(map(sql.Identifier, columns))
            )
            with conn.cursor().copy(copy) as writer:
                for row in rows:
                    writer.write_row([row.get(c) for c in columns])
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER NOBYPASSRLS").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(sql.Identifier(name)))
        conn.execute(
            sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA public TO {}").format(
                sql.Identifier(name)
            )
        )
    if "vector" in available and embeddings is not None:
        from persistence.admin.index_build import index_table

        for table, columns in _SEARCHED.items():
            index_table(scratch, table, columns, embeddings, grant_to=[name])
    reader = psycopg.conninfo.make_conninfo(scratch, user=name)
    return create_read_only_facade("postgres", dsn=reader, embeddings=embeddings)


def _drop(dsn: str, name: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))
