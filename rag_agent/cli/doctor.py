"""``rag-agent doctor``: the connected role's privileges and the indexes the generated SQL needs,
and, on PostgreSQL, the extensions and indexes each search leg needs
(:mod:`rag_agent.ops.doctor_search`).

The knowledge (which columns, which operators, which index) is :mod:`rag_agent.ops.doctor`; this
module reads the facts for the chosen backend and prints the report.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, TextIO

from persistence import BUSINESS_TABLES, create_read_only_facade, is_identifier
from persistence.schema import TABLE_COLUMNS
from rag_agent.cli import connect as connection  # backend_options, looked up at each call
from rag_agent.cli._common import EXIT_OK, EXIT_QUERY_ERROR
from rag_agent.cli.render import _inert, wants_json
from rag_agent.ops.doctor import (
    Report,
    format_report,
    memory_report,
    postgres_report,
    supabase_report,
)
from rag_agent.ops.doctor_search import SearchAdvice, format_search, search_advice
from rag_agent.settings import RAGSettings

if TYPE_CHECKING:  # the facts come from the postgres backend, which needs psycopg
    from persistence.backends.postgres import DatabaseFacts

SCHEMA = "public"


def _postgres(args: argparse.Namespace, settings: RAGSettings) -> tuple[Report, SearchAdvice]:
    options = connection.backend_options(args, settings)
    report, advice, _ = postgres_reports(
        options["dsn"], statement_timeout_ms=options.get("statement_timeout_ms") or 5000
    )
    return report, advice


def postgres_reports(
    dsn: str, *, statement_timeout_ms: int = 5000
) -> tuple[Report, SearchAdvice, DatabaseFacts]:
    """The doctor's report and search advice for the database of ``dsn``, with the facts read
    (``setup`` creates the indexes the report finds missing)."""
    from persistence.backends.postgres import inspect_database

    facts = inspect_database(dsn, schema=SCHEMA, statement_timeout_ms=statement_timeout_ms)
    tables = {
        table: {
            # The doctor classifies by catalog category: "S" (string) is what text kinds are.
            column: (ctype.name, "S" if ctype.is_text else "")
            for column, ctype in facts.tables[table].types.items()
            if is_identifier(column)  # the facade can filter on no other column
        }
        for table in sorted(BUSINESS_TABLES)
        if table in facts.tables
    }
    _, host, port, dbname, schema = facts.target
    where = f"database {dbname} on {host or 'the local socket'}:{port}, schema {schema}"
    absent = sorted(BUSINESS_TABLES - set(tables))
    if absent:
        where += "; not found or not readable: " + ", ".join(absent)
    report = postgres_report(
        schema=SCHEMA,
        tables=tables,
        indexes=facts.indexes,
        extensions=facts.extensions,
        role=facts.role,
        writable=facts.writable,
        where=where,
    )
    text_columns = {
        table: [column for column, (_, category) in columns.items() if category == "S"]
        for table, columns in tables.items()
    }
    advice = search_advice(
        schema=SCHEMA,
        tables=text_columns,
        indexes=facts.indexes,
        extensions=facts.extensions,
        available=facts.available,
        spelling=facts.spelling,
    )
    return report, advice, facts


def _supabase(args: argparse.Namespace, settings: RAGSettings) -> Report:
    options = connection.backend_options(args, settings)
    # One attempt per table: an unreachable project still gets the advice, without waiting.
    with create_read_only_facade("supabase", settings=settings, retries=0, **options) as facade:
        # The columns of a readable row, else the reference schema's (an empty table, RLS,
        # no answer).
        tables = {
            table: facade.columns(table) or TABLE_COLUMNS.get(table, ())
            for table in sorted(BUSINESS_TABLES)
        }
    return supabase_report(SCHEMA, tables)


def cmd_doctor(args: argparse.Namespace, out: TextIO, err: TextIO, *, settings: RAGSettings) -> int:
    """Print the doctor's report; exit 1 when an index is missing or the role can write or
    bypass row-level security, else 0."""
    advice: SearchAdvice | None = None
    if args.backend == "postgres":
        report, advice = _postgres(args, settings)
    elif args.backend == "supabase":
        report = _supabase(args, settings)
    else:
        report = memory_report()
    if wants_json(args, out):
        data = report.as_json()
        if advice is not None:
            data["search"] = advice.as_json()
        out.write(json.dumps(data, ensure_ascii=False) + "\n")
    else:
        # Names come from the catalog: shown inert, like row text.
        text = format_report(report)
        if advice is not None:  # advice only: a missing search index does not fail the check
            text += "\n\n" + format_search(advice)
        out.write(_inert(text) + "\n")
    return EXIT_OK if report.ok else EXIT_QUERY_ERROR
