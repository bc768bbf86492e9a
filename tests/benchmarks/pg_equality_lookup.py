"""``facade.read`` against raw psycopg for indexed equality lookups, as ratios of medians.

Run: ``python -m tests.benchmarks.pg_equality_lookup [--rows N] [--rounds N]``.

It creates scratch databases (see ``common.scratch_database``): the reference ``leads`` (bigint
ids, a btree on ``email`` and one on ``lower(email)``) and a uuid-keyed one, and times, in the
same run and interleaved, for each lookup (``id = n``, ``email = v``, ``lower(email) =
lower(v)``, uuid ``id = u``):

* ``raw``: one psycopg connection executing the very statement the backend sends, with the same
  values (autocommit, so the server wraps it in an implicit transaction);
* ``facade``: ``create_read_only_facade(kind="postgres").read(...)`` as a least-privilege role.

Each sample is ``number`` calls in a row; reported per contender are the median wall time per
call and the median *client CPU* per call (``time.process_time``: this process only, so the
server's share of two shared cores and other tenants' load touch it far less than the wall
clock). The facade's own cost is the CPU difference.

It also compares the two ways of getting a page and its total in one statement (``count(*) OVER
()`` and a count subquery joined to a ``LATERAL`` page) on a wide, unfiltered ordered page.
``make bench`` (``tests.benchmarks.run``) covers the first comparison and more; this script is
the quick check while working on the backend's read path.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import psycopg

from persistence import Filter, Op, Order, Query, create_read_only_facade
from persistence.backends.postgres import sql as _pg_sql
from tests.benchmarks.common import ScratchDatabase, Stats, compare, scratch_database
from tests.benchmarks.lookup_scenarios import LOWER_EMAIL_INDEX, UUID_LEADS
from tests.benchmarks.pg_suite import raw_statement

#: Calls per sample: short samples, many rounds, so that both contenders of a round see the
#: same state of a shared machine.
NUMBER = 10


@dataclass(frozen=True)
class Timing:
    """Per-call wall seconds and client CPU seconds of one contender, one sample each."""

    wall: tuple[float, ...]
    cpu: tuple[float, ...]

    @property
    def wall_median(self) -> float:
        return statistics.median(self.wall)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu)


def paired_ratio(ours: tuple[float, ...], base: tuple[float, ...]) -> float:
    """The median of the per-round ratios: each round's two samples were taken back to back."""
    return statistics.median(o / b for o, b in zip(ours, base, strict=True) if b > 0)


def timed(
    contenders: Mapping[str, Callable[[], object]], *, rounds: int, number: int = NUMBER
) -> dict[str, Timing]:
    """Every contender ``rounds`` times, interleaved (order alternating each round)."""
    for func in contenders.values():
        for _ in range(5):
            func()
    wall: dict[str, list[float]] = {name: [] for name in contenders}
    cpu: dict[str, list[float]] = {name: [] for name in contenders}
    names = list(contenders)
    for index in range(rounds):
        for name in names if index % 2 == 0 else reversed(names):
            func = contenders[name]
            start, start_cpu = time.perf_counter(), time.process_time()
            for _ in range(number):
                func()
            cpu[name].append((time.process_time() - start_cpu) / number)
            wall[name].append((time.perf_counter() - start) / number)
    return {name: Timing(tuple(wall[name]), tuple(cpu[name])) for name in contenders}


def lookup(db: ScratchDatabase, flt: Filter, rounds: int, expect: int = 1) -> dict[str, Timing]:
    """Raw psycopg and ``facade.read`` for one equality filter (page of 50 and its total)."""
    with (
        create_read_only_facade(kind="postgres", dsn=db.reader_dsn) as facade,
        psycopg.connect(db.reader_dsn, autocommit=True) as conn,
    ):
        statement, params = raw_statement(Query("leads", (flt,), limit=50), conn)
        cursor = conn.cursor()
        assert facade.read("leads", [flt], limit=50).total_count == expect
        assert len(cursor.execute(statement, params).fetchall()) == expect

        def raw() -> object:
            return cursor.execute(statement, params).fetchall()

        def ours() -> object:
            return facade.read("leads", [flt], limit=50)

        return timed({"raw psycopg": raw, "facade.read": ours}, rounds=rounds * 5)


def equality_lookups(db: ScratchDatabase, rounds: int) -> dict[str, dict[str, Timing]]:
    """``id = n``, ``email = v`` and ``lower(email) = lower(v)`` on the reference table."""
    with psycopg.connect(db.admin_dsn) as conn:
        row = conn.execute(b"SELECT email FROM leads WHERE id = %s", (db.rows // 2,)).fetchone()
    assert row is not None
    email = str(row[0])
    return {
        "id = n": lookup(db, Filter("id", Op.EQ, db.rows // 3), rounds),
        "email = v": lookup(db, Filter("email", Op.EQ, email), rounds),
        "lower(email) = lower(v)": lookup(db, Filter("email", Op.IEQ, email.upper()), rounds),
    }


def uuid_lookup(rows: int, rounds: int) -> dict[str, Timing]:
    """``id = u`` on a uuid-keyed ``leads``, the id given as text (as tools hand it over)."""
    with scratch_database(rows, table=UUID_LEADS) as db:
        with psycopg.connect(db.admin_dsn) as conn:
            row = conn.execute(b"SELECT id FROM leads ORDER BY email LIMIT 1").fetchone()
        assert row is not None
        return lookup(db, Filter("id", Op.EQ, str(row[0])), rounds)


def page_and_total(db: ScratchDatabase, rounds: int) -> dict[str, Stats]:
    """Per-call times of the two one-statement page-and-total shapes on an ordered, wide page."""
    query = Query("leads", (), None, (Order("created_at", descending=True),), 50, 100)
    columns = ("id", "email", "company_name", "score", "created_at")
    lateral = _pg_sql.build_read(query, "public", columns, True).as_bytes(None)
    window = (
        b"SELECT count(*) OVER (), id, email, company_name, score, created_at FROM public.leads "
        b"ORDER BY created_at DESC, id LIMIT %s OFFSET %s"
    )
    shapes: dict[str, tuple[bytes, list[Any]]] = {
        "lateral count subquery": (lateral, _pg_sql.read_params(query)),
        "count(*) OVER ()": (window, [50, 100]),
    }
    with psycopg.connect(db.admin_dsn, autocommit=True) as conn:
        calls = {
            label: (lambda s=statement, p=params: conn.execute(s, p).fetchall())
            for label, (statement, params) in shapes.items()
        }
        return compare(calls, rounds=rounds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--no-uuid", action="store_true", help="skip the uuid-keyed table")
    args = parser.parse_args(argv)
    indexes = ("CREATE INDEX leads_created_at_idx ON leads (created_at)", LOWER_EMAIL_INDEX)
    with scratch_database(args.rows, indexes=indexes) as db:
        results = equality_lookups(db, args.rounds)
        if not args.no_uuid:
            results["uuid id = u"] = uuid_lookup(args.rows, args.rounds)
        print(f"indexed equality lookups on {args.rows} rows (page of 50 + total), per call:")
        print(
            f"  {'lookup':24s} {'raw wall':>9s} {'facade':>9s} {'ratio':>6s}   "
            f"{'raw cpu':>8s} {'facade':>8s} {'ratio':>6s} {'own cost':>9s}"
        )
        for name, timings in results.items():
            raw, ours = timings["raw psycopg"], timings["facade.read"]
            print(
                f"  {name:24s} {raw.wall_median * 1e6:7.1f}us {ours.wall_median * 1e6:7.1f}us "
                f"{paired_ratio(ours.wall, raw.wall):5.2f}x   "
                f"{raw.cpu_median * 1e6:6.1f}us {ours.cpu_median * 1e6:6.1f}us "
                f"{paired_ratio(ours.cpu, raw.cpu):5.2f}x "
                f"{(ours.cpu_median - raw.cpu_median) * 1e6:7.1f}us"
            )
        print(
            "  (medians per call; ratios: median of per-round ratios; target wall ratio <= 1.30x;"
            " own cost = facade CPU - raw CPU)"
        )
        print("page of 50 at offset 100, ordered by created_at desc, with its total:")
        for label, result in page_and_total(db, max(10, args.rounds // 2)).items():
            print(f"  {label:24s} median {result.median * 1e3:8.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
