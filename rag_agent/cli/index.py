"""``rag-agent index TABLE --columns a,b --dsn WRITER_DSN``: store a table's row vectors.

The admin step of the semantic leg on PostgreSQL (:mod:`persistence.admin.index_build`): it
connects as the writer role named by ``--dsn`` (never the read-only facade's), is idempotent and
incremental, builds the HNSW index, and prints its progress on stderr and its report on stdout,
with the seconds of each phase (rows read, embedding, rows written, HNSW, words, other) and the
rows per second.

``--embeddings``: ``default`` (the offline default model, ``rag_agent.pipeline.embeddings``), or
``module:attribute`` naming an ``Embeddings`` object or a callable returning one.
"""

from __future__ import annotations

import argparse
import importlib
import json
from collections.abc import Mapping
from typing import Any, TextIO

from rag_agent.cli._common import EXIT_OK, UsageError, column_list, isatty

__all__ = ["add_index_parser", "cmd_index", "load_embeddings", "phase_line"]


def add_index_parser(commands: Any) -> None:
    """Register ``index`` on the CLI's subparsers."""
    index = commands.add_parser(
        "index",
        help="store a PostgreSQL table's row vectors for semantic search (writer role)",
        description="Embed the text of --columns for every row of TABLE into its side table "
        "TABLE_embeddings and build its HNSW index. Idempotent and incremental: only new or "
        "changed rows are embedded. Connect as a writer role (--dsn), never the reader; the "
        "reader needs SELECT on the side table (--grant-to). Also rewrites TABLE_words, the "
        "vocabulary of spelling correction (needs pg_trgm). Without pgvector it builds the "
        "words table alone and says how to get pgvector.",
    )
    index.add_argument("table", help="the table to index")
    index.add_argument("--columns", required=True, help="text columns to embed, e.g. subject,body")
    index.add_argument(
        "--keyword-columns",
        help="text columns the stored keyword documents hold (default: --columns); name the "
        "search's own text columns, in table order, when they differ from the embedded ones",
    )
    index.add_argument("--dsn", required=True, help="the writer role's PostgreSQL DSN")
    index.add_argument("--schema", default="public", help="the table's schema (default: public)")
    index.add_argument(
        "--embeddings",
        default="default",
        help="'default' (the offline model) or module:attribute (default: %(default)s)",
    )
    index.add_argument("--batch-size", type=int, default=256, help="rows per batch (256)")
    index.add_argument(
        "--grant-to", action="append", default=[], help="reader role to GRANT SELECT to"
    )
    index.add_argument("--json", action="store_true", help="print the report as JSON")


def load_embeddings(spec: str) -> Any:
    """The embeddings ``spec`` names (see the module docstring)."""
    if spec == "default":
        try:
            module = importlib.import_module("rag_agent.pipeline.embeddings")
        except ImportError:
            module = None
        made = module.default_embeddings() if module is not None else None
        if made is None:
            raise UsageError(
                "no default embeddings available: install the 'semantic' extra or pass "
                "--embeddings module:attribute"
            )
        return made
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise UsageError(f"--embeddings must be 'default' or module:attribute, not {spec!r}")
    try:
        target = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"--embeddings {spec!r}: {exc}") from None
    if isinstance(target, type) or (
        callable(target) and not callable(getattr(target, "embed_query", None))
    ):
        target = target()  # a class or a factory
    if callable(getattr(target, "embed_query", None)):
        return target
    raise UsageError(f"--embeddings {spec!r} is neither Embeddings nor a callable")


def phase_line(phases: Mapping[str, float], rows_per_second: float) -> str:
    """``embedding 41.2 s · rows written 9.8 s · … · 1,520 rows/s``: where a run's time went."""
    parts = [f"{name} {seconds:.1f} s" for name, seconds in phases.items()]
    return " · ".join([*parts, f"{rows_per_second:,.0f} rows/s"])


def cmd_index(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from persistence.admin.index_build import index_table
    from rag_agent.cli.connect import check_dsn

    # Error lines name the target, its password masked; a malformed DSN is refused before
    # any connection, as every other command does.
    args.backend = "postgres"
    columns = column_list(args.columns)
    keyword_columns = (
        None
        if args.keyword_columns is None
        else column_list(args.keyword_columns, "--keyword-columns")
    )
    if args.batch_size <= 0:
        raise UsageError("--batch-size must be at least 1")
    check_dsn(args.dsn)
    try:
        embeddings = load_embeddings(args.embeddings)
    except UsageError as exc:
        if args.embeddings != "default":
            raise
        # The words table needs no embeddings: build it, and say why there are no vectors.
        err.write(f"rag-agent: note: {exc}; building the words table only\n")
        embeddings = None
    live = isatty(err)

    def progress(done: int, total: int, embedded: int) -> None:
        line = f"index {args.table}: {done}/{total} rows read, {embedded} embedded"
        err.write(f"\r{line}" if live else f"{line}\n")
        err.flush()

    report = index_table(
        args.dsn,
        args.table,
        columns,
        embeddings,
        schema=args.schema,
        batch_size=args.batch_size,
        grant_to=args.grant_to,
        progress=progress,
        keyword_columns=keyword_columns,
    )
    if live:
        err.write("\n")
    fields = {
        "table": report.table,
        "side_table": report.side_table,
        "rows": report.rows,
        "embedded": report.embedded,
        "unchanged": report.unchanged,
        "removed": report.removed,
        "model_id": report.model_id,
        "words": report.words,
        "dimension": report.dimension,
        "seconds": round(report.seconds, 3),
        "vectors": report.vectors,
        "rows_per_s": round(report.rows_per_second, 1),
        "phases": {name: round(seconds, 3) for name, seconds in report.phases.items()},
    }
    if report.note:
        err.write(f"rag-agent: note: {report.note}\n")
    if args.json or not isatty(out):
        out.write(json.dumps(fields) + "\n")
    else:
        fields["phases"] = phase_line(report.phases, report.rows_per_second)
        del fields["rows_per_s"]
        out.write("\n".join(f"{k}: {v}" for k, v in fields.items()) + "\n")
    return EXIT_OK
