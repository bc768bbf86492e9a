"""The `rag-agent` CLI: parsing, exit codes, `tables`, `load`, rendering and logging."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest

from rag_agent import cli
from rag_agent.cli import EXIT_OK, EXIT_QUERY_ERROR, EXIT_USAGE, format_envelope, format_grid
from rag_agent.cli.connect import backend_options
from rag_agent.ops.sample import SAMPLE_TABLES, sample_rows
from rag_agent.settings import RAGSettings
from tests.conftest import require_service
from tests.support.cli import run
from tests.support.leftovers import scratch_name
from tests.support.postgrest import fake_key


class TestParsing:
    """Usage errors exit with 2 and one usage message on stderr, nothing on stdout."""

    @pytest.mark.parametrize(
        ("argv", "message"),
        [
            ((), "required: COMMAND"),
            (("frobnicate",), "invalid choice"),
            (("ask",), "required: text"),
            (("ask", "x", "--limit", "0"), "must be at least 1"),
            (("ask", "x", "--limit", "many"), "not an integer"),
            (("ask", "x", "--offset", "-1"), "negative"),
            (("ask", "x", "--backend", "mysql"), "invalid choice"),
        ],
    )
    def test_usage_errors(self, argv: tuple[str, ...], message: str) -> None:
        """Each malformed command line is refused with exit code 2 and says why."""
        code, out, err = run(*argv)
        assert code == EXIT_USAGE
        assert out == ""
        assert message in err

    def test_help(self) -> None:
        """--help lists the commands and the exit codes, and exits 0."""
        code, out, _ = run("--help")
        assert code == EXIT_OK
        for command in ("ask", "chat", "tables", "load", "demo", "tools"):
            assert command in out
        assert "Exit codes" in out


class TestConfigurationErrors:
    """A bad configuration exits with 2 and one clear line on stderr."""

    @pytest.mark.parametrize(
        ("argv", "message"),
        [
            (("tables", "--backend", "postgres"), "needs --dsn or RAG_POSTGRES_DSN"),
            (("tables", "--backend", "supabase"), "needs --url or SUPABASE_URL"),
            (
                ("tables", "--backend", "supabase", "--url", "https://x.supabase.co"),
                "needs SUPABASE_KEY",
            ),
            (
                ("tables", "--backend", "memory", "--dsn", "postgresql://127.0.0.1/x"),
                "--dsn and --url name a postgres or supabase backend, not memory",
            ),
            (
                ("tables", "--dsn", "postgresql://127.0.0.1/x", "--url", "https://x.supabase.co"),
                "--dsn and --url name two backends; choose one with --backend",
            ),
            (("load", "--backend", "memory"), "load needs --backend postgres or supabase"),
            (("load",), "needs --dsn or RAG_POSTGRES_DSN"),
        ],
    )
    def test_one_line(self, argv: tuple[str, ...], message: str) -> None:
        """The message names what is missing; there is no traceback."""
        code, out, err = run(*argv)
        assert code == EXIT_USAGE
        assert out == ""
        assert err.count("\n") == 1 and err.startswith("rag-agent: error: ")
        assert message in err
        assert "Traceback" not in err

    def test_traceback_with_debug(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """With RAG_DEBUG=1 the traceback comes before the one-line error."""
        monkeypatch.setenv("RAG_DEBUG", "1")
        code, _, err = run("load", "--backend", "memory")
        assert code == EXIT_USAGE
        assert "Traceback" in err
        assert err.rstrip().splitlines()[-1].startswith("rag-agent: error: ")

    def test_bad_setting_is_one_line_even_with_debug(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Settings are read once, first: a bad one (RAG_DEBUG among them unread) is one line."""
        monkeypatch.setenv("RAG_DEBUG", "1")
        monkeypatch.setenv("RAG_STATEMENT_TIMEOUT_MS", "soon")
        code, out, err = run("tables")
        assert code == EXIT_USAGE
        assert out == ""
        assert err.count("\n") == 1 and "RAG_STATEMENT_TIMEOUT_MS" in err

    def test_create_tables_needs_postgres(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """--create-tables is refused for Supabase, whose tables are made in the dashboard."""
        monkeypatch.setenv("SUPABASE_KEY", "test-key")
        code, _, err = run("load", "--backend", "supabase", "--url", "https://x.supabase.co",
                           "--create-tables")  # fmt: skip
        assert code == EXIT_USAGE
        assert "--create-tables works with --backend postgres only" in err

    def test_service_role_key_refused_with_a_hint(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A Supabase service_role key is refused; the error points at --allow-privileged."""
        monkeypatch.setenv("SUPABASE_KEY", fake_key("service_role"))
        code, out, err = run("tables", "--backend", "supabase", "--url", "https://x.supabase.co")
        assert code == EXIT_USAGE
        assert out == ""
        assert err.count("\n") == 1
        # The flag's name, not the Python argument's.
        assert "pass --allow-privileged" in err and "allow_privileged=True" not in err

    @pytest.mark.parametrize(
        ("argv", "expected"),
        [
            (
                ("--backend", "postgres", "--dsn", "postgresql://127.0.0.1/x"),
                {"dsn": "postgresql://127.0.0.1/x", "statement_timeout_ms": 5000},
            ),
            (
                ("--backend", "supabase", "--url", "https://x.supabase.co"),
                {"url": "https://x.supabase.co", "key": "test-key"},
            ),
            (("--backend", "memory"), {}),
        ],
    )
    def test_allow_privileged_is_forwarded(
        self, monkeypatch: pytest.MonkeyPatch, argv: tuple[str, ...], expected: dict[str, Any]
    ) -> None:
        """--allow-privileged reaches the postgres and supabase backends, and only with the flag."""
        monkeypatch.setenv("SUPABASE_KEY", "test-key")
        parser = cli.build_parser()
        settings = RAGSettings.from_env()
        plain = backend_options(parser.parse_args(["tables", *argv]), settings)
        assert plain == expected
        privileged = backend_options(
            parser.parse_args(["tables", *argv, "--allow-privileged"]), settings
        )
        assert privileged == (expected and {**expected, "allow_privileged": True})


class TestTables:
    """`tables` lists the allow-listed tables with their columns and row counts."""

    def test_json_when_piped(self) -> None:
        """Piped output is JSON: every business table with the sample's row count."""
        code, out, err = run("tables")
        assert code == EXIT_OK, err
        listing = json.loads(out)
        assert listing["backend"] == "memory"
        counts = {t["table"]: t["rows"] for t in listing["tables"]}
        assert counts == {t: len(sample_rows(t)) for t in SAMPLE_TABLES}
        leads = next(t for t in listing["tables"] if t["table"] == "leads")
        assert {"email", "company_name", "client_id"} <= set(leads["columns"])

    def test_empty(self) -> None:
        """--empty skips the sample data: every table has zero rows."""
        code, out, _ = run("tables", "--empty", "--json")
        assert code == EXIT_OK
        assert {t["rows"] for t in json.loads(out)["tables"]} == {0}

    def test_table_on_terminal(self) -> None:
        """On a terminal the listing is a readable table, not JSON."""
        code, out, _ = run("tables", tty=True)
        assert code == EXIT_OK
        assert out.startswith("backend: memory\n")
        assert "table" in out.splitlines()[1] and "rows" in out.splitlines()[1]
        assert any(line.startswith("leads") and " 3000 " in line for line in out.splitlines())

    def test_json_flag_on_terminal(self) -> None:
        """--json wins over a terminal."""
        code, out, _ = run("tables", "--json", tty=True)
        assert code == EXIT_OK
        assert json.loads(out)["backend"] == "memory"


class TestTools:
    """`tools` prints tool schemas, or says clearly why it cannot."""

    def test_without_a_format_lists_the_tools(self) -> None:
        """Without --openai: each tool's name and what it does, and how to get the schemas."""
        code, out, err = run("tools")
        assert code == EXIT_OK
        names = [line.split()[0] for line in out.splitlines()]
        assert names[:3] == ["query_leads", "query_table", "rag_agent"]
        assert "search_table" in names
        assert all(len(line.split(maxsplit=1)) == 2 for line in out.splitlines())
        assert "--openai prints their JSON schemas" in err


class TestRendering:
    """The terminal rendering of envelopes and grids."""

    def test_grid_aligns_and_cuts_long_cells(self) -> None:
        """Columns are aligned, long cells cut with an ellipsis, newlines flattened."""
        text = format_grid(["id", "body"], [[1, "a" * 50], [22, "two\nlines"]])
        lines = text.splitlines()
        assert lines[0].split() == ["id", "body"]
        assert lines[2].startswith("1   ") and lines[2].endswith("…")
        assert "two lines" in lines[3]

    def test_envelope_with_error(self) -> None:
        """An envelope's error is rendered as one 'Type: message' line."""
        envelope: dict[str, Any] = {
            "metadata": {
                "source": "persistence.leads",
                "total_count": 0,
                "error": {"type": "TableNotAllowedError", "message": "no"},
            },
            "records": [],
        }
        text = format_envelope(envelope)
        assert "error: TableNotAllowedError: no" in text
        assert text.splitlines()[0].startswith("persistence.leads · 0 matches")

    def test_a_bounded_total_reads_as_at_least(self) -> None:
        meta = {"source": "persistence.leads", "total_count": 51, "total_exact": False}
        text = format_envelope({"metadata": meta, "records": []})
        assert text.splitlines()[0].startswith("persistence.leads · at least 51 matches")

    def test_envelope_with_records_and_summary(self) -> None:
        """Preferred lead columns come first; summaries and reformulations are shown."""
        envelope = {
            "metadata": {
                "source": "persistence.leads",
                "total_count": 300,
                "offset": 10,
                "cache": "miss",
                "fallback": "reformulation",
                "query_filters": {"company": "Acme"},
                "reformulation_attempts": [
                    {"reason": "shorten_company_suffix", "filters": {"company": "Acme"},
                     "result_count": 300}
                ],
                "has_more": True,
                "summary": {"columns": {"status": {"distinct": 3}}},
            },
            "records": [
                {"zeta": 1, "email": "a@x.example", "id": 7, "provenance": {"row_hash": "0" * 64}}
            ],
        }  # fmt: skip
        text = format_envelope(envelope)
        assert "rows 11-11" in text and "cache: miss" in text and "fallback: reformulation" in text
        assert "reformulation shorten_company_suffix" in text and "-> 300 rows" in text
        header = text.splitlines()[2].split()
        assert header == ["id", "email", "zeta"]
        assert "provenance" not in text
        assert "300 matches; summary of the returned page" in text
        assert "  status  3 distinct, 0 null" in text


@pytest.fixture
def _restore_logging() -> Iterator[None]:
    """Put structlog's and the root logger's configuration back after a test changes them."""
    import logging

    import structlog

    saved = structlog.get_config()
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    yield
    structlog.configure(**saved)
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.mark.usefixtures("_restore_logging")
class TestLogging:
    """Logs go to stderr, never stdout; `main` leaves the host's logging as it found it."""

    def test_main_restores_logging(self) -> None:
        """After an in-process run, structlog's configuration is what it was before."""
        import structlog

        before = structlog.get_config()
        assert run("tables")[0] == EXIT_OK
        assert structlog.get_config() == before

    def test_structlog_goes_to_stderr(self) -> None:
        """After the CLI configures logging, a warning lands on the given stream."""
        import structlog

        err = io.StringIO()
        cli.configure_logging(err)
        structlog.get_logger("test").warning("cli.test_event", detail=1)
        assert "cli.test_event" in err.getvalue()

    def test_debug_level_hidden_by_default(self) -> None:
        """Debug events are dropped unless RAG_DEBUG=1."""
        import structlog

        err = io.StringIO()
        cli.configure_logging(err)
        structlog.get_logger("test").debug("cli.hidden")
        assert err.getvalue() == ""


@pytest.fixture
def postgres_dsn() -> Iterator[str]:
    """A DSN for a new, empty database on the local server, dropped afterwards."""
    import os

    psycopg = pytest.importorskip("psycopg")
    pytest.importorskip("persistence.backends.postgres")
    base = os.environ.get("RAG_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
    try:
        admin = psycopg.connect(base, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        require_service(False, f"PostgreSQL not reachable at {base}: {exc}")
        raise
    name = scratch_name("cli")
    from psycopg import sql

    with admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        try:
            yield psycopg.conninfo.make_conninfo(base, dbname=name)
        finally:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.mark.postgres
class TestLoadPostgres:
    """`load` seeds a real PostgreSQL database, and `tables` reads it back."""

    def test_load_then_tables(self, postgres_dsn: str) -> None:
        """Every table is created and loaded; a second load changes nothing; identities move on."""
        args = ("--backend", "postgres", "--dsn", postgres_dsn, "--allow-privileged")
        code, out, err = run("load", "--create-tables", *args)
        assert code == EXIT_OK, err
        loaded = json.loads(out)["loaded"]
        assert loaded == {t: len(sample_rows(t)) for t in SAMPLE_TABLES}
        code, out, err = run("load", *args)
        assert code == EXIT_OK, err
        code, out, err = run("tables", *args)
        assert code == EXIT_OK, err
        counts = {t["table"]: t["rows"] for t in json.loads(out)["tables"]}
        assert counts == loaded
        code, out, err = run("ask", "find leads at Acme Corp", "--limit", "3", *args)
        assert code == EXIT_OK, err
        meta = json.loads(out)["metadata"]
        assert (meta["total_count"], meta["fallback"]) == (196, "reformulation")

        import psycopg

        with psycopg.connect(postgres_dsn) as conn:
            row = conn.execute(
                "INSERT INTO leads (email) VALUES ('new@x.example') RETURNING id"
            ).fetchone()
        assert row is not None and row[0] > loaded["leads"]

    def test_missing_tables(self, postgres_dsn: str) -> None:
        """Loading into a database without the tables fails with one line, exit code 1."""
        code, _, err = run("load", "--backend", "postgres", "--dsn", postgres_dsn,
                           "--allow-privileged")  # fmt: skip
        assert code in (EXIT_QUERY_ERROR, EXIT_USAGE)
        assert err.count("\n") == 1 and "Traceback" not in err
