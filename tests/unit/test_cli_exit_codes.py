"""Every command through its documented failures: the exit code and the error line of
docs/cli.md ("Output and exit codes"), one row each.

A failure the CLI reports itself is one line, ``rag-agent: error: …``; a failed query (the
envelope carries ``metadata.error``) is ``rag-agent: query failed: <Type>: …``; a mistake the
argument parser catches prints the command's usage, then ``rag-agent COMMAND: error: …``.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from rag_agent.cli import (
    EXIT_INTERRUPTED,
    EXIT_QUERY_ERROR,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
)
from tests.conftest import POSTGRES_ADMIN_DSN
from tests.support.cli import run

#: Nothing listens on port 1: connecting is refused at once.
UNREACHABLE = "postgresql://nobody@127.0.0.1:1/x"
MALFORMED = "host=127.0.0.1 sslmode=bogus"
SHOWN = re.escape("postgres (postgresql://***@127.0.0.1:1/x) unavailable: ")
CLI_DOC = (Path(__file__).parents[2] / "docs" / "cli.md").read_text(encoding="utf-8")

MALFORMED_LINE = r"rag-agent: error: the DSN is malformed: sslmode must be one of disable, allow, "
NO_DSN = r"rag-agent: error: the postgres backend needs --dsn or RAG_POSTGRES_DSN$"

#: (argv, stdin, environment, exit code, the last stderr line as a regular expression).
CASES: list[tuple[tuple[str, ...], str, dict[str, str], int, str]] = [
    # ask
    (("ask",), "", {}, EXIT_USAGE, r"rag-agent ask: error: the following arguments are required"),
    (("ask", "x", "--limit", "0"), "", {}, EXIT_USAGE, r"rag-agent ask: error: argument --limit: "),
    (("ask", "lead #1", "--table", "users"), "", {}, EXIT_QUERY_ERROR,
     r"rag-agent: query failed: TableNotAllowedError: "),
    (("ask", "x", "--dsn", UNREACHABLE, "--url", "https://p.supabase.co"), "", {}, EXIT_USAGE,
     r"rag-agent: error: --dsn and --url name two backends; choose one with --backend$"),
    (("ask", "x", "--dsn", MALFORMED), "", {}, EXIT_USAGE, MALFORMED_LINE),
    (("ask", "x", "--backend", "postgres"), "", {}, EXIT_USAGE, NO_DSN),
    (("ask", "x"), "", {"RAG_DEFAULT_LIMIT": "many"}, EXIT_USAGE,
     r"rag-agent: error: .*RAG_DEFAULT_LIMIT"),
    (("ask", "x"), "", {"RAG_POSTGRES_DSN": UNREACHABLE, "SUPABASE_URL": "https://p.supabase.co"},
     EXIT_USAGE, r"rag-agent: error: both RAG_POSTGRES_DSN and SUPABASE_URL are set; "),
    (("ask", "lead #1", "--dsn", UNREACHABLE), "", {}, EXIT_UNAVAILABLE,
     r"rag-agent: query failed: BackendUnavailableError: postgres connect: "),
    # chat: the code of the last request that failed
    (("chat", "--table", "users"), "lead #1\n", {}, EXIT_QUERY_ERROR,
     r"rag-agent: query failed: TableNotAllowedError: "),
    (("chat", "--dsn", UNREACHABLE), "lead #1\n", {}, EXIT_UNAVAILABLE,
     r"rag-agent: query failed: BackendUnavailableError: "),
    (("chat", "--dsn", MALFORMED), "", {}, EXIT_USAGE, MALFORMED_LINE),
    # tables
    (("tables", "--dsn", UNREACHABLE), "", {}, EXIT_UNAVAILABLE, r"rag-agent: error: " + SHOWN),
    (("tables", "--dsn", MALFORMED), "", {}, EXIT_USAGE, MALFORMED_LINE),
    # vocabulary
    (("vocabulary", "users"), "", {}, EXIT_USAGE,
     r"rag-agent: error: 'users' is not a readable table; choose one of: campaigns, "),
    (("vocabulary", "--dsn", UNREACHABLE), "", {}, EXIT_UNAVAILABLE,
     r"rag-agent: error: " + SHOWN),
    (("vocabulary", "--dsn", MALFORMED), "", {}, EXIT_USAGE, MALFORMED_LINE),
    # load
    (("load", "--backend", "memory"), "", {}, EXIT_USAGE,
     r"rag-agent: error: load needs --backend postgres or supabase"),
    (("load",), "", {}, EXIT_USAGE, NO_DSN),
    (("load", "--dsn", UNREACHABLE), "", {}, EXIT_UNAVAILABLE, r"rag-agent: error: " + SHOWN),
    # doctor
    (("doctor",), "", {}, EXIT_USAGE, NO_DSN),
    (("doctor", "--dsn", MALFORMED), "", {}, EXIT_USAGE, MALFORMED_LINE),
    (("doctor", "--dsn", UNREACHABLE), "", {}, EXIT_UNAVAILABLE, r"rag-agent: error: " + SHOWN),
    # setup
    (("setup",), "", {}, EXIT_USAGE,
     r"rag-agent: error: setup needs --dsn \(an administrator's DSN\) or RAG_ADMIN_DSN$"),
    (("setup", "--dsn", UNREACHABLE, "--role", "Robert'); --"), "", {}, EXIT_USAGE,
     r"rag-agent: error: --role .* is not a plain lower-case identifier$"),
    (("setup", "--dsn", MALFORMED), "", {}, EXIT_USAGE, MALFORMED_LINE),
    (("setup", "--dsn", UNREACHABLE), "", {}, EXIT_UNAVAILABLE, r"rag-agent: error: " + SHOWN),
    # mcp
    (("mcp", "--dsn", MALFORMED), "", {}, EXIT_USAGE, MALFORMED_LINE),
    (("mcp", "--backend", "postgres"), "", {}, EXIT_USAGE, NO_DSN),
    (("mcp", "--port", "0"), "", {}, EXIT_USAGE, r"rag-agent mcp: error: argument --port: "),
    # index
    (("index", "leads", "--dsn", UNREACHABLE), "", {}, EXIT_USAGE,
     r"rag-agent index: error: the following arguments are required: --columns$"),
    (("index", "leads", "--columns", "email", "--dsn", MALFORMED), "", {}, EXIT_USAGE,
     MALFORMED_LINE),
    (("index", "leads", "--columns", " , ", "--dsn", UNREACHABLE), "", {}, EXIT_USAGE,
     r"rag-agent: error: --columns names no column$"),
    (("index", "leads", "--columns", "email", "--keyword-columns", ",", "--dsn", UNREACHABLE),
     "", {}, EXIT_USAGE, r"rag-agent: error: --keyword-columns names no column$"),
    # search-function
    (("search-function", "leads", "--columns", "Body Text"), "", {}, EXIT_USAGE,
     r"rag-agent: error: column 'Body Text' is not a lower-case SQL name"),
    # tools
    (("tools", "--yaml"), "", {}, EXIT_USAGE,
     r"rag-agent: error: unrecognized arguments: --yaml$"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "stdin", "env", "code", "line"),
    CASES,
    ids=[" ".join(case[0])[:60] for case in CASES],
)
def test_documented_failure(
    argv: tuple[str, ...],
    stdin: str,
    env: dict[str, str],
    code: int,
    line: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    got, out, err = run(*argv, stdin=stdin)
    assert got == code, err
    lines = err.splitlines()
    assert lines, "an error always says something"
    assert re.match(line, lines[-1]), lines[-1]
    if not err.startswith("usage: rag-agent"):  # the parser prints the usage first
        # One line: a note that the bundled sample answered may come first, nothing else.
        assert [x for x in lines[:-1] if not x.startswith("rag-agent: note:")] == []
    if code not in (EXIT_QUERY_ERROR, EXIT_UNAVAILABLE) or argv[0] not in {"ask", "chat"}:
        assert out == ""  # only a query's envelope goes to stdout on failure
    assert "Traceback" not in err
    assert not lines[-1].endswith(("…", "...")), "never cut"


def test_every_command_has_a_row() -> None:
    """The table covers every command that can fail (demo has no failure of its own)."""
    from rag_agent.cli import build_parser

    parser = build_parser()
    commands = set(parser._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    assert commands - {case[0][0] for case in CASES} == {"demo"}


def test_the_error_lines_are_the_documented_ones() -> None:
    """Each kind of line this table expects is the one docs/cli.md describes."""
    for documented in (
        "rag-agent: error:",
        "rag-agent: query failed: <Type>: <message>",
        "rag-agent COMMAND: error:",
        "--allow-privileged",
    ):
        assert documented in CLI_DOC, documented


def test_interrupted_chat_exits_130_on_a_new_line() -> None:
    """Ctrl-C at the prompt: exit 130, and the shell's prompt starts on a line of its own."""

    class Interrupting(io.StringIO):
        def readline(self, size: int | None = -1) -> str:
            raise KeyboardInterrupt

    code, _, err = run("chat", "--empty", stdin=Interrupting())
    assert code == EXIT_INTERRUPTED
    assert err.endswith("\n")


@pytest.mark.postgres
def test_privileged_role_is_a_configuration_error() -> None:
    """A superuser DSN: exit 2, one line naming the flag that accepts the risk, never cut."""
    from tests.conftest import require_service

    psycopg = pytest.importorskip("psycopg")
    try:
        psycopg.connect(POSTGRES_ADMIN_DSN, connect_timeout=3).close()
    except psycopg.OperationalError:
        require_service(False, f"PostgreSQL not reachable at {POSTGRES_ADMIN_DSN!r}")
    for argv in (("ask", "lead #1"), ("chat",), ("tables",), ("mcp",)):
        code, out, err = run(*argv, "--dsn", POSTGRES_ADMIN_DSN, stdin="lead #1\n")
        assert code == EXIT_USAGE, (argv, err)
        [line] = err.splitlines()
        assert line.startswith("rag-agent: error: postgres role "), line
        assert "may do more than read" in line and "pass --allow-privileged" in line
        assert "allow_privileged=True" not in line
        if argv[0] in {"tables", "mcp"}:  # no envelope: nothing on stdout, no server started
            assert out == ""
