"""The shared contract suite against a real Supabase project (marker ``supabase_live``).

Runs only when ``SUPABASE_TEST_URL`` and ``SUPABASE_TEST_KEY`` are set; skipped otherwise. The
project needs the business tables (``persistence.schema.create_tables_sql()``), an empty
``clients`` table, and SELECT granted to the key's role. ``SUPABASE_TEST_KEY`` is the reader's key
(the anon key, with SELECT-only policies, is the intended set-up); the writer uses
``SUPABASE_TEST_SERVICE_KEY`` when set, else the same key. Every test starts and ends with the
writable business tables emptied, so point it at a throwaway project.

    SUPABASE_TEST_URL=https://<ref>.supabase.co SUPABASE_TEST_KEY=<anon> \\
    SUPABASE_TEST_SERVICE_KEY=<service_role> pytest -m supabase_live
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from persistence import (
    BUSINESS_TABLES,
    GOVERNANCE_TABLES,
    Filter,
    Op,
    PersistenceAgent,
    ReadOnlyPersistenceFacade,
    create_persistence_agent,
    create_read_only_facade,
)
from persistence.backends.supabase import key_role
from tests.contract.test_backend_contract import (  # noqa: F401  (collected here too)
    TestReads,
    TestRefusals,
    TestWrites,
    seeded,
)

URL = os.environ.get("SUPABASE_TEST_URL", "")
KEY = os.environ.get("SUPABASE_TEST_KEY", "")
WRITER_KEY = os.environ.get("SUPABASE_TEST_SERVICE_KEY") or KEY

pytestmark = [
    pytest.mark.supabase_live,
    pytest.mark.skipif(
        not (URL and KEY),
        reason="set SUPABASE_TEST_URL and SUPABASE_TEST_KEY to run the contract suite against "
        "a real Supabase project",
    ),
]

Pair = tuple[PersistenceAgent, ReadOnlyPersistenceFacade]


@pytest.fixture(autouse=True)
def _no_network() -> None:
    """Overrides the suite-wide network guard: this module talks to the configured project."""


def _empty(writer: PersistenceAgent) -> None:
    for table in sorted(BUSINESS_TABLES - GOVERNANCE_TABLES):
        writer.delete(table, [Filter("id", Op.IS_NULL, False)])


@pytest.fixture
def pair() -> Iterator[Pair]:
    writer = create_persistence_agent(kind="supabase", url=URL, key=WRITER_KEY)
    reader = create_read_only_facade(
        kind="supabase", url=URL, key=KEY, allow_privileged=key_role(KEY) == "service_role"
    )
    with writer, reader:
        _empty(writer)
        yield writer, reader
        _empty(writer)


@pytest.fixture
def writer(pair: Pair) -> PersistenceAgent:
    return pair[0]


@pytest.fixture
def reader(pair: Pair) -> ReadOnlyPersistenceFacade:
    return pair[1]
