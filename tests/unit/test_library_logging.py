"""The library's structlog events stay off stdout until the application configures structlog."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog
from structlog.testing import capture_logs

from persistence import MemoryStore, create_persistence_agent, create_read_only_facade
from rag_agent import RAGAgent, RAGSettings


@pytest.fixture
def unconfigured() -> Iterator[None]:
    """structlog as a fresh application finds it: never configured."""
    saved, was_configured = structlog.get_config(), structlog.is_configured()
    structlog.reset_defaults()
    yield
    if was_configured:
        structlog.configure(**saved)
    else:
        structlog.reset_defaults()


@pytest.fixture
def agent() -> RAGAgent:
    store = MemoryStore()
    create_persistence_agent(kind="memory", store=store).write(
        "leads", {"email": "a@x.io", "company_name": "Acme"}
    )
    return RAGAgent(create_read_only_facade("memory", store=store), settings=RAGSettings())


class TestUnconfiguredStructlog:
    @pytest.mark.usefixtures("unconfigured")
    def test_debug_events_are_silent(
        self, agent: RAGAgent, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A successful run prints nothing: no debug step events on stdout or stderr."""
        assert agent.run("leads at acme").metadata.total_count == 1
        out, err = capsys.readouterr()
        assert out == ""
        assert "rag.query" not in err

    @pytest.mark.usefixtures("unconfigured")
    def test_warnings_go_to_stderr(
        self, agent: RAGAgent, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A refused input is logged as a warning on stderr, never on stdout."""
        assert agent.run("leads at acme", table="LEADS").metadata.error is not None
        out, err = capsys.readouterr()
        assert out == ""
        assert "rag.error" in err
        assert "TableNotAllowedError" in err


class TestConfiguredStructlog:
    def test_the_application_configuration_applies(self, agent: RAGAgent) -> None:
        """Once structlog is configured (here by capture_logs) every step event reaches it."""
        with capture_logs() as events:
            agent.run("leads at acme")
        names = [event["event"] for event in events]
        assert {"rag.filters", "rag.query", "rag.run"} <= set(names)
