"""The CLI never surprises: the backend that answers, --version, exit codes, secrets, RAG_LLM."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from importlib.metadata import version

import pytest

from rag_agent.cli import (
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_QUERY_ERROR,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
)
from rag_agent.understanding.llm.chat_model import _reset_disabled_warning
from tests.conftest import PostgresDatabase
from tests.support.cli import run, without_dsn_warning

UNREACHABLE = "postgresql://someone:pa55word@127.0.0.1:1/nowhere"
BACKEND_VARIABLES = ("RAG_POSTGRES_DSN", "SUPABASE_URL", "SUPABASE_KEY", "RAG_BACKEND", "RAG_LLM")


@pytest.fixture(autouse=True)
def _no_backend_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts from an environment that names no backend."""
    for variable in BACKEND_VARIABLES:
        monkeypatch.delenv(variable, raising=False)


class TestBackendInference:
    """The backend follows what is configured, and every status line names it."""

    def test_memory_by_default(self) -> None:
        """With nothing configured, the sample data in memory answers, and says so."""
        code, out, _ = run("ask", "find leads at acme", "--limit", "1", tty=True)
        assert code == EXIT_OK
        assert out.startswith("memory: persistence.leads · 196 matches")

    def test_dsn_alone_means_postgres(self) -> None:
        """--dsn without --backend reads PostgreSQL (here unreachable: exit 3, naming it)."""
        code, out, err = run("tables", "--dsn", UNREACHABLE)
        err = without_dsn_warning(err)
        assert (code, out) == (EXIT_UNAVAILABLE, "")
        assert err.startswith("rag-agent: error: postgres (postgresql://someone:***@127.0.0.1:1/")
        assert err.count("\n") == 1

    def test_environment_dsn_means_postgres(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """RAG_POSTGRES_DSN alone makes `ask` read PostgreSQL, not the memory sample."""
        monkeypatch.setenv("RAG_POSTGRES_DSN", UNREACHABLE)
        code, out, err = run("ask", "find leads at acme", "--json")
        err = without_dsn_warning(err)
        assert code == EXIT_UNAVAILABLE
        assert json.loads(out)["metadata"]["error"]["type"] == "BackendUnavailableError"
        assert err.startswith("rag-agent: query failed: BackendUnavailableError: ")

    def test_url_alone_means_supabase(self) -> None:
        """--url without --backend is the Supabase backend, which then asks for its key."""
        code, _, err = run("tables", "--url", "https://x.supabase.co")
        err = without_dsn_warning(err)
        assert code == EXIT_USAGE
        assert "the supabase backend needs SUPABASE_KEY" in err

    def test_rag_backend_wins_over_the_environment(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """RAG_BACKEND=memory keeps the memory sample even with RAG_POSTGRES_DSN set."""
        monkeypatch.setenv("RAG_POSTGRES_DSN", UNREACHABLE)
        monkeypatch.setenv("RAG_BACKEND", "memory")
        code, out, err = run("tables", tty=True)
        err = without_dsn_warning(err)
        assert code == EXIT_OK, err
        assert out.startswith("backend: memory\n")

    def test_two_configured_backends_are_refused(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """RAG_POSTGRES_DSN and SUPABASE_URL both set: the CLI asks which, it does not pick."""
        monkeypatch.setenv("RAG_POSTGRES_DSN", UNREACHABLE)
        monkeypatch.setenv("SUPABASE_URL", "https://x.supabase.co")
        code, _, err = run("tables")
        err = without_dsn_warning(err)
        assert code == EXIT_USAGE
        assert "both RAG_POSTGRES_DSN and SUPABASE_URL are set" in err
        assert "RAG_BACKEND" in err

    def test_the_parser_and_the_settings_name_the_same_backends(self) -> None:
        """--backend offers exactly the backends RAG_BACKEND accepts."""
        from rag_agent.cli._common import BACKENDS
        from rag_agent.settings import BACKEND_KINDS

        assert BACKENDS == BACKEND_KINDS

    def test_unknown_rag_backend(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """RAG_BACKEND names one of the three backends, or is a configuration error."""
        monkeypatch.setenv("RAG_BACKEND", "mysql")
        code, _, err = run("tables")
        err = without_dsn_warning(err)
        assert code == EXIT_USAGE
        assert "RAG_BACKEND='mysql' is not a backend" in err

    def test_demo_stays_in_memory(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """`demo` (what `make demo` runs) is the memory tour whatever the environment says."""
        monkeypatch.setenv("RAG_POSTGRES_DSN", UNREACHABLE)
        code, out, err = run("demo", tty=True)
        err = without_dsn_warning(err)
        assert code == EXIT_OK, err
        assert "memory: persistence.leads" in out

    @pytest.mark.postgres
    def test_status_line_names_postgres(
        self, postgres_db: PostgresDatabase, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """With RAG_POSTGRES_DSN the answer comes from PostgreSQL, and the status line says so."""
        company = f"Initrode {uuid.uuid4().hex[:8]}"
        postgres_db.execute(
            "INSERT INTO leads (email, company_name) VALUES (%s, %s)",
            (f"{company.split()[1]}@initrode.example", company),
        )
        monkeypatch.setenv("RAG_POSTGRES_DSN", postgres_db.reader_dsn)
        code, out, err = run("ask", f"find leads at {company}", tty=True)
        err = without_dsn_warning(err)
        assert code == EXIT_OK, err
        assert out.startswith("postgres: persistence.leads · 1 match")
        code, out, err = run("tables", tty=True)
        err = without_dsn_warning(err)
        assert code == EXIT_OK, err
        assert out.startswith("backend: postgres\n")


class TestVersion:
    """--version prints the installed version and exits 0."""

    def test_version(self) -> None:
        """The line is the program and the package's version."""
        code, out, _ = run("--version")
        assert code == EXIT_OK
        assert out == f"rag-agent {version('readonly-rag')}\n"


class TestErrorClasses:
    """One line per error, an exit code per class, and no secret in it."""

    @pytest.mark.parametrize(
        "dsn",
        [
            "postgresql://someone:pa55word@127.0.0.1:notaport/db",
            "host=127.0.0.1 password=pa55word port=abc",
            "pa55word is not a dsn",
        ],
    )
    def test_malformed_dsn_is_configuration(self, dsn: str) -> None:
        """A DSN libpq cannot read is exit 2, before any connection, and hides the password."""
        code, out, err = run("tables", "--dsn", dsn)
        err = without_dsn_warning(err)
        assert (code, out) == (EXIT_USAGE, "")
        assert err.startswith("rag-agent: error: the DSN") and "is malformed" in err
        assert err.count("\n") == 1
        assert "pa55word" not in err

    @pytest.mark.parametrize("command", [("tables",), ("ask", "find leads at acme")])
    def test_unreachable_is_unavailable(self, command: tuple[str, ...]) -> None:
        """A server that does not answer is exit 3 for every command, in one line, no password.

        Before, `ask` reported the condition as ignored and answered zero rows with exit 0.
        """
        code, _, err = run(*command, "--dsn", UNREACHABLE)
        err = without_dsn_warning(err)
        assert code == EXIT_UNAVAILABLE
        assert "Connection refused" in err and "pa55word" not in err
        assert err.count("\n") == 1

    @pytest.mark.postgres
    def test_unreadable_table_is_a_query_error(self, postgres_db: PostgresDatabase) -> None:
        """A role without SELECT on an allowed table: exit 1, one line, the password hidden."""
        from psycopg.conninfo import conninfo_to_dict

        password = str(conninfo_to_dict(postgres_db.reader_dsn)["password"])
        table = "inquiries"
        postgres_db.execute(f"REVOKE SELECT ON {table} FROM {postgres_db.reader_role}")
        try:
            code, out, err = run("tables", "--dsn", postgres_db.reader_dsn)
            err = without_dsn_warning(err)
        finally:
            postgres_db.execute(f"GRANT SELECT ON {table} TO {postgres_db.reader_role}")
        assert (code, out) == (EXIT_QUERY_ERROR, ""), err
        assert err.startswith(f"rag-agent: error: postgres: table public.{table} does not exist")
        assert err.count("\n") == 1
        assert password and password not in err

    def test_unanticipated_error_is_internal(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """An exception nobody classified is exit 4, its type and message on one line."""
        from rag_agent.cli import commands

        def broken(*args: object, **kwargs: object) -> int:
            raise RuntimeError("boom\nsecond line")

        monkeypatch.setattr(commands, "cmd_tables", broken)
        code, _, err = run("tables")
        err = without_dsn_warning(err)
        assert code == EXIT_INTERNAL
        assert err == "rag-agent: error: RuntimeError: boom second line\n"


class TestLLMSwitch:
    """RAG_LLM=off runs without a model and without the warning about it."""

    @pytest.mark.parametrize(("value", "warned"), [("off", False), ("on", True)])
    def test_warning(self, monkeypatch: pytest.MonkeyPatch, value: str, warned: bool) -> None:
        """The no-LLM warning (shown with RAG_DEBUG=1) is gone with RAG_LLM=off only."""
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        monkeypatch.setenv("RAG_DEBUG", "1")
        monkeypatch.setenv("RAG_LLM", value)
        _reset_disabled_warning()
        code, _, err = run("ask", "find leads at acme", "--count")
        err = without_dsn_warning(err)
        assert code == EXIT_OK
        assert ("rag.llm.disabled" in err) is warned


class TestMissingExtra:
    """Without the MCP SDK, `rag-agent mcp` says which extra to install, in one line."""

    def test_mcp_without_the_sdk(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The SDK missing is a configuration error (exit 2) naming the `mcp` extra."""
        # Every module of the SDK, loaded or not, becomes unimportable.
        for name in ["mcp", *(m for m in sys.modules if m.startswith("mcp."))]:
            monkeypatch.setitem(sys.modules, name, None)
        monkeypatch.delitem(sys.modules, "rag_agent.mcp_server", raising=False)
        code, out, err = run("mcp")
        err = without_dsn_warning(err)
        assert (code, out) == (EXIT_USAGE, "")
        assert err.startswith("rag-agent: error: the MCP server needs the MCP SDK: ")
        assert err.endswith(' pip install "readonly-rag[mcp]"\n')


class TestStartup:
    """`rag-agent --help` loads the parser only: no LangChain, no settings, no backend."""

    def test_help_imports_nothing_heavy(self) -> None:
        """After --help in a fresh interpreter, none of the heavy packages is loaded."""
        probe = (
            "import sys; from rag_agent.cli import main; assert main(['--help']) == 0; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'langchain', 'langchain_core', 'pydantic_settings', 'persistence', 'structlog'}), "
            "file=sys.stderr)"
        )
        result = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, check=True
        )
        assert result.stderr.strip() == "[]"
        assert "Exit codes" in result.stdout
