"""The CLI's progress line while a model is thinking."""

from __future__ import annotations

import io
import threading

from persistence import MemoryStore, create_persistence_agent, create_read_only_facade
from rag_agent import RAGAgent, RAGSettings
from rag_agent.cli.progress import ProgressLine, show_progress
from rag_agent.runtime.deadline import thinking
from tests.support.extraction import answer
from tests.unit.test_llm_scripted import ScriptedChatModel, call, calls, final


class Terminal(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def progress_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "rag-progress"]


class TestProgressLine:
    def test_shows_the_step_and_time_then_erases(self) -> None:
        """The line names what the model does and for how long; it is erased when done."""
        now = [10.0]
        term = Terminal()
        line = ProgressLine(term, interval=60, clock=lambda: now[0])
        line("fallback", True)
        assert "waiting for the language model (searching the tables) 0s" in term.getvalue()
        now[0] += 3
        line("fallback", True)  # a second model call redraws the same line
        assert term.getvalue().endswith("(searching the tables) 0s")
        line("fallback", False)
        assert term.getvalue().endswith("\r\033[K") and progress_threads() == []

    def test_end_without_start_writes_nothing(self) -> None:
        """Ending a line that was never shown leaves the stream alone."""
        term = Terminal()
        ProgressLine(term).end()
        assert term.getvalue() == ""


class TestShowProgress:
    def test_off_a_terminal_nothing_is_written(self) -> None:
        """Pipes and scripts get no progress line."""
        stream = io.StringIO()
        with show_progress(stream) as line, thinking("filters"):
            pass
        assert line is None and stream.getvalue() == ""

    def test_a_run_with_a_model_shows_and_erases_the_line(self, store: MemoryStore) -> None:
        """While the agent's model reads the request the line shows; none is left after."""
        create_persistence_agent(kind="memory", store=store).batch(
            "leads", [{"id": 1, "email": "a@acme.example", "company_name": "Acme"}]
        )
        model = ScriptedChatModel(script=[calls(call("UnderstoodRequest", **answer())), final()])
        agent = RAGAgent(
            create_read_only_facade(kind="memory", store=store), settings=RAGSettings(), llm=model
        )
        term = Terminal()
        with show_progress(term):
            agent.run("who scores highest?")
        assert "(reading the request)" in term.getvalue()
        assert "(searching the tables)" in term.getvalue()
        assert term.getvalue().endswith("\r\033[K") and progress_threads() == []
        with thinking("filters"):
            pass  # the listener is gone once the block ends
        assert term.getvalue().endswith("\r\033[K")
