"""``facade.read`` against raw psycopg for an indexed equality lookup, as a ratio of medians.

Run: ``python -m tests.benchmarks.pg_equality_lookup [--rows N] [--rounds N]``.

It creates a scratch database (see ``common.scratch_database``), and times, in the same run and
interleaved:

* ``raw``: one psycopg connection executing the very statement the backend sends, with the same
  values (autocommit, so the server wraps it in an implicit transaction);
* ``facade``: ``create_read_only_facade(kind="postgres").read(...)`` as a least-privilege role.

It also compares the two ways of getting a page and its total in one statement (``count(*) OVER
()`` and a count subquery joined to a ``LATERAL`` page) on a wide, unfiltered ordered page.
``make bench`` (``tests.benchmarks.run``) covers the first comparison and more; this script is
the quick check while working on the backend's read path.
"""

from __future__ import annotations

import argparse
from typing import Any

import psycopg

from persistence import Filter, Op, Order, Query, create_read_only_facade
from persistence.backends import _pg_sql
from tests.benchmarks.common import ScratchDatabase, Stats, compare, scratch_database
from tests.benchmarks.pg_suite import raw_statement


def equality_lookup(db: ScratchDatabase, rounds: int) -> dict[str, Stats]:
    """Per-call times of raw psycopg and ``facade.read`` for ``email = <one value>``."""
    with psycopg.connect(db.admin_dsn) as conn:
        row = conn.execute(b"SELECT email FROM leads WHERE id = %s", (db.rows // 2,)).fetchone()
    assert row is not None
    flt = Filter("email", Op.EQ, str(row[0]))
    statement, params = raw_statement(Query("leads", (flt,), limit=50))
    with (
        create_read_only_facade(kind="postgres", dsn=db.reader_dsn) as facade,
        psycopg.connect(db.reader_dsn, autocommit=True) as conn,
    ):
        cursor = conn.cursor()
        assert facade.read("leads", [flt], limit=50).total_count == 1

        def raw() -> object:
            return cursor.execute(statement, params).fetchall()

        def ours() -> object:
            return facade.read("leads", [flt], limit=50)

        return compare({"raw psycopg": raw, "facade.read": ours}, rounds=rounds, number=50)


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
    args = parser.parse_args(argv)
    index = "CREATE INDEX leads_created_at_idx ON leads (created_at)"
    with scratch_database(args.rows, indexes=(index,)) as db:
        stats = equality_lookup(db, args.rounds)
        raw, ours = stats["raw psycopg"].median, stats["facade.read"].median
        print(f"indexed equality lookup on {args.rows} rows")
        print(f"  raw psycopg   median {raw * 1e6:8.1f} us")
        print(f"  facade.read   median {ours * 1e6:8.1f} us")
        print(f"  ratio of medians      {ours / raw:6.2f}x   (target <= 1.30x)")
        print("page of 50 at offset 100, ordered by created_at desc, with its total:")
        for label, result in page_and_total(db, max(10, args.rounds // 2)).items():
            print(f"  {label:24s} median {result.median * 1e3:8.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
