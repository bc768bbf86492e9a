"""Run by ``tests/unit/test_interrupted_cleanup.py`` only (not collected by the suite: the file
name does not start with ``test_``): takes the session's PostgreSQL database and embedded server,
makes a scratch database of its own, prints what it made, then waits until it is interrupted."""

from __future__ import annotations

import json
import os
import signal
import threading

from tests.conftest import PostgresDatabase
from tests.support.pgvector import pgvector_database

# A session started in the background inherits an ignored SIGINT; Ctrl-C is what is tested.
signal.signal(signal.SIGINT, signal.default_int_handler)


def test_wait_to_be_interrupted(postgres_db: PostgresDatabase, pgvector_server: str) -> None:
    with pgvector_database(pgvector_server) as vector_db:
        made = {
            "pid": os.getpid(),
            "databases": [postgres_db.name],
            "roles": [postgres_db.reader_role, postgres_db.writer_role],
            "server": pgvector_server,
            "server_databases": [vector_db.name],
            "server_roles": [vector_db.reader_role, vector_db.writer_role],
        }
        print("MADE " + json.dumps(made), flush=True)
        threading.Event().wait(60)  # until the signal; never set
