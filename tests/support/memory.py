"""Memory-backed doubles for facade tests: a backend that records the calls reaching it, and a
store holding one lead."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from persistence import (
    Filter,
    MemoryBackend,
    MemoryStore,
    Page,
    Query,
    create_persistence_agent,
)

__all__ = ["SpyBackend", "one_lead_store"]


def one_lead_store() -> MemoryStore:
    """A new store with one lead (id 1) that has an email, a phone and a company name."""
    store = MemoryStore()
    agent = create_persistence_agent(kind="memory", store=store)
    agent.write("leads", {"email": "a@x.io", "phone": "555-0100", "company_name": "Acme"})
    return store


class SpyBackend(MemoryBackend):
    """Appends ``"read"``, ``"count"``, ``"insert"`` or ``"delete"`` to ``calls`` on each call."""

    def __init__(self, store: MemoryStore | None = None) -> None:
        super().__init__(MemoryStore() if store is None else store)
        self.calls: list[str] = []

    def read(self, query: Query) -> Page:
        self.calls.append("read")
        return super().read(query)

    def count(self, table: str, filters: Sequence[Filter]) -> int:
        self.calls.append("count")
        return super().count(table, filters)

    def insert(self, table: str, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        self.calls.append("insert")
        return super().insert(table, rows)

    def delete(self, table: str, filters: Sequence[Filter]) -> int:
        self.calls.append("delete")
        return super().delete(table, filters)
