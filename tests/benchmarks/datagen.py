"""A deterministic generator of ``leads``: the same rows, by seed, in memory and in PostgreSQL.

Company names are a prefix and a suffix syllable plus a legal form, so a search term has a known
selectivity: ``"globex"`` matches the names built from ``Glob`` + ``ex`` (about 1 row in 1000),
the kind of needle an agent looks for. Ids are explicit (1..n), so an id lookup has the same
answer on every backend.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Iterator
from typing import Any

from persistence import MemoryStore

LEAD_COLUMNS = (
    "id",
    "client_id",
    "campaign_id",
    "email",
    "first_name",
    "last_name",
    "company_name",
    "title",
    "phone",
    "status",
    "score",
    "created_at",
)
#: A selective ``icontains`` term (about 0.1 % of rows) and the question the agent is asked.
NEEDLE = "globex"
NEEDLE_QUESTION = "leads at Globex"

_PREFIXES = [
    "Acm",
    "Glob",
    "Init",
    "Umbr",
    "Hool",
    "Stark",
    "Wayn",
    "Vand",
    "Tyr",
    "Cyber",
    "Omni",
    "Sol",
    "Nov",
    "Quant",
    "Hyper",
    "Blu",
    "Red",
    "Gran",
    "Zen",
    "Arc",
    "Vert",
    "Lum",
    "Terra",
    "Aqua",
    "Pyro",
    "Nex",
    "Ori",
    "Kron",
    "Vel",
    "Astr",
    "Cor",
    "Dyn",
    "Flux",
    "Helio",
    "Ion",
    "Jet",
    "Kin",
    "Lyr",
    "Mag",
    "Neo",
]
_SUFFIXES = [
    "ex",
    "ix",
    "on",
    "ar",
    "tech",
    "ly",
    "io",
    "ia",
    "os",
    "um",
    "ent",
    "ics",
    "soft",
    "labs",
    "works",
    "ware",
    "corp",
    "net",
    "data",
    "ai",
    "a",
    "o",
    "us",
    "is",
    "yx",
]
_LEGAL = ("Inc.", "GmbH", "Ltd", "LLC", "SA")
_FIRST = [
    "Ada",
    "Alan",
    "Grace",
    "Linus",
    "Barbara",
    "Ken",
    "Margaret",
    "Dennis",
    "Frances",
    "Edsger",
    "Radia",
    "Donald",
]
_LAST = [
    "Lovelace",
    "Turing",
    "Hopper",
    "Torvalds",
    "Liskov",
    "Thompson",
    "Hamilton",
    "Ritchie",
    "Allen",
    "Dijkstra",
]
_TITLES = ("CTO", "CEO", "VP Sales", "Engineer", "Head of Ops", None)
_STATUSES = ("new", "contacted", "qualified", "won", "lost", None)
_EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def lead_tuples(rows: int, *, seed: int = 7) -> Iterator[tuple[Any, ...]]:
    """``rows`` leads as tuples in ``LEAD_COLUMNS`` order; the same seed gives the same rows."""
    rng = random.Random(seed)
    choice, randint = rng.choice, rng.randint
    for i in range(1, rows + 1):
        first, last = choice(_FIRST), choice(_LAST)
        yield (
            i,
            1 + i % 50,
            100 + i % 400,
            f"{first.lower()}.{last.lower()}{i}@example.com",
            first,
            last,
            f"{choice(_PREFIXES)}{choice(_SUFFIXES)} {choice(_LEGAL)}",
            choice(_TITLES),
            None if i % 3 else f"+1-555-{i % 10_000:04d}",
            choice(_STATUSES),
            randint(0, 100),
            _EPOCH - dt.timedelta(minutes=i),
        )


def lead_dicts(rows: int, *, seed: int = 7) -> Iterator[dict[str, Any]]:
    """The same leads as dicts."""
    for values in lead_tuples(rows, seed=seed):
        yield dict(zip(LEAD_COLUMNS, values, strict=True))


def memory_store(rows: int, *, seed: int = 7) -> MemoryStore:
    """A new ``MemoryStore`` holding ``rows`` generated leads."""
    store = MemoryStore()
    store.insert("leads", list(lead_dicts(rows, seed=seed)))
    return store
