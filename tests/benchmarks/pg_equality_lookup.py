"""``facade.read`` against raw psycopg for an indexed equality lookup, as a ratio of medians.

Run: ``python -m tests.benchmarks.pg_equality_lookup [--rows N] [--iterations N]``.

It creates a scratch database (admin DSN: ``RAG_TEST_POSTGRES_DSN``, default postgres on
127.0.0.1), fills ``leads`` with ``--rows`` rows and an index on ``email``, and times, in the same
run and interleaved:

* ``raw``: one psycopg connection executing the very statement the backend sends, with the same
  values (autocommit, so the server wraps it in an implicit transaction), through one reused
  cursor (the strict baseline) and through ``conn.execute`` (psycopg's everyday API);
* ``facade``: ``create_read_only_facade(kind="postgres").read(...)`` as a least-privilege role,
  which adds the policy checks, a ``READ ONLY`` transaction and ``SET LOCAL statement_timeout``.

It also compares the two ways of getting a page and its total in one statement (``count(*) OVER
()`` and a count subquery joined to a ``LATERAL`` page) on a wide, unfiltered ordered page.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg
from psycopg.conninfo import make_conninfo

from persistence import Filter, Op, Order, Query, create_read_only_facade
from persistence.backends import _pg_sql
from persistence.schema import TABLE_COLUMNS, TABLE_DDL

ADMIN_DSN = os.environ.get("RAG_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


@contextmanager
def scratch_database(rows: int) -> Iterator[tuple[str, str]]:
    """Yield ``(admin_dsn, reader_dsn)`` of a filled scratch database; drop it afterwards."""
    suffix = secrets.token_hex(4)
    name, role, password = f"rag_bench_{suffix}", f"rag_bench_{suffix}_r", secrets.token_hex(16)
    with psycopg.connect(ADMIN_DSN, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}".encode())
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'".encode())
    admin_dsn = make_conninfo(ADMIN_DSN, dbname=name)
    try:
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute(TABLE_DDL["leads"].encode())
            conn.execute(
                b"INSERT INTO leads (email, company_name, score, status, created_at) "
                b"SELECT 'user' || g || '@example.com', 'Company ' || (g %% 997), g %% 100, "
                b"'new', now() - g * interval '1 minute' FROM generate_series(1, %s) AS g",
                (rows,),
            )
            conn.execute(b"CREATE INDEX leads_email_idx ON leads (email)")
            conn.execute(b"CREATE INDEX leads_created_at_idx ON leads (created_at)")
            conn.execute(b"VACUUM ANALYZE leads")
            conn.execute(f"GRANT USAGE ON SCHEMA public TO {role}".encode())
            conn.execute(f"GRANT SELECT ON leads TO {role}".encode())
        yield admin_dsn, make_conninfo(admin_dsn, user=role, password=password)
    finally:
        with psycopg.connect(ADMIN_DSN, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)".encode())
            conn.execute(f"DROP ROLE IF EXISTS {role}".encode())


def timed(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def equality_lookup(reader_dsn: str, rows: int, iterations: int) -> dict[str, float]:
    """Median seconds per call for ``email = <one value>``: two raw baselines and the facade."""
    email = f"user{rows // 2}@example.com"
    flt = Filter("email", Op.EQ, email)
    facade = create_read_only_facade(kind="postgres", dsn=reader_dsn)
    # The backend projects every column in catalog order, which is the reference schema's order.
    statement = _pg_sql.build_read(
        Query("leads", (flt,)), "public", TABLE_COLUMNS["leads"], True
    ).as_bytes(None)
    params = _pg_sql.read_params(Query("leads", (flt,)))
    with facade, psycopg.connect(reader_dsn, autocommit=True) as conn:
        cursor = conn.cursor()
        cases: dict[str, Callable[[], object]] = {
            # The strictest baseline: one connection, one reused cursor.
            "raw cursor.execute": lambda: cursor.execute(statement, params).fetchall(),
            # psycopg's everyday API: a new cursor per call.
            "raw conn.execute": lambda: conn.execute(statement, params).fetchall(),
            "facade.read": lambda: facade.read("leads", [flt]),
        }
        assert facade.read("leads", [flt]).total_count == 1
        for _ in range(50):  # warm up: connections, prepared statements, caches
            for call in cases.values():
                call()
        # Alternating blocks of calls, so that drift in the machine's load hits every case alike.
        times: dict[str, list[float]] = {label: [] for label in cases}
        block = 100
        for _ in range(max(1, iterations // block)):
            for label, call in cases.items():
                times[label].extend(timed(call) for _ in range(block))
    return {label: statistics.median(values) for label, values in times.items()}


def page_and_total(admin_dsn: str, iterations: int) -> dict[str, float]:
    """Median seconds of the two one-statement page-and-total shapes on an ordered, wide page."""
    query = Query("leads", (), None, (Order("created_at", descending=True),), 50, 100)
    columns = ("id", "email", "company_name", "score", "created_at")
    lateral = _pg_sql.build_read(query, "public", columns, True).as_bytes(None)
    window = (
        b"SELECT count(*) OVER (), id, email, company_name, score, created_at FROM public.leads "
        b"ORDER BY created_at DESC, id LIMIT %s OFFSET %s"
    )
    shapes = {
        "lateral count subquery": (lateral, _pg_sql.read_params(query)),
        "count(*) OVER ()": (window, [50, 100]),
    }
    results: dict[str, list[float]] = {label: [] for label in shapes}
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        for _ in range(3):
            for statement, params in shapes.values():
                conn.execute(statement, params).fetchall()
        for _ in range(iterations):
            for label, (statement, params) in shapes.items():
                results[label].append(
                    timed(lambda s=statement, p=params: conn.execute(s, p).fetchall())
                )
    return {label: statistics.median(times) for label, times in results.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--iterations", type=int, default=2000)
    args = parser.parse_args(argv)
    with scratch_database(args.rows) as (admin_dsn, reader_dsn):
        medians = equality_lookup(reader_dsn, args.rows, args.iterations)
        print(f"indexed equality lookup on {args.rows} rows, {args.iterations} runs each")
        for label, seconds in medians.items():
            print(f"  {label:20s} median {seconds * 1e6:8.1f} us")
        ours = medians["facade.read"]
        for label in ("raw cursor.execute", "raw conn.execute"):
            print(
                f"  ratio facade.read / {label:20s} {ours / medians[label]:5.2f}x  (target 1.30x)"
            )
        shapes = page_and_total(admin_dsn, max(20, args.iterations // 50))
        print("page of 50 at offset 100, ordered by created_at desc, with its total:")
        for label, seconds in shapes.items():
            print(f"  {label:24s} median {seconds * 1e3:8.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
