"""A full paged scan of ``leads``: rows per second through the library, raw psycopg and the peer.

Run alone: ``python -m tests.benchmarks.pg_scan [--rows N] [--quick]``; ``make bench`` runs it
as one of its steps. Every contender reads the whole reference table in pages of 500 (the
largest page ``query_table`` serves), in ``id`` order, and must see every row exactly once:

* **raw psycopg, keyset**: ``SELECT * FROM leads WHERE id > $1 ORDER BY id LIMIT 500``, the next
  key taken from the last row (the floor);
* **facade.read, keyset**: ``id gt <last>`` ordered by ``id``: each page also carries the total of
  the rows still ahead (a count the raw loop does not make);
* **facade.read, offset**: ``offset`` moved on by ``next_offset``, what a tool caller pages by;
* **peer tool, keyset**: the raw statement with the key inlined, as a model would write it.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from persistence import Filter, Op, create_read_only_facade
from tests.benchmarks.common import Section, quiet_logging, scratch_database
from tests.benchmarks.peer import PeerTool, inline
from tests.benchmarks.report import fmt_time, markdown_table

PAGE = 500
_KEYSET = b"SELECT * FROM leads WHERE id > %s ORDER BY id LIMIT 500"


@dataclass
class ScanReport:
    section: Section
    figures: dict[str, Any]


def raw_keyset(conn: psycopg.Connection[Any]) -> int:
    cursor, last, seen = conn.cursor(), 0, 0
    while rows := cursor.execute(_KEYSET, (last,)).fetchall():
        seen, last = seen + len(rows), rows[-1][0]
    return seen


def facade_keyset(facade: Any) -> int:
    last, seen = 0, 0
    while rows := facade.read("leads", [Filter("id", Op.GT, last)], order=["id"], limit=PAGE).rows:
        seen, last = seen + len(rows), rows[-1]["id"]
    return seen


def facade_offset(facade: Any) -> int:
    offset, seen = 0, 0
    while True:
        page = facade.read("leads", order=["id"], limit=PAGE, offset=offset)
        seen += len(page.rows)
        offset += len(page.rows)  # the tools' next_offset
        if not page.rows or offset >= page.total_count:
            return seen


def peer_keyset(peer: PeerTool, rows: int) -> int:
    # The peer answers text: the next key is the last id, which the dense ids 1..n make known.
    seen = 0
    for last in range(0, rows, PAGE):
        text = peer.query(inline(_KEYSET, (last,)))
        if not text:
            break
        seen += min(PAGE, rows - last)
    return seen


def measure(rows: int, *, quick: bool, with_peer: bool) -> ScanReport:
    """Each contender scans the whole table (once in quick mode, best of three otherwise)."""
    repeats = 1 if quick else 3
    section = Section(
        f"Full paged scan (PostgreSQL, {rows:,} leads, pages of {PAGE})",
        "Every row once, in `id` order; each contender's row count is checked.",
        ("Contender", "Pages", "Time (best)", "Rows/s", "vs raw"),
    )
    figures: dict[str, Any] = {"rows": rows}
    with scratch_database(rows) as db:
        figures["database"] = db.name
        with (
            psycopg.connect(db.reader_dsn, autocommit=True) as conn,
            create_read_only_facade(kind="postgres", dsn=db.reader_dsn) as facade,
        ):
            contenders: dict[str, Callable[[], int]] = {
                "raw psycopg, keyset": lambda: raw_keyset(conn),
                "facade.read, keyset (id > last)": lambda: facade_keyset(facade),
                "facade.read, offset (next_offset)": lambda: facade_offset(facade),
            }
            peer = PeerTool(db.reader_dsn) if with_peer else None
            if peer is not None:
                contenders["peer tool, keyset"] = lambda: peer_keyset(peer, rows)
            try:
                best: dict[str, float] = {}
                for name, scan in contenders.items():
                    times = []
                    for _ in range(repeats):
                        start = time.perf_counter()
                        seen = scan()
                        times.append(time.perf_counter() - start)
                        if seen != rows:
                            raise AssertionError(f"{name} saw {seen} rows, not {rows}")
                    best[name] = min(times)
            finally:
                if peer is not None:
                    peer.close()
    base = best["raw psycopg, keyset"]
    for name, seconds in best.items():
        section.rows.append(
            (
                name,
                -(-rows // PAGE),
                fmt_time(seconds),
                f"{rows / seconds:,.0f}",
                f"{seconds / base:.2f}×",
            )
        )
    figures["rows_per_s"] = {name: rows / seconds for name, seconds in best.items()}
    section.notes.append(
        "The facade's page also carries the total count of the rows it filters, so a keyset "
        "page counts the rows still ahead and an offset page skips the rows behind: both grow "
        "with the table, and the whole scan grows with its square. The raw keyset loop counts "
        "nothing. For an export, read in keyset pages through the facade (the count's cost "
        "shows here) or use the database's own tools."
    )
    return ScanReport(section, figures)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-peer", action="store_true")
    args = parser.parse_args(argv)
    quiet_logging()
    report = measure(args.rows, quick=args.quick, with_peer=not args.no_peer)
    print("\n".join(markdown_table(report.section.columns, report.section.rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
