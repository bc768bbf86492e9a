"""The ``rag-agent`` command line: ask, chat, tables, load, demo, tools.

Output contract:

- results go to **stdout**: a readable table on a terminal; the envelope as JSON with ``--json``
  or whenever stdout is not a terminal (one JSON document per line in ``chat`` and ``demo``);
- everything else (logs, errors, prompts) goes to **stderr**; logs at WARNING unless
  ``RAG_DEBUG=1``;
- exit codes: ``0`` success, ``1`` a query failed (the envelope carries ``error``), ``2`` usage or
  configuration error. An error is one line on stderr; the traceback only with ``RAG_DEBUG=1``.

With the memory backend (the default) the bundled sample dataset is loaded first, unless
``--empty``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from persistence import (
    GOVERNANCE_TABLES,
    AccessPolicy,
    Backend,
    ConfigurationError,
    MemoryStore,
    PersistenceAgent,
    PersistenceError,
    ReadOnlyPersistenceFacade,
    create_read_only_facade,
)
from persistence.schema import TABLE_DDL

__all__ = ["EXIT_OK", "EXIT_QUERY_ERROR", "EXIT_USAGE", "main"]

EXIT_OK = 0
EXIT_QUERY_ERROR = 1
EXIT_USAGE = 2

Envelope = dict[str, Any]
_BACKENDS = ("memory", "postgres", "supabase")
_TRUE = {"1", "true", "yes", "on"}
# Columns shown first on a terminal for the tables people ask about most; the rest follow.
_PREFERRED_COLUMNS = {
    "leads": ("id", "first_name", "last_name", "email", "company_name", "title", "status", "score"),
}
_MAX_CELL = 32
_MAX_TABLE_COLUMNS = 8


class UsageError(Exception):
    """A mistake in the command line or the configuration: exit code 2."""


class QueryFailed(Exception):
    """A command whose query failed after printing what it could: exit code 1."""


def _debug() -> bool:
    return os.environ.get("RAG_DEBUG", "").strip().lower() in _TRUE


# --------------------------------------------------------------------------- logging


@contextlib.contextmanager
def _logging_for_cli(stream: TextIO) -> Iterator[None]:
    """Configure logging for one CLI run, then put back what was there.

    ``main`` is also called in-process (tests, notebooks): it must not leave the host's logging
    pointed at a stream that only existed for one call.
    """
    import structlog

    saved_structlog = structlog.get_config()
    root = logging.getLogger()
    saved_root = (root.level, list(root.handlers))
    configure_logging(stream)
    try:
        yield
    finally:
        structlog.configure(**saved_structlog)
        for handler in list(root.handlers):
            root.removeHandler(handler)
        root.setLevel(saved_root[0])
        for handler in saved_root[1]:
            root.addHandler(handler)


# Events the CLI already reports in its own words: a failed run is the "query failed" line, and
# a missing LLM shows as `fallback: disabled` in the envelope. With RAG_DEBUG=1 they are logged.
_REPORTED_EVENTS = frozenset({"rag.error", "rag.llm.disabled"})


def _drop_reported_events(
    logger: Any, method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    import structlog

    if event_dict.get("event") in _REPORTED_EVENTS:
        raise structlog.DropEvent
    return event_dict


def configure_logging(stream: TextIO | None = None) -> None:
    """Send structlog and stdlib logs to stderr, at WARNING unless ``RAG_DEBUG=1``.

    Only the CLI configures logging: a library must leave that to its application.
    """
    import structlog

    debug = _debug()
    level = logging.DEBUG if debug else logging.WARNING
    target = stream if stream is not None else sys.stderr
    structlog.configure(
        processors=[
            *([] if debug else [_drop_reported_events]),
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.dev.ConsoleRenderer(colors=False),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=target),
        cache_logger_on_first_use=False,
    )
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)  # not closed: the caller may still own it
    handler = logging.StreamHandler(target)
    handler.setFormatter(logging.Formatter("%(asctime)s [%(levelname)s] %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(level)


# --------------------------------------------------------------------------- backends


@dataclass
class _Connection:
    """What a command reads through: a facade, and the agent over it when one was asked for."""

    facade: ReadOnlyPersistenceFacade
    agent: Any = None
    loaded: Mapping[str, int] | None = None


def _backend_options(args: argparse.Namespace) -> dict[str, Any]:
    kind = args.backend
    if kind == "postgres":
        dsn = args.dsn or os.environ.get("RAG_POSTGRES_DSN", "").strip()
        if not dsn:
            raise UsageError("the postgres backend needs --dsn or RAG_POSTGRES_DSN")
        options: dict[str, Any] = {"dsn": dsn}
        if getattr(args, "allow_privileged", False):
            options["allow_privileged"] = True
        return options
    if kind == "supabase":
        url = args.url or os.environ.get("SUPABASE_URL", "").strip()
        key = os.environ.get("SUPABASE_KEY", "").strip()
        if not url:
            raise UsageError("the supabase backend needs --url or SUPABASE_URL")
        if not key:
            # The key is read from the environment only: a command line shows in `ps`.
            raise UsageError("the supabase backend needs SUPABASE_KEY in the environment")
        return {"url": url, "key": key}
    if args.dsn or args.url:
        raise UsageError("--dsn and --url need --backend postgres or --backend supabase")
    return {}


@contextlib.contextmanager
def _connect(args: argparse.Namespace, *, agent: bool) -> Iterator[_Connection]:
    """A read-only facade for ``args`` (and a ``RAGAgent`` over it with ``agent=True``).

    The memory backend gets a private store with the sample data, unless ``--empty``.
    """
    from rag_agent.sample import load_sample

    options = _backend_options(args)
    loaded = None
    if args.backend == "memory":
        store = MemoryStore()
        if not getattr(args, "empty", False):
            loaded = load_sample(store)
        options["store"] = store
    if agent:
        # Imported here: the pipeline pulls in LangChain, which `tables` and `load` do not need.
        from rag_agent.factory import create_rag_agent

        rag = create_rag_agent(args.backend, **options)
        connection = _Connection(rag.facade, rag, loaded)
    else:
        connection = _Connection(create_read_only_facade(kind=args.backend, **options))
    try:
        yield connection
    finally:
        (connection.agent or connection.facade).close()


def _writable_backend(kind: str, options: Mapping[str, Any]) -> Backend:
    # Seeding is a deployment step: the governance tables are written below the access policy,
    # by the backend itself; every other table goes through a PersistenceAgent (see cmd_load).
    module = importlib.import_module(f"persistence.backends.{kind}")
    backend: Backend = module.create_backend(read_only=False, **options)
    return backend


def _create_postgres_tables(dsn: str) -> None:
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - the postgres extra is part of [all]
        raise UsageError(
            '--create-tables needs psycopg: pip install "readonly-rag[postgres]"'
        ) from exc
    # The DDL is a constant of persistence.schema; nothing a user typed reaches this statement.
    with psycopg.connect(dsn, autocommit=True) as conn:
        for ddl in TABLE_DDL.values():
            conn.execute(ddl.encode())


def _sync_postgres_identities(dsn: str, tables: Sequence[str]) -> None:
    import psycopg
    from psycopg import sql

    # Rows were loaded with explicit ids: move each identity past them so later inserts work.
    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in tables:
            conn.execute(
                sql.SQL(
                    "SELECT setval(pg_get_serial_sequence({name}, 'id'), "
                    "GREATEST((SELECT max(id) FROM {table}), 1))"
                ).format(name=sql.Literal(table), table=sql.Identifier(table))
            )


# --------------------------------------------------------------------------- the agent


def _run(agent: Any, text: str, args: argparse.Namespace, **overrides: Any) -> Envelope:
    options = {
        "table": args.table,
        "limit": args.limit,
        "offset": args.offset,
        "include_raw": args.include_raw,
    }
    options.update(overrides)
    envelope: Envelope = agent.run(text, return_json=True, **options)
    return envelope


# --------------------------------------------------------------------------- rendering


def _cell(value: Any, max_cell: int | None = _MAX_CELL) -> str:
    text = "" if value is None else str(value)
    text = " ".join(text.split())  # newlines and tabs would break the grid
    if max_cell is None or len(text) <= max_cell:
        return text
    return text[: max_cell - 1] + "…"


def _columns_for(table: str, records: Sequence[Mapping[str, Any]]) -> list[str]:
    seen: dict[str, None] = {}
    for record in records:
        seen.update(dict.fromkeys(k for k in record if k != "provenance"))
    preferred = [c for c in _PREFERRED_COLUMNS.get(table, ()) if c in seen]
    rest = [c for c in seen if c not in preferred]
    return (preferred + rest)[:_MAX_TABLE_COLUMNS]


def format_grid(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], *, max_cell: int | None = _MAX_CELL
) -> str:
    """A plain-text table: one header line, a rule, one line per row; long cells are cut."""
    cells = [[_cell(v, max_cell) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines.extend(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    )
    return "\n".join(lines)


def format_envelope(envelope: Mapping[str, Any], *, max_rows: int | None = None) -> str:
    """A readable rendering of an envelope: a status line, the records, the summary."""
    meta = envelope.get("metadata", {})
    records = list(envelope.get("records", []))
    source = str(meta.get("source", "?"))
    table = source.removeprefix("persistence.")
    total = meta.get("total_count", len(records))
    offset = meta.get("offset") or 0
    status = [source, f"{total} match{'es' if total != 1 else ''}"]
    if records:
        status.append(f"rows {offset + 1}-{offset + len(records)}")
    for key in ("cache", "fallback"):
        if meta.get(key):
            status.append(f"{key}: {meta[key]}")
    if meta.get("query_filters"):
        status.append("filters: " + json.dumps(meta["query_filters"], ensure_ascii=False))
    lines = [" · ".join(status)]
    for attempt in meta.get("reformulation_attempts") or ():
        lines.append(
            f"  reformulation {attempt.get('reason')}: "
            f"{json.dumps(attempt.get('filters'), ensure_ascii=False)} "
            f"-> {attempt.get('result_count')} rows"
        )
    error = _error_of(envelope)
    if error:
        lines.append(f"error: {error}")
    if records:
        shown = records if max_rows is None else records[:max_rows]
        headers = _columns_for(table, shown)
        lines.append(format_grid(headers, [[r.get(h) for h in headers] for r in shown]))
        if len(shown) < len(records):
            lines.append(f"… {len(records) - len(shown)} more rows on this page")
    if meta.get("truncated"):
        lines.append(f"truncated: {total} matches; summary of the returned page:")
        lines.append(_format_summary(meta.get("summary")))
    return "\n".join(lines)


def _format_summary(summary: Any) -> str:
    if not isinstance(summary, Mapping) or not isinstance(summary.get("columns"), Mapping):
        return "  " + json.dumps(summary, ensure_ascii=False, default=str)
    columns: Mapping[str, Any] = summary["columns"]
    width = max((len(c) for c in columns), default=0)
    lines = []
    for column, stats in columns.items():
        if not isinstance(stats, Mapping):
            continue
        parts = [f"{stats.get('distinct', '?')} distinct, {stats.get('nulls', 0)} null"]
        top = [t for t in stats.get("top") or () if isinstance(t, Mapping)]
        if top:
            parts.append(
                "top: " + ", ".join(f"{_cell(t.get('value'), 24)} ({t.get('count')})" for t in top)
            )
        if "min" in stats:
            parts.append(f"min {_cell(stats['min'], 24)}, max {_cell(stats.get('max'), 24)}")
        lines.append(f"  {column.ljust(width)}  " + " · ".join(parts))
    return "\n".join(lines)


def _emit(envelope: Envelope, as_json: bool, out: TextIO, *, max_rows: int | None = None) -> None:
    if as_json:
        out.write(json.dumps(envelope, ensure_ascii=False, default=str) + "\n")
    else:
        out.write(format_envelope(envelope, max_rows=max_rows) + "\n")


def _wants_json(args: argparse.Namespace, out: TextIO) -> bool:
    return bool(getattr(args, "json", False)) or not _isatty(out)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _error_of(envelope: Mapping[str, Any]) -> str | None:
    """The envelope's error as one line (``"Type: message"``), or ``None``."""
    error = envelope.get("metadata", {}).get("error")
    if error in (None, ""):
        return None
    if isinstance(error, Mapping):
        kind, message = error.get("type"), error.get("message")
        error = f"{kind}: {message}" if kind else message
    return " ".join(str(error).split())


# --------------------------------------------------------------------------- commands


def cmd_ask(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run one query and print its envelope."""
    with _connect(args, agent=True) as conn:
        envelope = _run(conn.agent, args.text, args)
    _emit(envelope, _wants_json(args, out), out)
    error = _error_of(envelope)
    if error:
        err.write(f"rag-agent: query failed: {error}\n")
        return EXIT_QUERY_ERROR
    return EXIT_OK


_CHAT_HELP = (
    "Type a request, e.g. 'find leads at acme'. Commands: next (the next page), "
    "history, reset (clear history and cache), help, exit/quit (or Ctrl-D)."
)


@dataclass
class _Chat:
    """One chat session: the agent, the history of requests, the page to continue from."""

    agent: Any
    args: argparse.Namespace
    history: list[tuple[str, int, int, int]]  # (text, offset, page size, total)

    def reset(self) -> None:
        self.history.clear()
        self.agent.cache.clear()

    def next_page(self) -> tuple[str, int] | None:
        if not self.history:
            return None
        text, offset, size, _ = self.history[-1]
        return text, offset + size

    def ask(self, text: str, offset: int | None) -> Envelope:
        envelope = _run(self.agent, text, self.args, offset=offset)
        meta = envelope.get("metadata", {})
        size = (
            meta.get("limit")
            if isinstance(meta.get("limit"), int)
            else len(envelope.get("records", []))
        )
        total = meta.get("total_count") if isinstance(meta.get("total_count"), int) else 0
        self.history.append((text, int(meta.get("offset") or 0), max(size, 1), total))
        return envelope


def cmd_chat(args: argparse.Namespace, out: TextIO, err: TextIO, inp: TextIO) -> int:
    """Read one request per line until end of input; print an envelope for each.

    Exit code 1 when any request of the session failed, so scripts piping requests notice.
    """
    interactive = _isatty(inp)
    as_json = _wants_json(args, out)
    failed = False
    with _connect(args, agent=True) as conn:
        chat = _Chat(conn.agent, args, [])
        if interactive:
            with contextlib.suppress(ImportError):
                import readline  # noqa: F401  # line editing and arrow-key history
            err.write(_CHAT_HELP + "\n")
        while True:
            if interactive:
                err.write("rag> ")
                err.flush()
            line = inp.readline()
            if not line:
                break
            text = line.strip()
            command = text.lower()
            if not text:
                continue
            if command in {"exit", "quit"}:
                break
            if command == "help":
                err.write(_CHAT_HELP + "\n")
                continue
            if command == "history":
                for i, (past, offset, _, total) in enumerate(chat.history, start=1):
                    err.write(f"{i:3d}  {past}  (offset {offset}, {total} matches)\n")
                continue
            if command == "reset":
                chat.reset()
                err.write("history and cache cleared\n")
                continue
            offset = args.offset
            if command == "next":
                following = chat.next_page()
                if following is None:
                    err.write("nothing to page through yet\n")
                    continue
                text, offset = following
            envelope = chat.ask(text, offset)
            _emit(envelope, as_json, out)
            out.flush()
            error = _error_of(envelope)
            if error:
                failed = True
                err.write(f"rag-agent: query failed: {error}\n")
    return EXIT_QUERY_ERROR if failed else EXIT_OK


def cmd_tables(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """List the allow-listed tables with their columns and row counts."""
    with _connect(args, agent=False) as conn:
        rows = [
            (t, conn.facade.count(t), list(conn.facade.columns(t))) for t in conn.facade.tables()
        ]
    if _wants_json(args, out):
        listing = [{"table": t, "rows": n, "columns": c} for t, n, c in rows]
        out.write(json.dumps({"backend": args.backend, "tables": listing}) + "\n")
    else:
        out.write(f"backend: {args.backend}\n")
        out.write(
            format_grid(
                ["table", "rows", "columns"],
                [[t, n, ", ".join(c)] for t, n, c in rows],
                max_cell=None,
            )
            + "\n"
        )
    return EXIT_OK


def cmd_load(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Load the sample dataset into PostgreSQL or Supabase."""
    from rag_agent.sample import SAMPLE_TABLES, load_sample

    if args.backend == "memory":
        raise UsageError(
            "load needs --backend postgres or supabase: the memory backend lives in one process, "
            "and ask/chat/tables/demo load the sample into it themselves"
        )
    options = _backend_options(args)
    if args.create_tables:
        if args.backend != "postgres":
            raise UsageError("--create-tables works with --backend postgres only")
        _create_postgres_tables(options["dsn"])
    backend = _writable_backend(args.backend, options)
    try:
        governance = [t for t in SAMPLE_TABLES if t in GOVERNANCE_TABLES]
        counts = load_sample(backend, tables=governance)
        counts.update(load_sample(PersistenceAgent(backend, AccessPolicy.writer())))
    finally:
        backend.close()
    if args.backend == "postgres":
        _sync_postgres_identities(options["dsn"], list(counts))
    if _wants_json(args, out):
        out.write(json.dumps({"backend": args.backend, "loaded": counts}) + "\n")
    else:
        for table in SAMPLE_TABLES:
            if table in counts:
                out.write(f"{table:<14} {counts[table]:>6} rows\n")
    return EXIT_OK


def cmd_demo(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Load the sample data into memory and walk through what the agent does."""
    args.backend, args.dsn, args.url, args.empty = "memory", None, None, False
    as_json = bool(args.json)
    with _connect(args, agent=True) as conn:
        agent = conn.agent
        if not as_json:
            loaded = conn.loaded or {}
            out.write(
                "Sample data loaded into the memory backend: "
                + ", ".join(f"{n} {t}" for t, n in loaded.items())
                + "\n"
            )
            if getattr(agent, "llm", None) is None:
                out.write(
                    "LLM steps are off (no OPENAI_API_KEY): everything below is rules, queries "
                    "and reformulations.\n"
                )
        failed = False
        for title, text, options in _demo_steps():
            envelope = agent.run(text, return_json=True, **options)
            failed = failed or _error_of(envelope) is not None
            if as_json:
                out.write(json.dumps({"step": title, "query": text, "envelope": envelope}) + "\n")
                continue
            flags = "".join(f" --{k} {v}" for k, v in options.items())
            out.write(f"\n== {title}\n$ rag-agent ask {json.dumps(text)}{flags}\n")
            _emit(envelope, False, out, max_rows=5)
    if not as_json:
        out.write(
            "\nEvery record carries provenance (source, row_id, row_hash); try "
            '`rag-agent ask "find leads at acme" --json`.\n'
        )
    return EXIT_QUERY_ERROR if failed else EXIT_OK


def _demo_steps() -> list[tuple[str, str, dict[str, Any]]]:
    from rag_agent.sample import sample_rows

    email = next(r["email"] for r in sample_rows("leads") if r["company_name"] == "Acme Inc.")
    return [
        ("Fast path: an e-mail address is parsed by rules, one exact match", f"lead {email}", {}),
        (
            "Fast path: a company name becomes a case-insensitive match",
            "find leads at Acme Inc.",
            {"limit": 5},
        ),
        (
            "Reformulation: no company is called 'Acme Corp', so the suffix is dropped",
            "find leads at Acme Corp",
            {"limit": 5},
        ),
        ("Pagination: page 1 of the Acme leads", "find leads at acme", {"limit": 5, "offset": 0}),
        ("Pagination: page 2, same query", "find leads at acme", {"limit": 5, "offset": 5}),
        (
            "Large result: more matches than the summary threshold, so a summary comes along",
            "find leads at Globex",
            {"limit": 20},
        ),
        (
            "No filter and no LLM configured: nothing is returned, never a whole table",
            "show me everything",
            {},
        ),
    ]  # fmt: skip


def cmd_tools(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Print the tool schemas (OpenAI function-calling format with --openai)."""
    try:
        tools = importlib.import_module("rag_agent.tools")
        schemas_of: Callable[..., Any] = tools.openai_tool_schemas
    except (ImportError, AttributeError) as exc:
        raise UsageError("tool schemas are not available yet in this build") from exc
    if not args.openai:
        raise UsageError("choose a schema format: --openai")
    out.write(json.dumps(schemas_of(), indent=2, ensure_ascii=False) + "\n")
    return EXIT_OK


# --------------------------------------------------------------------------- parser


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return value


def _positive(text: str) -> int:
    value = _non_negative(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _add_backend_options(parser: argparse.ArgumentParser, *, memory_default: bool = True) -> None:
    group = parser.add_argument_group("backend")
    group.add_argument(
        "--backend",
        choices=_BACKENDS,
        default="memory" if memory_default else "postgres",
        help="where to read (default: %(default)s)",
    )
    group.add_argument("--dsn", help="PostgreSQL DSN (default: RAG_POSTGRES_DSN)")
    group.add_argument(
        "--url", help="Supabase project URL (default: SUPABASE_URL; key: SUPABASE_KEY)"
    )
    group.add_argument(
        "--allow-privileged",
        action="store_true",
        help="let the postgres backend use a superuser/BYPASSRLS role (development only)",
    )
    if memory_default:
        group.add_argument(
            "--empty", action="store_true", help="memory backend: do not load the sample data"
        )


def _add_query_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--table", default="leads", help="table to query (default: %(default)s)")
    parser.add_argument("--limit", type=_positive, help="page size (default: RAG_DEFAULT_LIMIT)")
    parser.add_argument("--offset", type=_non_negative, help="rows to skip (default: 0)")
    parser.add_argument(
        "--include-raw", action="store_true", help="add each row as read to its provenance"
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``rag-agent`` (exposed for documentation and tests)."""
    parser = argparse.ArgumentParser(
        prog="rag-agent",
        description="Ask allow-listed business tables in plain words; read-only by construction.",
        epilog="Exit codes: 0 success, 1 query error, 2 usage or configuration error. "
        "RAG_DEBUG=1 shows debug logs and tracebacks (on stderr).",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    ask = commands.add_parser("ask", help="run one query and print its envelope")
    ask.add_argument("text", help='the request, e.g. "find leads at acme"')
    _add_query_options(ask)
    ask.add_argument("--json", action="store_true", help="print the envelope as JSON")
    _add_backend_options(ask)

    chat = commands.add_parser("chat", help="interactive: one request per line (stdin)")
    _add_query_options(chat)
    chat.add_argument("--json", action="store_true", help="print each envelope as one JSON line")
    _add_backend_options(chat)

    tables = commands.add_parser("tables", help="allow-listed tables, their columns and row counts")
    tables.add_argument("--json", action="store_true", help="print JSON")
    _add_backend_options(tables)

    load = commands.add_parser("load", help="load the sample dataset into PostgreSQL or Supabase")
    load.add_argument(
        "--create-tables", action="store_true", help="postgres: create missing tables first"
    )
    load.add_argument("--json", action="store_true", help="print JSON")
    _add_backend_options(load, memory_default=False)

    demo = commands.add_parser("demo", help="walk through the agent on the sample data")
    demo.add_argument("--json", action="store_true", help="one JSON line per step")

    tools = commands.add_parser("tools", help="print the tool schemas")
    tools.add_argument("--openai", action="store_true", help="OpenAI function-calling format")
    return parser


def main(
    argv: Sequence[str] | None = None,
    *,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Run ``rag-agent`` with ``argv``; return the exit code (the console script exits with it)."""
    inp = stdin if stdin is not None else sys.stdin
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    parser = build_parser()
    try:
        # argparse prints --help to sys.stdout and usage errors to sys.stderr.
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            args = parser.parse_args(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else EXIT_USAGE
        return code
    handlers: dict[str, Callable[[], int]] = {
        "ask": lambda: cmd_ask(args, out, err),
        "chat": lambda: cmd_chat(args, out, err, inp),
        "tables": lambda: cmd_tables(args, out, err),
        "load": lambda: cmd_load(args, out, err),
        "demo": lambda: cmd_demo(args, out, err),
        "tools": lambda: cmd_tools(args, out, err),
    }
    with _logging_for_cli(err):
        return _dispatch(handlers[args.command], err)


def _dispatch(handler: Callable[[], int], err: TextIO) -> int:
    try:
        return handler()
    except (UsageError, ConfigurationError) as exc:
        hint = (
            " (on the command line: --allow-privileged)" if "allow_privileged" in str(exc) else ""
        )
        return _fail(err, exc, EXIT_USAGE, hint)
    except PersistenceError as exc:
        return _fail(err, exc, EXIT_QUERY_ERROR)
    except KeyboardInterrupt:
        err.write("\n")
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `| head`); nothing more to say.
        return EXIT_OK
    except ImportError as exc:
        return _fail(err, exc, EXIT_USAGE)  # an optional extra is missing: the hint says which
    except Exception as exc:
        # A failure we did not anticipate (e.g. a database driver error): still one line.
        return _fail(err, exc, EXIT_QUERY_ERROR)


def _fail(err: TextIO, exc: BaseException, code: int, hint: str = "") -> int:
    if _debug():
        import traceback

        traceback.print_exception(exc, file=err)
    message = " ".join(str(exc).split()) or type(exc).__name__
    err.write(f"rag-agent: error: {message}{hint}\n")
    return code


def _console() -> None:  # pragma: no cover - exercised through subprocess tests
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    _console()
