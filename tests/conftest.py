"""Shared test set-up: no network, hypothesis profiles, local services and the payload corpus."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from persistence import MemoryStore

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
CORPUS_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "corpora" / "sqli"

settings.register_profile(
    "default",
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile(
    "ci",
    parent=settings.get_profile("default"),
    derandomize=True,
    print_blob=True,
)
settings.load_profile("ci" if IN_CI else os.environ.get("HYPOTHESIS_PROFILE", "default"))


def require_service(available: bool, reason: str) -> None:
    """Skip with ``reason`` where a local service is missing; fail instead when ``CI=true``."""
    if available:
        return
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: required services must be running)")
    pytest.skip(reason)


def corpus_lines() -> list[str]:
    """Every payload line of the shared SQL-injection corpus (empty lines dropped)."""
    require_service(CORPUS_DIR.is_dir(), f"payload corpus not found at {CORPUS_DIR}")
    lines: list[str] = []
    for path in sorted(CORPUS_DIR.glob("*.txt")):
        text = path.read_text(encoding="utf-8", errors="replace")
        lines.extend(line for line in text.splitlines() if line.strip())
    return lines


def _loopback_only(address: object) -> bool:
    host = address[0] if isinstance(address, tuple) else address
    return isinstance(host, str) and (
        host.startswith("127.") or host in {"localhost", "::1"} or host.startswith("/")
    )


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests may talk to services on 127.0.0.1 only; anything else is a bug in the test."""
    real_connect = socket.socket.connect

    def guarded_connect(self: socket.socket, address: object) -> object:
        if self.family in (socket.AF_INET, socket.AF_INET6) and not _loopback_only(address):
            raise RuntimeError(f"test tried to reach the network: {address!r}")
        return real_connect(self, address)  # type: ignore[arg-type]

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)


@pytest.fixture
def store() -> Iterator[MemoryStore]:
    """A fresh, private memory store."""
    yield MemoryStore()


@pytest.fixture(autouse=True)
def _clean_default_store() -> Iterator[None]:
    """The process-wide default store starts every test empty."""
    from persistence import default_store

    default_store().clear()
    yield
    default_store().clear()
