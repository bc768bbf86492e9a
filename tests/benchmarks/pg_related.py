"""Related rows on PostgreSQL: 50 leads with their conversations (and their messages) through
``facade.read(..., include=...)`` vs the naive loop a caller writes without it (one read per
parent, N+1).

Run alone: ``python -m tests.benchmarks.pg_related [--leads N] [--quick] [--no-peer]``;
``make bench`` runs it as one of its steps. The scratch database has the reference schema with
its foreign keys: ``--leads`` leads (default 20,000), three conversations each, two messages per
conversation (ids in insertion order), indexed on the foreign-key columns as a deployment would
be. The library's contenders read through one read-only facade over the network loopback; raw
psycopg runs the statements a careful engineer writes, the peer tool the same as text. Every
answer (the same children, in the same order) is checked once before timing.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from persistence import Filter, Op, ReadOnlyPersistenceFacade, create_read_only_facade
from persistence.schema import REFERENCE
from tests.benchmarks.common import Section, Stats, compare, empty_database, quiet_logging
from tests.benchmarks.peer import PeerTool, inline
from tests.benchmarks.report import fmt_stats, ratio

PARENTS = 50
_FILL = (
    "INSERT INTO leads (id, email) SELECT g, 'lead' || g || '@x.io' FROM generate_series(1, %s) g",
    "INSERT INTO conversations (id, lead_id, channel) "
    "SELECT g, (g - 1) / 3 + 1, 'email' FROM generate_series(1, 3 * %s) g",
    "INSERT INTO messages (id, conversation_id, body) "
    "SELECT g, (g - 1) / 2 + 1, 'message ' || g FROM generate_series(1, 6 * %s) g",
    "CREATE INDEX ON conversations (lead_id)",
    "CREATE INDEX ON messages (conversation_id)",
    "VACUUM ANALYZE",
)


@dataclass(frozen=True)
class RelatedReport:
    """The report's section and the raw figures."""

    section: Section
    figures: dict[str, Any]


@contextmanager
def related_database(leads: int) -> Iterator[str]:
    """A scratch database with the reference schema, filled; yields a SELECT-only DSN."""
    with empty_database("rag_rel") as (_, admin_dsn, role, reader_dsn):
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            for statement in REFERENCE.statements():
                conn.execute(statement.encode())
            for statement in _FILL:
                conn.execute(statement.encode(), (leads,) if "%s" in statement else None)
            conn.execute(sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(sql.Identifier(role)))
            conn.execute(
                sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA public TO {}").format(
                    sql.Identifier(role)
                )
            )
        yield reader_dsn


def _parents(leads: int) -> Filter:
    # Fifty leads spread over the table, not its first page.
    step = max(1, leads // PARENTS)
    return Filter("id", Op.IN, [1 + i * step for i in range(PARENTS)])


def included(facade: ReadOnlyPersistenceFacade, leads: int, nested: bool) -> list[Any]:
    """The leads with their conversations (and messages) through ``include``."""
    include = ["conversations.messages"] if nested else ["conversations"]
    rows = facade.read("leads", [_parents(leads)], include=include, limit=PARENTS).rows
    return [
        [
            (c["id"], [m["id"] for m in c["messages"]] if nested else None)
            for c in row["conversations"]
        ]
        for row in rows
    ]


def naive(facade: ReadOnlyPersistenceFacade, leads: int, nested: bool) -> list[Any]:
    """The same through one read per parent (the N+1 loop)."""
    rows = facade.read("leads", [_parents(leads)], limit=PARENTS).rows
    answer = []
    for row in rows:
        children = facade.read(
            "conversations", [Filter("lead_id", Op.EQ, row["id"])], order=["id"], limit=20
        ).rows
        answer.append(
            [
                (
                    c["id"],
                    [
                        m["id"]
                        for m in facade.read(
                            "messages",
                            [Filter("conversation_id", Op.EQ, c["id"])],
                            order=["id"],
                            limit=20,
                        ).rows
                    ]
                    if nested
                    else None,
                )
                for c in children
            ]
        )
    return answer


_RAW_LEADS = b"SELECT * FROM leads WHERE id = ANY(%s) ORDER BY id LIMIT 50"
_RAW_CONVERSATIONS = b"SELECT id, lead_id FROM conversations WHERE lead_id = ANY(%s) ORDER BY id"
_RAW_MESSAGES = (
    b"SELECT id, conversation_id FROM messages WHERE conversation_id = ANY(%s) ORDER BY id"
)


def raw_sql(cursor: psycopg.Cursor[Any], leads: int, nested: bool) -> list[Any]:
    """The same answer from the statements a careful engineer writes: the parents, then each
    level's children by ``= ANY`` of the parent keys, grouped in Python."""
    ids = list(_parents(leads).value)
    parents = [row[0] for row in cursor.execute(_RAW_LEADS, (ids,)).fetchall()]
    children: dict[int, list[int]] = {parent: [] for parent in parents}
    for child, parent in cursor.execute(_RAW_CONVERSATIONS, (parents,)).fetchall():
        children[parent].append(child)
    messages: dict[int, list[int]] = {}
    if nested:
        every = [child for kids in children.values() for child in kids]
        messages = {child: [] for child in every}
        for message, child in cursor.execute(_RAW_MESSAGES, (every,)).fetchall():
            messages[child].append(message)
    return [
        [(child, messages[child] if nested else None) for child in children[parent]]
        for parent in parents
    ]


def peer_sql(peer: PeerTool, leads: int, nested: bool) -> str:
    """The peer given the same statements, the keys inlined, as a model would write them."""
    ids = list(_parents(leads).value)
    answer = peer.query(inline(_RAW_LEADS, (ids,)))
    # Dense ids: lead n has conversations 3n-2..3n, conversation c messages 2c-1..2c.
    conversations = [3 * lead - k for lead in ids for k in (2, 1, 0)]
    answer += peer.query(inline(_RAW_CONVERSATIONS, (ids,)))
    if nested:
        answer += peer.query(inline(_RAW_MESSAGES, (conversations,)))
    return answer


def measure(leads: int, *, quick: bool, with_peer: bool = False) -> RelatedReport:
    """Time include vs the N+1 loop, one and two levels deep."""
    rounds = 5 if quick else 21
    section = Section(
        f"Related rows: {PARENTS} leads with their children (PostgreSQL, {leads:,} leads)",
        intro=(
            "`facade.read(..., include=...)` (one statement for the page, then one per level: "
            "`row_number()` caps each parent's children) against the loop a caller writes "
            "without it (one `facade.read` per parent), raw psycopg running the statements a "
            "careful engineer writes (the parents, then each level by `= ANY` of their keys, "
            "grouped in Python) and the peer tool given those statements as text. Same answers "
            "(checked)."
        ),
        columns=(
            "case",
            "raw psycopg",
            "include",
            "N+1 loop",
            "peer tool",
            "include / raw",
            "loop / include",
        ),
    )
    figures: dict[str, Any] = {"leads": leads, "parents": PARENTS}
    with (
        related_database(leads) as dsn,
        create_read_only_facade(kind="postgres", dsn=dsn) as facade,
        psycopg.connect(dsn, autocommit=True) as conn,
    ):
        cursor = conn.cursor()
        peer = PeerTool(dsn) if with_peer else None
        for nested, label, statements in (
            (False, "conversations", (2, 1 + PARENTS)),
            (True, "conversations and messages", (3, 1 + 4 * PARENTS)),
        ):
            answer = included(facade, leads, nested)
            if answer != naive(facade, leads, nested) or answer != raw_sql(cursor, leads, nested):
                raise AssertionError(f"include, the N+1 loop and raw SQL disagree on {label}")
            contenders: dict[str, Callable[[], object]] = {
                "raw": lambda n=nested: raw_sql(cursor, leads, n),
                "include": lambda n=nested: included(facade, leads, n),
                "naive": lambda n=nested: naive(facade, leads, n),
            }
            if peer is not None:
                last = answer[-1][-1][0]  # the last conversation id must be in the peer's text
                if f"({last}, " not in peer_sql(peer, leads, nested):
                    raise AssertionError(f"the peer's answer lacks conversation {last}")
                contenders["peer"] = lambda n=nested: peer_sql(peer, leads, n)
            stats: dict[str, Stats] = compare(contenders, rounds=rounds)
            section.rows.append(
                (
                    f"{label} ({statements[0]} vs {statements[1]} statements)",
                    fmt_stats(stats["raw"]),
                    fmt_stats(stats["include"]),
                    fmt_stats(stats["naive"]),
                    fmt_stats(stats["peer"]) if "peer" in stats else "—",
                    ratio(stats["include"], stats["raw"]),
                    ratio(stats["naive"], stats["include"]),
                )
            )
            figures[label] = {name: s.as_dict() for name, s in stats.items()}
        if peer is not None:
            peer.close()
    return RelatedReport(section, figures)


def main() -> None:
    """Print the section as Markdown-ish text."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--leads", type=int, default=20_000)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-peer", action="store_true", help="skip the peer tool")
    args = parser.parse_args()
    quiet_logging()
    report = measure(args.leads, quick=args.quick, with_peer=not args.no_peer)
    print(report.section.title)
    for row in report.section.rows:
        print(" | ".join(str(cell) for cell in row))


if __name__ == "__main__":
    main()
