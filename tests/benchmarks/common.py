"""Shared parts of the benchmarks: timing, statistics and the scratch PostgreSQL database.

Every figure the report states is a ratio of medians measured in the same run, on the same data,
with the contenders interleaved in blocks so that drift (CPU frequency, autovacuum, the pool's
background threads) is charged evenly to all of them.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import statistics
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg
import structlog
from psycopg import sql
from psycopg.conninfo import make_conninfo

from tests.benchmarks.datagen import LEAD_COLUMNS, lead_tuples

ADMIN_DSN = os.environ.get("RAG_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


def quiet_logging() -> None:
    """Drop the library's debug events, as a production application would.

    The pipeline's step events are debug-level; rendering them is the application's cost.
    """
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


@dataclass(frozen=True)
class Stats:
    """Per-call seconds of one contender: median and the interquartile spread."""

    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def p25(self) -> float:
        return _quantile(self.samples, 0.25)

    @property
    def p75(self) -> float:
        return _quantile(self.samples, 0.75)

    @property
    def p95(self) -> float:
        """The 95th percentile: per call only when every sample is a single call."""
        return _quantile(self.samples, 0.95)

    @property
    def spread(self) -> float:
        """Interquartile range relative to the median (0.05 = the middle half within 5 %)."""
        return (self.p75 - self.p25) / self.median if self.median else 0.0

    def as_dict(self) -> dict[str, float | int]:
        return {
            "median_s": self.median,
            "p25_s": self.p25,
            "p75_s": self.p75,
            "p95_s": self.p95,
            "spread": self.spread,
            "n": len(self.samples),
        }


def _quantile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    if len(ordered) == 1:
        return ordered[0]
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def per_call(func: Callable[[], object], *, number: int) -> float:
    """Mean seconds per call over ``number`` back-to-back calls (one sample)."""
    start = time.perf_counter()
    for _ in range(number):
        func()
    return (time.perf_counter() - start) / number


def compare(
    contenders: Mapping[str, Callable[[], object]],
    *,
    rounds: int,
    number: int = 1,
    warmup: int = 3,
    block: int = 1,
) -> dict[str, Stats]:
    """Time every contender ``rounds`` times, interleaved; a sample is the mean of ``number`` calls.

    Each turn takes ``block`` samples of one contender in a row. Interleaving by blocks, not by
    single calls in a fixed order, keeps background work one contender leaves behind (a pool
    returning a connection) from landing on the next one's clock.
    """
    for func in contenders.values():
        for _ in range(warmup):
            func()
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    names = list(contenders)
    for index in range(rounds):
        # Alternate the order each round so neither contender always runs first.
        for name in names if index % 2 == 0 else reversed(names):
            for _ in range(block):
                samples[name].append(per_call(contenders[name], number=number))
    return {name: Stats(tuple(values)) for name, values in samples.items()}


@dataclass
class Section:
    """One table of the report: rows of named figures, plus free-text notes."""

    title: str
    intro: str = ""
    columns: tuple[str, ...] = ()
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Target:
    """A stated target, the figure measured for it and whether it is met."""

    name: str
    goal: str
    measured: str
    met: bool
    profile: str | None = None
    #: Missed, but by less than the measurements' own spread: said so, still a miss.
    tie: bool = False
    #: When missed: what separates the measurement from the goal, measured (e.g. the time per
    #: call above what the goal allows), so the report states the remaining gap.
    gap: str = ""
    #: When missed: why, in a sentence, from this run's own figures where they show it.
    reason: str = ""

    @property
    def verdict(self) -> str:
        if self.met:
            return "yes"
        return "**no** (within noise)" if self.tie else "**no**"


@dataclass(frozen=True)
class ScratchDatabase:
    """A filled scratch database: ``admin_dsn`` (owner, superuser) and ``reader_dsn`` (SELECT)."""

    name: str
    admin_dsn: str
    reader_dsn: str
    rows: int


@dataclass(frozen=True)
class LeadsTable:
    """How a scratch database declares ``leads`` and fills it.

    ``explicit_ids``: COPY the generated ids 1..n (and move the identity on), else leave ``id``
    to the column's default (``gen_random_uuid()`` on a uuid-keyed table).
    """

    ddl: str
    explicit_ids: bool = True


def copy_leads(
    conn: psycopg.Connection[Any], rows: int, *, seed: int, explicit_ids: bool = True
) -> None:
    """COPY ``rows`` generated leads into ``leads``; with ``explicit_ids``, ids 1..n and the
    sequence moved on, else every column but ``id``."""
    first = 0 if explicit_ids else 1
    statement = sql.SQL("COPY leads ({}) FROM STDIN").format(
        sql.SQL(", ").join(sql.Identifier(c) for c in LEAD_COLUMNS[first:])
    )
    with conn.cursor() as cursor, cursor.copy(statement) as copy:
        for row in lead_tuples(rows, seed=seed):
            copy.write_row(row[first:])
    if explicit_ids:
        conn.execute(b"SELECT setval(pg_get_serial_sequence('leads', 'id'), %s)", (max(rows, 1),))


@contextmanager
def scratch_database(
    rows: int, *, seed: int = 7, indexes: Iterable[str] = (), table: LeadsTable | None = None
) -> Iterator[ScratchDatabase]:
    """Create ``rag_bench_<random>`` with ``rows`` leads and a SELECT-only role; drop both after.

    ``table`` declares ``leads`` (default: the reference schema, bigint ids); every variant gets
    a plain btree index on ``email``. ``indexes`` are extra ``CREATE INDEX`` statements run after
    loading. The admin DSN comes from ``RAG_TEST_POSTGRES_DSN`` (default: postgres on 127.0.0.1)
    and must be a superuser's, since ``CREATE EXTENSION pg_trgm`` needs one.
    """
    from persistence.schema import TABLE_DDL

    with empty_database("rag_bench") as (name, admin_dsn, role, reader_dsn):
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            leads = table or LeadsTable(standalone(TABLE_DDL["leads"]))
            conn.execute(leads.ddl.encode())
            copy_leads(conn, rows, seed=seed, explicit_ids=leads.explicit_ids)
            conn.execute(b"CREATE INDEX leads_email_idx ON leads (email)")
            for statement in indexes:
                conn.execute(statement.encode())
            conn.execute(b"VACUUM ANALYZE leads")
            conn.execute(sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(sql.Identifier(role)))
            conn.execute(sql.SQL("GRANT SELECT ON leads TO {}").format(sql.Identifier(role)))
        yield ScratchDatabase(name, admin_dsn, reader_dsn, rows)


@contextmanager
def empty_database(prefix: str) -> Iterator[tuple[str, str, str, str]]:
    """Create ``<prefix>_<random>`` and a login role with no privilege yet; drop both after.

    Yields the database name, its admin DSN, the role's name and the role's DSN.
    """
    suffix = secrets.token_hex(4)
    name, role, password = f"{prefix}_{suffix}", f"{prefix}_{suffix}_r", secrets.token_hex(16)
    with psycopg.connect(ADMIN_DSN, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(role), sql.Literal(password)
            )
        )
    admin_dsn = make_conninfo(ADMIN_DSN, dbname=name)
    try:
        yield name, admin_dsn, role, make_conninfo(admin_dsn, user=role, password=password)
    finally:
        with psycopg.connect(ADMIN_DSN, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def standalone(ddl: str) -> str:
    """``ddl`` without its foreign keys: the benchmarks load leads alone, so their client and
    campaign ids refer to no loaded table."""
    return re.sub(r" references \w+\(id\)", "", ddl)


def postgres_available() -> bool:
    """True when the admin DSN accepts a connection within two seconds."""
    try:
        with psycopg.connect(ADMIN_DSN, connect_timeout=2):
            return True
    except psycopg.Error:
        return False
