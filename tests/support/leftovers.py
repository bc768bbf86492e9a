"""What a test session creates outside its own process, and how it is removed: on the way out,
on Ctrl-C or SIGTERM, and at the next session's start when a run was killed outright.

Everything the suite creates on a PostgreSQL server is named ``rag_test_<pid>_…`` (databases
and roles alike; :func:`scratch_name`), where ``<pid>`` is the test session's process; every
embedded server lives in a directory ``rag_test_pg_<pid>_…`` under the temporary folder. A name
says which session owns it, so :func:`sweep` removes only what a session that no longer runs
left behind, and never touches another session that runs meanwhile (other people's runs, a
second suite on the same servers).

:class:`Leftovers` records each database, role and server as it is made and removes them in
reverse order; :func:`install_signal_handlers` turns SIGTERM (and SIGHUP) into the same
``KeyboardInterrupt`` Ctrl-C raises, so pytest unwinds its fixtures either way, and an
``atexit`` hook removes whatever a second interrupt cut short.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

#: Every database and role a session creates starts with this, then the session's pid.
PREFIX = "rag_test_"
#: Every embedded server's directory starts with this (under the temporary folder).
SERVER_DIR_PREFIX = "rag_test_pg_"
_OWNED = re.compile(rf"^{PREFIX}(?:pg_)?(\d+)_")


def scratch_name(kind: str = "db") -> str:
    """A fresh name ``rag_test_<pid>_<kind>_<hex>`` for a database or role of this session."""
    return f"{PREFIX}{os.getpid()}_{kind}_{secrets.token_hex(3)}"


def owner(name: str) -> int | None:
    """The pid of the session that made ``name``, or ``None`` if the suite did not name it."""
    match = _OWNED.match(name)
    return int(match.group(1)) if match else None


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie counts as gone)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    return True


def stale(name: str) -> bool:
    """``name`` is the suite's and the session that made it no longer runs."""
    pid = owner(name)
    return pid is not None and not alive(pid)


# --- PostgreSQL: databases and roles -------------------------------------------------------------


def drop_database(admin_dsn: str, name: str) -> None:
    """Drop database ``name`` (connections and all), if it exists."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(admin_dsn, autocommit=True, connect_timeout=5) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def drop_role(admin_dsn: str, name: str) -> None:
    """Drop role ``name``, if it exists (its objects went with its database)."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(admin_dsn, autocommit=True, connect_timeout=5) as conn:
        conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


def sweep_server(admin_dsn: str) -> list[str]:
    """Drop every database, then every role, that a session no longer running left on the
    server at ``admin_dsn``; returns what was dropped. Unreachable server: nothing."""
    import psycopg

    try:
        conn = psycopg.connect(admin_dsn, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError:
        return []
    with conn:
        databases = [
            name
            for (name,) in conn.execute(
                "SELECT datname FROM pg_catalog.pg_database WHERE datname LIKE 'rag\\_test\\_%'"
            )
        ]
        roles = [
            name
            for (name,) in conn.execute(
                "SELECT rolname FROM pg_catalog.pg_roles WHERE rolname LIKE 'rag\\_test\\_%'"
            )
        ]
    dropped = []
    for name in databases:
        if stale(name):
            with contextlib.suppress(psycopg.Error):
                drop_database(admin_dsn, name)
                dropped.append(name)
    for name in roles:
        if stale(name):
            with contextlib.suppress(psycopg.Error):
                drop_role(admin_dsn, name)
                dropped.append(name)
    return dropped


# --- embedded PostgreSQL servers ----------------------------------------------------------------


def server_dir() -> Path:
    """A new directory for this session's embedded server."""
    return Path(tempfile.mkdtemp(prefix=f"{SERVER_DIR_PREFIX}{os.getpid()}_"))


def _postmaster_pid(data: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int((data / "postmaster.pid").read_text().splitlines()[0])
    return None


def stop_server_dir(directory: Path) -> None:
    """Stop the server whose data is in ``directory/data`` (fast shutdown, then SIGKILL), and
    remove the directory."""
    data = directory / "data"
    pid = _postmaster_pid(data)
    if pid is not None and alive(pid):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGINT)  # PostgreSQL's "fast" shutdown
        with contextlib.suppress(OSError):
            if not _wait_gone(pid, 10.0):
                os.kill(pid, signal.SIGKILL)
                _wait_gone(pid, 5.0)
    shutil.rmtree(directory, ignore_errors=True)


def _wait_gone(pid: int, seconds: float) -> bool:
    """Wait until ``pid`` is gone (not a child: polled through /proc with a wait on nothing)."""
    import threading

    pause = threading.Event()
    for _ in range(int(seconds / 0.05)):
        if not alive(pid):
            return True
        pause.wait(0.05)
    return not alive(pid)


def sweep_server_dirs() -> list[str]:
    """Stop and remove every embedded server directory of a session no longer running (also
    the older ``rag_pgvector_*`` and ``rag_bench_*`` ones, unnamed by pid: when no process
    listed in their ``.handle_pids.json`` runs and they are older than ten minutes)."""
    import time

    removed = []
    root = Path(tempfile.gettempdir())
    for directory in root.glob(f"{SERVER_DIR_PREFIX}*"):
        if stale(directory.name):
            stop_server_dir(directory)
            removed.append(str(directory))
    legacy = [*root.glob("rag_pgvector_*"), *root.glob("rag_bench_*")]
    for directory in legacy:
        with contextlib.suppress(OSError):
            if time.time() - directory.stat().st_mtime < 600:
                continue
        try:
            holders = json.loads((directory / "data" / ".handle_pids.json").read_text())
        except (OSError, ValueError):
            holders = []
        if not any(alive(int(pid)) for pid in holders):
            stop_server_dir(directory)
            removed.append(str(directory))
    return removed


# --- this session's own things -------------------------------------------------------------------


class Leftovers:
    """What this session made outside itself, removed in reverse order by :meth:`clean`, which
    runs at most once per thing (a fixture's finalizer, then ``atexit``, whichever is first)."""

    def __init__(self) -> None:
        self._undo: list[tuple[str, Callable[[], None]]] = []

    def add(self, label: str, undo: Callable[[], None]) -> Callable[[], None]:
        """Record ``undo`` for ``label``; the returned callable runs it now and forgets it."""
        entry = (label, undo)
        self._undo.append(entry)

        def now() -> None:
            if entry in self._undo:
                self._undo.remove(entry)
                undo()

        return now

    def database(self, admin_dsn: str, name: str) -> Callable[[], None]:
        return self.add(f"database {name}", lambda: drop_database(admin_dsn, name))

    def role(self, admin_dsn: str, name: str) -> Callable[[], None]:
        return self.add(f"role {name}", lambda: drop_role(admin_dsn, name))

    def pending(self) -> list[str]:
        return [label for label, _ in self._undo]

    def clean(self) -> list[str]:
        """Undo everything still recorded, newest first; returns what failed."""
        failed = []
        while self._undo:
            label, undo = self._undo.pop()
            try:
                undo()
            except Exception as exc:
                failed.append(f"{label}: {type(exc).__name__}: {exc}")
        return failed

    @contextlib.contextmanager
    def scoped(self, label: str, undo: Callable[[], None]) -> Iterator[None]:
        """Record ``undo`` for the block and run it when the block ends, however it ends."""
        now = self.add(label, undo)
        try:
            yield
        finally:
            now()


#: The session's one registry.
LEFTOVERS = Leftovers()
atexit.register(LEFTOVERS.clean)


#: The signals that asked the session to stop, in order. Kept apart from the exception the
#: handler raises: Python swallows an exception raised inside a finaliser (``__del__``, a weakref
#: callback), and with the signal then ignored nothing else would stop the run.
RECEIVED_SIGNALS: list[int] = []


def _interrupt(signum: int, frame: FrameType | None) -> None:
    RECEIVED_SIGNALS.append(signum)
    # Only once: a second signal during clean-up must not cut the clean-up itself short.
    signal.signal(signum, signal.SIG_IGN)
    raise KeyboardInterrupt(f"signal {signum}")


def install_signal_handlers() -> None:
    """SIGTERM and SIGHUP interrupt the run as Ctrl-C does, so fixtures are finalised."""
    for signum in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) in (signal.SIG_DFL, None):
            signal.signal(signum, _interrupt)
