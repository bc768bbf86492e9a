"""The argument parser and ``main``: parse, configure logging, dispatch, map errors to codes."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Sequence
from typing import TextIO

from persistence import (
    ConfigurationError,
    PersistenceError,
    redact_text,
)
from rag_agent.cli._common import EXIT_OK, EXIT_QUERY_ERROR, EXIT_USAGE, UsageError
from rag_agent.cli.commands import cmd_ask, cmd_chat, cmd_demo, cmd_load, cmd_tables, cmd_tools
from rag_agent.cli.connect import BACKENDS
from rag_agent.cli.doctor import cmd_doctor
from rag_agent.cli.logs import logging_for_cli
from rag_agent.settings import RAGSettings


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
        choices=BACKENDS,
        default="memory" if memory_default else "postgres",
        help="where to read (default: %(default)s)",
    )
    group.add_argument(
        "--dsn",
        help="PostgreSQL DSN (default: RAG_POSTGRES_DSN); leave the password out (ps shows "
        "arguments): use RAG_POSTGRES_DSN, PGPASSWORD or a PGPASSFILE",
    )
    group.add_argument(
        "--url", help="Supabase project URL (default: SUPABASE_URL; key: SUPABASE_KEY)"
    )
    group.add_argument(
        "--allow-privileged",
        action="store_true",
        help="let the backend connect with privileges that bypass row-level security: a "
        "postgres superuser/BYPASSRLS role or a supabase service_role key (development only)",
    )
    if memory_default:
        group.add_argument(
            "--empty", action="store_true", help="memory backend: do not load the sample data"
        )


def _add_query_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--table", help="table to query (default: the table the question names, else leads)"
    )
    parser.add_argument(
        "--count", action="store_true", help="answer only how many rows match (no records)"
    )
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

    doctor = commands.add_parser(
        "doctor",
        help="check the role's privileges and the indexes the generated SQL needs",
        description="For each column the agent filters on: the operator it generates, whether "
        "an index serves that SQL, and the CREATE INDEX statement that would. Exit code 0 when "
        "every column is served and the role can only read, 1 otherwise.",
    )
    doctor.add_argument("--json", action="store_true", help="print JSON")
    _add_backend_options(doctor, memory_default=False)

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
    try:
        # The environment is read once, here; every command gets these settings.
        settings = RAGSettings.from_env()
    except ConfigurationError as exc:
        # Unreadable settings include RAG_DEBUG: the error is one line, without a traceback.
        return _fail(err, exc, EXIT_USAGE, debug=False)
    handlers: dict[str, Callable[[], int]] = {
        "ask": lambda: cmd_ask(args, out, err, settings=settings),
        "chat": lambda: cmd_chat(args, out, err, inp, settings=settings),
        "tables": lambda: cmd_tables(args, out, err, settings=settings),
        "load": lambda: cmd_load(args, out, err, settings=settings),
        "demo": lambda: cmd_demo(args, out, err, settings=settings),
        "tools": lambda: cmd_tools(args, out, err),
        "doctor": lambda: cmd_doctor(args, out, err, settings=settings),
    }
    with logging_for_cli(err, debug=settings.debug):
        return _dispatch(handlers[args.command], err, debug=settings.debug)


def _dispatch(handler: Callable[[], int], err: TextIO, *, debug: bool) -> int:
    try:
        return handler()
    except (UsageError, ConfigurationError) as exc:
        hint = (
            " (on the command line: --allow-privileged)" if "allow_privileged" in str(exc) else ""
        )
        return _fail(err, exc, EXIT_USAGE, hint, debug=debug)
    except PersistenceError as exc:
        return _fail(err, exc, EXIT_QUERY_ERROR, debug=debug)
    except KeyboardInterrupt:
        err.write("\n")
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `| head`); nothing more to say.
        return EXIT_OK
    except ImportError as exc:
        # An optional extra is missing: the hint says which.
        return _fail(err, exc, EXIT_USAGE, debug=debug)
    except Exception as exc:
        # A failure we did not anticipate (e.g. a database driver error): still one line.
        return _fail(err, exc, EXIT_QUERY_ERROR, debug=debug)


def _fail(err: TextIO, exc: BaseException, code: int, hint: str = "", *, debug: bool) -> int:
    # A driver's message may echo a connection string: what reaches the terminal is redacted.
    if debug:
        import traceback

        err.write(redact_text("".join(traceback.format_exception(exc))))
    message = redact_text(" ".join(str(exc).split())) or type(exc).__name__
    err.write(f"rag-agent: error: {message}{hint}\n")
    return code
