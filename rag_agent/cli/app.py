"""The argument parser and ``main``: parse, configure logging, dispatch, map errors to codes.

Only the standard library and :mod:`rag_agent.cli._common` are imported up front: the parser
(``--help``, ``--version``, a usage error) needs nothing else, and answers at once. Settings,
backends and LangChain are imported once a command runs.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, TextIO

from rag_agent.cli._common import (
    BACKENDS,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_QUERY_ERROR,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    PromptInterrupted,
    UsageError,
    cli_words,
)

if TYPE_CHECKING:
    from rag_agent.settings import RAGSettings

_EPILOG = (
    "Exit codes: 0 success, 1 query error, 2 usage or configuration error, 3 backend unavailable "
    "or timed out, 4 internal error. RAG_DEBUG=1 shows debug logs and tracebacks "
    "(on stderr)."
)


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
    fallback = "memory" if memory_default else "postgres"
    group.add_argument(
        "--backend",
        choices=BACKENDS,
        help="where to read (default: postgres with --dsn, supabase with --url, else "
        "RAG_BACKEND, else postgres if RAG_POSTGRES_DSN is set, supabase if SUPABASE_URL is, "
        f"else {fallback})",
    )
    parser.set_defaults(default_backend=fallback)
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
    parser.add_argument(
        "--trace",
        action="store_true",
        help="show what ran: each step and backend read with its time (metadata.trace)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``rag-agent`` (exposed for documentation and tests)."""
    parser = argparse.ArgumentParser(
        prog="rag-agent",
        description="Ask allow-listed business tables in plain words; read-only by construction.",
        epilog=_EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
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

    vocabulary = commands.add_parser(
        "vocabulary", help="what the agent learned of the database: columns, kinds, values"
    )
    vocabulary.add_argument("table", nargs="?", help="one table (default: every readable table)")
    vocabulary.add_argument("--json", action="store_true", help="print JSON")
    _add_backend_options(vocabulary)

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

    setup = commands.add_parser(
        "setup",
        help="PostgreSQL: create the tables, load the sample, create a read-only role",
        description="With an administrator's DSN: create the reference tables and indexes, load "
        "the bundled sample, create (or reset to least privilege) a login role with SELECT on "
        "the business tables only, and print its DSN and the next command. Idempotent. The "
        "reader's password is RAG_READER_PASSWORD when set, else generated for a new role (or "
        "with --reset-password); it is masked unless --show-password. It then creates the "
        "indexes doctor checks for (unless --no-indexes).",
    )
    setup.add_argument(
        "--dsn",
        help="an administrator's PostgreSQL DSN (default: RAG_ADMIN_DSN); leave the password "
        "out (ps shows arguments): use PGPASSWORD or a PGPASSFILE",
    )
    setup.add_argument(
        "--role", default="rag_reader", help="the reader role's name (default: %(default)s)"
    )
    setup.add_argument(
        "--reset-password", action="store_true", help="give an existing role a new password"
    )
    setup.add_argument(
        "--show-password", action="store_true", help="print the reader DSN's password"
    )
    setup.add_argument("--no-sample", action="store_true", help="do not load the sample data")
    setup.add_argument(
        "--no-indexes",
        action="store_true",
        help="do not create the indexes doctor checks for (CREATE INDEX CONCURRENTLY on a "
        "large table takes a while)",
    )
    setup.add_argument("--json", action="store_true", help="print JSON")

    tools = commands.add_parser("tools", help="print the tool schemas")
    tools.add_argument("--openai", action="store_true", help="OpenAI function-calling format")

    mcp = commands.add_parser(
        "mcp",
        help="serve the read-only tools over MCP (stdio, or streamable HTTP with --http)",
        description="An MCP server exposing the read-only tools (query_leads, query_table, "
        "rag_agent, ...) with read-only annotations. stdio by default, for a client that "
        "starts it; --http serves streamable HTTP at http://HOST:PORT/mcp, on the loopback "
        "interface unless --host says otherwise; beyond it the server refuses to start without "
        "a bearer token in RAG_MCP_TOKEN and the allowed Host values (--allowed-host or "
        "RAG_MCP_ALLOWED_HOSTS).",
    )
    mcp.add_argument("--http", action="store_true", help="serve streamable HTTP, not stdio")
    mcp.add_argument("--host", default="127.0.0.1", help="--http: address (default: %(default)s)")
    mcp.add_argument(
        "--port", type=_positive, default=8000, help="--http: port (default: %(default)s)"
    )
    mcp.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="--http: a Host header value clients use (repeatable; 'name:*' for any port); "
        "required beyond loopback, with RAG_MCP_TOKEN",
    )
    _add_backend_options(mcp)

    from rag_agent.cli.index import add_index_parser  # standard library only
    from rag_agent.cli.search_function import add_search_function_parser

    add_index_parser(commands)
    add_search_function_parser(commands)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("readonly-rag")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree, not installed
        return "(not installed)"


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
    from persistence.errors import ConfigurationError
    from rag_agent.settings import RAGSettings

    try:
        # The environment is read once, here; every command gets these settings.
        settings = RAGSettings.from_env()
    except ConfigurationError as exc:
        # Unreadable settings include RAG_DEBUG: the error is one line, without a traceback.
        return _fail(err, exc, EXIT_USAGE, debug=False)
    with _logging(err, settings):
        return _dispatch(lambda: _run(args, settings, inp, out, err), err, args, settings)


@contextlib.contextmanager
def _logging(err: TextIO, settings: RAGSettings) -> Iterator[None]:
    from rag_agent.cli.logs import logging_for_cli

    with logging_for_cli(err, debug=settings.debug):
        yield


def _run(
    args: argparse.Namespace, settings: RAGSettings, inp: TextIO, out: TextIO, err: TextIO
) -> int:
    from rag_agent.cli.connect import dsn_password_warning, resolve_backend

    warning = dsn_password_warning(getattr(args, "dsn", None))
    if warning:
        err.write(warning + "\n")
        err.flush()
    if hasattr(args, "default_backend"):
        args.backend = resolve_backend(args, settings, default=args.default_backend)
    if args.command == "doctor":
        from rag_agent.cli.doctor import cmd_doctor

        return cmd_doctor(args, out, err, settings=settings)
    if args.command == "setup":
        from rag_agent.cli.setup import cmd_setup

        return cmd_setup(args, out, err, settings=settings)
    if args.command == "mcp":
        from rag_agent.cli.serve import cmd_mcp

        return cmd_mcp(args, out, err, settings=settings)
    if args.command == "index":
        from rag_agent.cli.index import cmd_index

        return cmd_index(args, out, err)
    if args.command == "search-function":
        from rag_agent.cli.search_function import cmd_search_function

        return cmd_search_function(args, out)
    from rag_agent.cli import commands

    handlers: dict[str, Callable[[], int]] = {
        "ask": lambda: commands.cmd_ask(args, out, err, settings=settings),
        "chat": lambda: commands.cmd_chat(args, out, err, inp, settings=settings),
        "tables": lambda: commands.cmd_tables(args, out, err, settings=settings),
        "vocabulary": lambda: commands.cmd_vocabulary(args, out, err, settings=settings),
        "load": lambda: commands.cmd_load(args, out, err, settings=settings),
        "demo": lambda: commands.cmd_demo(args, out, err, settings=settings),
        "tools": lambda: commands.cmd_tools(args, out, err),
    }
    return handlers[args.command]()


def _dispatch(
    handler: Callable[[], int], err: TextIO, args: argparse.Namespace, settings: RAGSettings
) -> int:
    try:
        return handler()
    except KeyboardInterrupt as exc:
        # The shell's prompt must start on a line of its own, wherever ours was written.
        if not isinstance(exc, PromptInterrupted):
            err.write("\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (e.g. `| head`); nothing more to say.
        return EXIT_OK
    except Exception as exc:
        from rag_agent.cli.connect import secrets_of

        code, message = _classify(exc, args, settings)
        secrets = secrets_of(args, settings)
        return _fail(err, exc, code, message, secrets=secrets, debug=settings.debug)


def _classify(exc: Exception, args: argparse.Namespace, settings: RAGSettings) -> tuple[int, str]:
    """The exit code of ``exc`` and the line that says it (naming the backend where it helps)."""
    from persistence.errors import (
        BackendUnavailableError,
        ConfigurationError,
        PersistenceError,
        QueryTimeoutError,
    )
    from rag_agent.cli.connect import target_of

    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, UsageError | ConfigurationError):
        return EXIT_USAGE, cli_words(text)
    if isinstance(exc, BackendUnavailableError | QueryTimeoutError):
        return EXIT_UNAVAILABLE, f"{target_of(args, settings)} unavailable: {text}"
    if isinstance(exc, PersistenceError):
        return EXIT_QUERY_ERROR, text
    if isinstance(exc, ImportError):
        return EXIT_USAGE, text  # an optional extra is missing: the message says which
    # A failure we did not anticipate (e.g. a database driver error): still one line.
    return EXIT_INTERNAL, f"{type(exc).__name__}: {text}"


def _fail(
    err: TextIO,
    exc: BaseException,
    code: int,
    message: str | None = None,
    *,
    secrets: Sequence[str] = (),
    debug: bool,
) -> int:
    from persistence import redact_text

    if debug:
        import traceback

        err.write(redact_text("".join(traceback.format_exception(exc))))
    line = message if message is not None else " ".join(str(exc).split()) or type(exc).__name__
    # A driver may quote a connection string back; no secret of ours reaches the terminal.
    for secret in secrets:
        line = line.replace(secret, "***")
    err.write(f"rag-agent: error: {redact_text(line)}\n")
    return code
