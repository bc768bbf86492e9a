"""Hostile input through the CLI, on memory, PostgreSQL and the Supabase adapter.

One ``rag-agent chat --json`` session reads every corpus line (and our own cases) from stdin:
each line must give one JSON envelope, checked like any other, and the session must end
normally. ``ask`` gets the cases a shell can pass: NUL-free text, undecodable bytes
(surrogate-escaped by Python), 1 MB arguments, hostile ``--table`` names.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import rag_agent.cli.connect as cli_connect
from rag_agent.cli import EXIT_OK, EXIT_QUERY_ERROR
from tests.conftest import corpus_lines
from tests.faults.worlds import BACKENDS, World, envelope_problems, open_world, seed_leads
from tests.support.cli import run

SESSION_COMMANDS = {"next", "history", "reset", "help", "exit", "quit"}
OWN_LINES = [
    "%",
    "_",
    "*",
    "\\",
    "leads at %_*\\",
    "email a@b.c' OR '1'='1",
    "lead #1; DROP",
    "ａｃｍｅ",
]
ASK_CASES = [
    "leads at acme\udcff",
    "caf\udce9 leads",
    "leads at " + "a" * 1_000_000,
    "leads at ' OR 1=1 --",
    "email ann@acme.io",
]


@pytest.fixture(params=BACKENDS)
def world(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    """A seeded backend the CLI connects to (memory and Supabase: the world's own store)."""
    with open_world(request.param, seed_leads(), request) as world:
        facade = world.facade

        def agent_over_world(kind: str, **options: Any) -> Any:
            # The CLI builds its agent with create_rag_agent; hand it the seeded world instead.
            from rag_agent import RAGAgent
            from tests.faults.worlds import SETTINGS

            class Unclosed(RAGAgent):
                def close(self) -> None:
                    pass  # the world closes its own facade

            return Unclosed(facade, settings=SETTINGS)

        monkeypatch.setattr(cli_connect, "create_rag_agent", agent_over_world)
        monkeypatch.setattr(cli_connect, "backend_options", lambda args, settings: {})
        yield world


class TestHostileCLI:
    def test_chat_session_over_the_whole_corpus(self, world: World) -> None:
        """Every corpus line is one request in one chat session: one checked envelope each."""
        lines = [
            line
            for line in [*corpus_lines(), *OWN_LINES]
            if line.strip().lower() not in SESSION_COMMANDS and line.strip()
        ]
        code, out, _ = run("chat", "--json", "--backend", "memory", stdin="\n".join(lines) + "\n")
        assert code == EXIT_OK
        envelopes = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        assert len(envelopes) == len(lines)
        problems = [p for envelope in envelopes for p in envelope_problems(envelope, world)]
        assert problems == []

    def test_ask_with_hostile_arguments(self, world: World) -> None:
        """ask answers undecodable, huge and hostile text with an envelope or a typed error."""
        for text in ASK_CASES:
            code, out, err = run("ask", text, "--json", "--backend", "memory")
            assert code in (EXIT_OK, EXIT_QUERY_ERROR), err
            envelope = json.loads(out)
            assert envelope_problems(envelope, world) == [], text[:40]

    @pytest.mark.parametrize("table", ["LEADS", "public.leads", "leads;--", "secrets", "lеads"])
    def test_ask_with_hostile_tables(self, world: World, table: str) -> None:
        """--table outside the allow-list is a query error naming TableNotAllowedError."""
        code, out, _ = run("ask", "leads at acme", "--json", "--table", table)
        assert code == EXIT_QUERY_ERROR
        assert json.loads(out)["metadata"]["error"]["type"] == "TableNotAllowedError"
