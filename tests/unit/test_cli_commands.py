"""The `rag-agent` commands that run the retrieval pipeline: ask, chat, demo (and the script)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from importlib.metadata import entry_points
from typing import Any

import jsonschema
import pytest

from rag_agent import envelope_json_schema, row_hash
from rag_agent.cli import EXIT_OK, EXIT_QUERY_ERROR, EXIT_USAGE
from tests.support.cli import Terminal, run

ACME_LEADS = 196  # leads of the six "Acme …" companies in the sample data
#: The one stderr line of a command answered from the bundled sample.
SAMPLE_NOTE = "rag-agent: note: answering from the bundled sample data (memory backend)"
GLOBEX_LEADS = 320


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    """A validator for the envelope's published JSON Schema."""
    return jsonschema.Draft202012Validator(envelope_json_schema())


def assert_valid(envelope: dict[str, Any], validator: jsonschema.Draft202012Validator) -> None:
    """The envelope matches the schema and every record's hash can be recomputed."""
    validator.validate(envelope)
    for record in envelope["records"]:
        fields = {k: v for k, v in record.items() if k != "provenance"}
        assert record["provenance"]["row_hash"] == row_hash(fields)


class TestAsk:
    """`ask` prints one envelope and exits 0, or 1 when the query failed."""

    def test_json_envelope(self, validator: jsonschema.Draft202012Validator) -> None:
        """`ask "find leads at acme" --json` prints a valid envelope with records."""
        code, out, err = run("ask", "find leads at acme", "--json")
        assert code == EXIT_OK, err
        envelope = json.loads(out)
        assert_valid(envelope, validator)
        assert envelope["metadata"]["total_count"] == ACME_LEADS
        assert envelope["metadata"]["query_filters"] == {"company": "acme"}
        assert len(envelope["records"]) == 50
        assert all("acme" in r["company_name"].lower() for r in envelope["records"])
        assert envelope["metadata"]["backend"] == {"kind": "memory", "database": "sample"}
        # The sample answers, and says so on stderr: one line, nothing else.
        assert err.startswith(SAMPLE_NOTE)
        assert err.count("\n") == 1

    def test_piped_output_is_json(self) -> None:
        """Without --json, output that is not a terminal is still the JSON envelope."""
        code, out, _ = run("ask", "lead #42")
        assert code == EXIT_OK
        assert json.loads(out)["records"][0]["id"] == 42

    def test_terminal_output_is_a_table(self) -> None:
        """On a terminal the envelope is rendered as a status line and a table."""
        code, out, _ = run("ask", "find leads at acme", "--limit", "3", tty=True)
        assert code == EXIT_OK
        lines = out.splitlines()
        assert lines[0].startswith(f"memory: persistence.leads · {ACME_LEADS} matches · rows 1-3")
        assert lines[1].split()[:4] == ["id", "first_name", "last_name", "email"]
        assert len(lines) == 2 + 1 + 3 + 1
        assert "{" not in lines[2]
        assert lines[-1] == "more rows: --offset 3"

    def test_count(self, validator: jsonschema.Draft202012Validator) -> None:
        """--count answers the number of matches with no records."""
        code, out, _ = run("ask", "find leads at acme", "--count", "--json")
        assert code == EXIT_OK
        envelope = json.loads(out)
        assert_valid(envelope, validator)
        assert envelope["metadata"]["count_only"] is True and envelope["records"] == []
        assert envelope["metadata"]["total_count"] == ACME_LEADS

    def test_reformulation(self, validator: jsonschema.Draft202012Validator) -> None:
        """No "Acme Corp" exists, so the suffix is dropped and every Acme lead matches."""
        code, out, _ = run("ask", "find leads at Acme Corp", "--json", "--limit", "5")
        assert code == EXIT_OK
        envelope = json.loads(out)
        assert_valid(envelope, validator)
        meta = envelope["metadata"]
        assert meta["fallback"] == "reformulation"
        assert meta["query_filters"] == {"company": "Acme"}
        assert meta["total_count"] == ACME_LEADS
        assert meta["reformulation_attempts"][0]["reason"] == "shorten_company_suffix"

    def test_pagination(self) -> None:
        """--limit and --offset select consecutive, disjoint pages."""
        pages = []
        for offset in ("0", "5"):
            code, out, _ = run("ask", "find leads at acme", "--limit", "5", "--offset", offset)
            assert code == EXIT_OK
            envelope = json.loads(out)
            assert (envelope["metadata"]["limit"], envelope["metadata"]["offset"]) == (
                5,
                int(offset),
            )
            pages.append([r["id"] for r in envelope["records"]])
        assert len(pages[0]) == len(pages[1]) == 5
        assert not set(pages[0]) & set(pages[1])
        assert max(pages[0]) < min(pages[1])

    def test_large_result_summary(self) -> None:
        """More matches than the threshold: more pages, with a summary of the page."""
        code, out, _ = run("ask", "find leads at Globex", "--limit", "20")
        assert code == EXIT_OK
        meta = json.loads(out)["metadata"]
        assert meta["total_count"] == GLOBEX_LEADS
        assert meta["has_more"] is True
        assert meta["summary"]["columns"]["company_name"]["distinct"] == 1

    def test_include_raw(self) -> None:
        """--include-raw adds the row as read to each record's provenance."""
        code, out, _ = run("ask", "lead #7", "--include-raw")
        assert code == EXIT_OK
        (record,) = json.loads(out)["records"]
        assert record["provenance"]["raw_row"]["id"] == 7

    def test_other_table(self) -> None:
        """--table reads another allow-listed table."""
        code, out, _ = run("ask", "client_id 3", "--table", "inquiries", "--limit", "2")
        assert code == EXIT_OK
        envelope = json.loads(out)
        assert envelope["metadata"]["source"] == "persistence.inquiries"
        assert all(r["client_id"] == 3 for r in envelope["records"])

    @pytest.mark.parametrize("table", ["users", "LEADS", "leads; DROP TABLE leads", "public.leads"])
    def test_table_not_allowed(
        self, table: str, validator: jsonschema.Draft202012Validator
    ) -> None:
        """A table outside the allow-list: the envelope carries the error, exit code 1."""
        code, out, err = run("ask", "lead #1", "--table", table)
        assert code == EXIT_QUERY_ERROR
        envelope = json.loads(out)
        assert_valid(envelope, validator)
        assert envelope["metadata"]["error"]["type"] == "TableNotAllowedError"
        assert envelope["records"] == []
        note, error = err.splitlines()
        assert note.startswith(SAMPLE_NOTE)
        assert error.startswith("rag-agent: query failed: TableNotAllowedError: ")

    def test_no_filter_returns_nothing(self) -> None:
        """Text naming no filter, with no LLM, returns no records (never a whole table)."""
        code, out, _ = run("ask", "show me everything")
        assert code == EXIT_OK
        envelope = json.loads(out)
        assert envelope["records"] == []
        assert envelope["metadata"]["fallback"] == "disabled"

    def test_empty(self) -> None:
        """--empty starts without the sample data: no match, still a success."""
        code, out, _ = run("ask", "find leads at acme", "--empty")
        assert code == EXIT_OK
        assert json.loads(out)["metadata"]["total_count"] == 0

    def test_bad_environment(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """An invalid setting is a configuration error naming the variable: exit code 2."""
        monkeypatch.setenv("RAG_DEFAULT_LIMIT", "lots")
        code, out, err = run("ask", "find leads at acme")
        assert code == EXIT_USAGE
        assert out == ""
        assert "RAG_DEFAULT_LIMIT" in err and err.count("\n") == 1


class TestChat:
    """`chat` answers one request per line of stdin, with history, paging and reset."""

    def test_piped_session(self, validator: jsonschema.Draft202012Validator) -> None:
        """Each request yields one JSON line; `next` pages (a follow-up of the conversation);
        `history` lists the turns and how each was read; `exit` ends the session."""
        script = "find leads at acme\n\nnext\nhistory\nlead #42\nexit\nlead #43\n"
        code, out, err = run("chat", "--limit", "4", stdin=io.StringIO(script))
        assert code == EXIT_OK, err
        envelopes = [json.loads(line) for line in out.splitlines()]
        assert len(envelopes) == 3
        for envelope in envelopes:
            assert_valid(envelope, validator)
        first, second, third = envelopes
        assert second["metadata"]["offset"] == 4
        assert second["metadata"]["query_filters"] == first["metadata"]["query_filters"]
        assert {r["id"] for r in first["records"]}.isdisjoint(r["id"] for r in second["records"])
        assert [r["id"] for r in third["records"]] == [42]
        assert second["metadata"]["context"]["kind"] == "page"
        assert "  1  find leads at acme  -> leads: " in err
        assert "  2  next [page]  -> leads: " in err

    def test_cache_and_reset(self) -> None:
        """A repeated request is served from the cache; after `reset` it is read again."""
        script = "lead #5\nlead #5\nreset\nlead #5\n"
        code, out, err = run("chat", stdin=io.StringIO(script))
        assert code == EXIT_OK
        caches = [json.loads(line)["metadata"]["cache"] for line in out.splitlines()]
        assert caches == ["miss", "hit", "miss"]
        assert "history and cache cleared" in err

    def test_failure_does_not_end_session(self) -> None:
        """A failed request is reported; later lines still run; the exit code is 1."""
        code, out, err = run("chat", "--table", "users", stdin=io.StringIO("lead #1\nlead #2\n"))
        assert code == EXIT_QUERY_ERROR
        assert len(out.splitlines()) == 2
        assert err.count("rag-agent: query failed: TableNotAllowedError") == 2

    @pytest.mark.parametrize(
        ("line", "message"),
        [("next\n", "nothing to page through"), ("help\n", "Commands: next")],
        ids=["next-without-history", "help"],
    )
    def test_session_command_runs_no_query(self, line: str, message: str) -> None:
        """`next` before any request, and `help`, answer on stderr and run no query."""
        code, out, err = run("chat", stdin=io.StringIO(line))
        assert code == EXIT_OK
        assert out == ""
        assert message in err

    def test_interactive_prompt_on_stderr(self) -> None:
        """On a terminal the prompt and help go to stderr; stdout has only results."""
        stdin = Terminal("lead #9\nquit\n")
        code, out, err = run("chat", stdin=stdin, tty=True)
        assert code == EXIT_OK
        assert "rag> " in err and "Commands:" in err
        assert out.startswith("memory: persistence.leads · 1 match")
        assert "rag>" not in out

    def test_end_of_input(self) -> None:
        """Empty input ends the session at once with exit code 0."""
        assert run("chat", stdin=io.StringIO(""))[:2] == (EXIT_OK, "")


class TestDemo:
    """`demo` shows the fast path, reformulation, pagination and the large-result summary."""

    def test_human_output(self) -> None:
        """Each step is labelled and shows what it is about."""
        code, out, err = run("demo", tty=True)
        assert code == EXIT_OK, err
        for text in (
            "Sample data loaded into the memory backend",
            "== Fast path",
            "== Reformulation",
            "reformulation shorten_company_suffix",
            "== Pagination: page 2",
            "rows 6-10",
            f"{GLOBEX_LEADS} matches; summary of the returned page",
            "== Counting",
            "count only",
            "rag> only the qualified ones",
            "follow-up (refine of turn 1): kept company_name icontains 'Globex'",
            "follow-up (related of turn 2)",
            "persistence.campaigns",
            "not applied: we met in March",
            "fallback: disabled",
        ):
            assert text in out, text

    def test_json_lines(self, validator: jsonschema.Draft202012Validator) -> None:
        """--json prints one step per line, each with a valid envelope."""
        code, out, _ = run("demo", "--json")
        assert code == EXIT_OK
        steps = [json.loads(line) for line in out.splitlines()]
        assert len(steps) >= 6
        for step in steps:
            assert_valid(step["envelope"], validator)
        fallbacks = {s["envelope"]["metadata"].get("fallback") for s in steps}
        assert "reformulation" in fallbacks
        assert any(s["envelope"]["metadata"].get("has_more") for s in steps)


class TestConsoleScript:
    """The installed `rag-agent` script behaves like `main` in a real process."""

    def test_entry_point(self) -> None:
        """`rag-agent` is declared and points at `rag_agent.cli:main`."""
        (script,) = [e for e in entry_points(group="console_scripts") if e.name == "rag-agent"]
        assert script.value == "rag_agent.cli:main"

    def _run(self, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
        environment = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "RAG_"))}
        environment.update(env)
        return subprocess.run(
            [sys.executable, "-m", "rag_agent.cli", *argv],
            capture_output=True,
            text=True,
            env=environment,
            timeout=120,
            check=False,
        )

    def test_piped_ask(self, validator: jsonschema.Draft202012Validator) -> None:
        """Piped stdout holds exactly one JSON envelope with records, naming its backend;
        stderr holds only the line saying the sample answered."""
        done = self._run("ask", "find leads at acme")
        assert done.returncode == EXIT_OK, done.stderr
        envelope = json.loads(done.stdout)
        assert_valid(envelope, validator)
        assert envelope["records"]
        assert envelope["metadata"]["backend"] == {"kind": "memory", "database": "sample"}
        assert done.stderr.startswith(SAMPLE_NOTE)
        assert done.stderr.count("\n") == 1

    def test_empty_memory_store_is_not_the_sample(self) -> None:
        """--empty reads an unnamed store: no sample note, a backend without a database."""
        done = self._run("ask", "lead #1", "--empty")
        assert done.returncode == EXIT_OK, done.stderr
        assert json.loads(done.stdout)["metadata"]["backend"] == {"kind": "memory"}
        assert done.stderr == ""

    def test_debug_traceback(self) -> None:
        """With RAG_DEBUG=1 a usage error shows its traceback, then the one-line error."""
        done = self._run("load", "--backend", "memory", RAG_DEBUG="1")
        assert done.returncode == EXIT_USAGE
        assert "Traceback" in done.stderr
        assert done.stderr.rstrip().splitlines()[-1].startswith("rag-agent: error: load needs")
        assert done.stdout == ""


class TestChatEndings:
    """The words people type to leave end the session; Ctrl-C ends the prompt's line."""

    @pytest.mark.parametrize("ending", ["bye", "Bye!", "exit", "Exit.", "quit", "quit()", ":q"])
    def test_ending_words_are_not_questions(self, ending: str) -> None:
        code, out, err = run("chat", stdin=f"lead #1\n{ending}\nlead #2\n")
        assert code == EXIT_OK, err
        [envelope] = [json.loads(line) for line in out.splitlines()]
        assert envelope["metadata"]["query_filters"] == {"id": 1}

    def test_ctrl_c_at_the_terminal_prompt_ends_its_line(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """input() writes the prompt on stdout: the newline goes there, even when stderr is
        redirected elsewhere, and only once."""
        from rag_agent.cli import EXIT_INTERRUPTED, main

        screen, elsewhere = Terminal(), io.StringIO()
        keyboard = Terminal()

        def interrupted(prompt: str = "") -> str:
            screen.write(prompt)
            raise KeyboardInterrupt

        monkeypatch.setattr(sys, "stdin", keyboard)
        monkeypatch.setattr(sys, "stdout", screen)
        monkeypatch.setattr("builtins.input", interrupted)
        code = main(["chat", "--empty"], stdin=keyboard, stdout=screen, stderr=elsewhere)
        assert code == EXIT_INTERRUPTED
        assert screen.getvalue().endswith("rag> \n")
        assert not elsewhere.getvalue().endswith("\n\n")
