"""``rag-agent search-function TABLE --columns a,b [--filter col:type ...]``: print the Supabase
ranking function's SQL for a table.

The database owner's step of search on Supabase (docs/search-supabase.md): it prints the
``create function public.search_TABLE`` script, with a typed, indexable predicate per
``--filter`` column, for the owner to review and run (SQL editor, ``psql``). It connects to
nothing and runs nothing.
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from rag_agent.cli._common import EXIT_OK, UsageError, column_list

__all__ = ["add_search_function_parser", "cmd_search_function"]


def add_search_function_parser(commands: Any) -> None:
    """Register ``search-function`` on the CLI's subparsers."""
    parser = commands.add_parser(
        "search-function",
        help="print the SQL of a Supabase table's ranking function (runs nothing)",
        description="Print the read-only ranking function search_TABLE that facade.search calls "
        "on Supabase: the legs, the feedback step and the fusion the library uses, filtered by "
        "equality on each --filter column through a typed predicate its index serves. Review it "
        "and run it as the database owner; this command connects to nothing.",
    )
    parser.add_argument("table", help="the table to rank")
    parser.add_argument(
        "--columns", required=True, help="text columns to rank by, e.g. subject,body"
    )
    parser.add_argument(
        "--filter",
        action="append",
        default=[],
        metavar="COLUMN:TYPE",
        help="a column searches may filter by and its SQL type, e.g. client_id:uuid (repeatable)",
    )
    parser.add_argument("--id-type", default="uuid", help="the id column's type (default: uuid)")
    parser.add_argument("--schema", default="public", help="the table's schema (default: public)")
    parser.add_argument(
        "--vector-schema",
        default="extensions",
        help="the schema holding pgvector (default: extensions, as on Supabase)",
    )
    parser.add_argument(
        "--config", default="english", help="the text-search configuration (default: english)"
    )
    parser.add_argument(
        "--grant-to",
        action="append",
        default=None,
        metavar="ROLE",
        help="role allowed to execute it (repeatable; default: anon and authenticated)",
    )


def cmd_search_function(args: argparse.Namespace, out: TextIO) -> int:
    from persistence.admin.supabase_search_sql import search_function_sql

    columns = column_list(args.columns)
    filters: dict[str, str] = {}
    for spec in args.filter:
        column, colon, kind = spec.partition(":")
        if not colon or not column.strip() or not kind.strip():
            raise UsageError(f"--filter must be COLUMN:TYPE, e.g. client_id:uuid, not {spec!r}")
        filters[column.strip()] = kind.strip()
    out.write(
        search_function_sql(
            args.table,
            columns,
            filters=filters,
            id_type=args.id_type,
            schema=args.schema,
            vector_schema=args.vector_schema,
            config=args.config,
            roles=("anon", "authenticated") if args.grant_to is None else args.grant_to,
        )
    )
    return EXIT_OK
