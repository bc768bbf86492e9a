"""The ledger of what the fallback read: the only source of its records.

Every row a tool call reads is written here (table, a private copy of the row, ``retrieved_at``).
The model's final answer only *cites* rows by table and id; the records are the ledger entries
those citations find. A citation of a row never read finds nothing and is dropped.
"""

from __future__ import annotations

import copy
import datetime as dt
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["LedgerEntry", "ReadLedger", "id_key"]

Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """One row a tool call read: its table, a private copy of the row, and when it was read."""

    table: str
    row: Row
    retrieved_at: dt.datetime


class ReadLedger:
    """Every row the fallback's tool calls read in one run, keyed by (table, id).

    Thread-safe: the agent may run several tool calls of one step in parallel. The first read of a
    row is kept (its provenance is a real read either way); rows are deep-copied in and out.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str], LedgerEntry] = {}

    def record(self, table: str, rows: Sequence[Row], retrieved_at: dt.datetime) -> None:
        """Remember ``rows`` of ``table`` as read at ``retrieved_at``."""
        with self._lock:
            for row in rows:
                if row.get("id") is None:
                    continue  # without a key a row cannot be cited, so it cannot become a record
                key = (table, id_key(row["id"]))
                if key not in self._entries:
                    self._entries[key] = LedgerEntry(table, copy.deepcopy(row), retrieved_at)

    def lookup(self, table: str, row_id: object) -> LedgerEntry | None:
        """The entry for ``row_id`` of ``table``, if a tool call read it (ids match as text)."""
        with self._lock:
            entry = self._entries.get((table, id_key(row_id)))
        if entry is None:
            return None
        return LedgerEntry(entry.table, copy.deepcopy(entry.row), entry.retrieved_at)


def id_key(value: object) -> str:
    """A row id as the ledger compares it: canonical text (models cite 12 as "12" or 12.0)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value).strip()
