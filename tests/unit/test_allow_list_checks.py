"""The table allow-list is checked once per read: each facade call checks its own table once,
and a run of the agent asks it about no table it does not read (the vocabulary's freshness is
judged on the allow-list's own tables, without checking them again)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from persistence import (
    AccessPolicy,
    Filter,
    MemoryStore,
    Op,
    ReadOnlyPersistenceFacade,
    create_read_only_facade,
)
from rag_agent import RAGAgent
from rag_agent.ops.sample import load_sample


@pytest.fixture(scope="module")
def facade() -> ReadOnlyPersistenceFacade:
    store = MemoryStore()
    load_sample(store, tables=["clients", "leads", "inquiries"])
    return create_read_only_facade(kind="memory", store=store)


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Every ``check_read`` of any policy, counted by table."""
    counted: Counter[str] = Counter()
    check = AccessPolicy.check_read

    def counting(self: AccessPolicy, table: object, operation: str = "read") -> str:
        counted[str(table)] += 1
        return check(self, table, operation)

    monkeypatch.setattr(AccessPolicy, "check_read", counting)
    yield counted


EMAIL = [Filter("email", Op.EQ, "nobody@x.example")]

CALLS: dict[str, Callable[[ReadOnlyPersistenceFacade], Any]] = {
    "read": lambda f: f.read("leads", EMAIL, limit=5),
    "read again (planned)": lambda f: f.read("leads", EMAIL, limit=5),
    "read with related rows": lambda f: f.read("clients", include=["leads"], limit=2),
    "count": lambda f: f.count("leads", EMAIL),
    "aggregate": lambda f: f.aggregate("leads", group_by=["status"]),
    "search": lambda f: f.search("inquiries", "refund", k=3),
    "check_filters": lambda f: f.check_filters("leads", EMAIL),
    "column_types": lambda f: f.column_types("leads"),
    "data_version": lambda f: f.data_version("leads"),
    "aread": lambda f: asyncio.run(f.aread("leads", EMAIL, limit=5)),
    "asearch": lambda f: asyncio.run(f.asearch("inquiries", "refund", k=3)),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_a_facade_call_checks_its_table_once(
    facade: ReadOnlyPersistenceFacade, checks: Counter[str], name: str
) -> None:
    CALLS[name](facade)
    expected = {"clients": 1, "leads": 1} if name == "read with related rows" else None
    asked = dict(checks)
    assert expected == asked if expected else list(asked.values()) == [1]


def test_a_kept_vocabulary_checks_no_table(
    facade: ReadOnlyPersistenceFacade, checks: Counter[str]
) -> None:
    facade.vocabulary()
    checks.clear()
    facade.vocabulary()
    facade.vocabulary()
    assert checks == Counter()


def test_a_run_asks_the_allow_list_only_about_the_table_it_reads(
    facade: ReadOnlyPersistenceFacade, checks: Counter[str]
) -> None:
    """One question: the plan, the conditions' check, the types, the version and the read
    each check the asked table; no other table is checked (it was 24 more, 3 per table)."""
    agent = RAGAgent(facade)
    agent.run("leads with email nobody@x.example")
    checks.clear()
    agent.run("leads with email someone@x.example")
    assert set(checks) == {"leads"}
    assert checks["leads"] <= 5
