"""The bundled sample dataset of the eight business tables, and its loader.

The rows are shipped as package data (``rag_agent/data/<table>.json``), generated from a fixed
seed by ``scripts/generate_sample.py`` (outside the library: nothing here imports it), so every
install holds the same rows; a test checks that the shipped files equal the generator's output.
What the rows show (Acme suffixes, a large Globex, realistic gaps) is told in the script.

Loading::

    from persistence import MemoryStore, create_read_only_facade
    from rag_agent.ops.sample import load_sample

    store = MemoryStore()
    counts = load_sample(store)                 # every table
    facade = create_read_only_facade(kind="memory", store=store)
    assert facade.count("leads") == counts["leads"]

``load_sample`` also takes a :class:`~persistence.PersistenceAgent` (the governance tables
``clients`` and ``campaigns`` are then skipped: no agent may write them) or a backend (everything,
a deployment step below the access policy). Loading is idempotent: rows carry fixed ids and are
upserted.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from typing import Any

from persistence import (
    GOVERNANCE_TABLES,
    Backend,
    ConfigurationError,
    MemoryStore,
    PersistenceAgent,
)

__all__ = [
    "ACME_COMPANIES",
    "LARGE_COMPANY",
    "SAMPLE_SEED",
    "SAMPLE_TABLES",
    "LoadTarget",
    "load_sample",
    "sample_rows",
]

Row = dict[str, Any]
LoadTarget = PersistenceAgent | MemoryStore | Backend

#: The seed the shipped files were generated with.
SAMPLE_SEED = 20240917
#: Tables in load order: a row's references are loaded before it.
SAMPLE_TABLES: tuple[str, ...] = (
    "clients",
    "campaigns",
    "sequences",
    "leads",
    "staging_leads",
    "conversations",
    "messages",
    "inquiries",
)
#: The "Acme …" companies: one brand, many legal suffixes, for the reformulation demo.
ACME_COMPANIES: tuple[str, ...] = (
    "Acme Inc.",
    "Acme GmbH",
    "Acme Holdings Ltd",
    "Acme Logistics LLC",
    "Acme Robotics S.A.",
    "Acme Analytics Pty Ltd",
)
#: The company with more leads than the default summary threshold (200).
LARGE_COMPANY = "Globex Corporation"
_TIMESTAMP_COLUMNS = frozenset(
    {"created_at", "started_at", "imported_at", "sent_at", "received_at"}
)


def _decode(text: str) -> list[Row]:
    header, *lines = text.splitlines()
    columns = json.loads(header)["columns"]
    rows = []
    for line in lines:
        row = dict(zip(columns, json.loads(line), strict=True))
        for column in _TIMESTAMP_COLUMNS.intersection(row):
            if row[column] is not None:
                row[column] = dt.datetime.fromisoformat(row[column])
        rows.append(row)
    return rows


def sample_rows(table: str) -> list[Row]:
    """The shipped sample rows of ``table`` (timestamps as timezone-aware ``datetime``)."""
    if table not in SAMPLE_TABLES:
        raise ConfigurationError(
            f"no sample data for table {table!r}; tables: {', '.join(SAMPLE_TABLES)}"
        )
    text = resources.files("rag_agent").joinpath("data", f"{table}.json").read_text("utf-8")
    return _decode(text)


def load_sample(
    target: LoadTarget, *, tables: Iterable[str] | None = None, batch_size: int = 500
) -> dict[str, int]:
    """Load the sample rows into ``target``; return table -> rows loaded.

    ``target`` is a ``MemoryStore``, a backend, or a ``PersistenceAgent``. An agent never
    writes the governance tables (``clients``, ``campaigns``): they are skipped and absent from
    the result. Rows are upserted on ``id``, so loading twice leaves one copy.
    """
    wanted = SAMPLE_TABLES if tables is None else tuple(tables)
    unknown = sorted(set(wanted) - set(SAMPLE_TABLES))
    if unknown:
        raise ConfigurationError(
            f"no sample data for {', '.join(map(repr, unknown))}; "
            f"tables: {', '.join(SAMPLE_TABLES)}"
        )
    if batch_size < 1:
        raise ConfigurationError(f"batch_size must be at least 1, got {batch_size}")
    loaded: dict[str, int] = {}
    for table in (t for t in SAMPLE_TABLES if t in wanted):
        if isinstance(target, PersistenceAgent) and table in GOVERNANCE_TABLES:
            continue
        rows = sample_rows(table)
        for start in range(0, len(rows), batch_size):
            _upsert(target, table, rows[start : start + batch_size])
        loaded[table] = len(rows)
    return loaded


def _upsert(target: LoadTarget, table: str, rows: Sequence[Mapping[str, Any]]) -> None:
    if isinstance(target, PersistenceAgent):
        target.upsert(table, rows, on_conflict="id")
    elif isinstance(target, MemoryStore | Backend):
        target.upsert(table, rows, "id")
    else:
        raise ConfigurationError(
            "load_sample needs a MemoryStore, a backend or a PersistenceAgent, "
            f"not {type(target).__name__}"
        )
