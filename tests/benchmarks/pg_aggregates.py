"""Grouped counts: ``facade.aggregate`` against raw SQL and against paging rows to count them.

Run alone: ``python -m tests.benchmarks.pg_aggregates [--rows N] [--quick]``; ``make bench``
runs it as one of its steps. On the reference ``leads`` table (bigint ids, 50 clients, 400
campaigns, six statuses with NULL among them), two questions:

* **count per status, every lead**: raw psycopg ``SELECT status, count(*) FROM leads GROUP BY
  status ORDER BY status`` (the baseline), ``facade.aggregate("leads", group_by=["status"])``,
  ``RAGAgent.aggregate`` (cache off), ``aggregate_table``, the LangChain tool, and the peer
  tool (LangChain's SQL tool) given the same ``GROUP BY`` as text. The alternative
  a user had before, paging every row through ``query_table`` and counting client-side, is one
  ``OFFSET`` scan per page; at this size it is timed for the first page only and reported as the
  lower bound: pages times the first page (later pages cost more, never less).
* **count per campaign, one client** (``client_id = 7``): the same contenders, and the paging
  alternative timed in full (a client has rows / 50 leads).

Every contender's answer is checked against the raw one before timing.
"""

from __future__ import annotations

import argparse
import functools
import json
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from persistence import Filter, Op
from rag_agent import build_tools
from rag_agent.untrusted import unwrap_boundary
from tests.benchmarks.common import Section, Stats, Target, quiet_logging, scratch_database
from tests.benchmarks.lookup_scenarios import PEER, Contender, WrongAnswer, _peer, _text_check
from tests.benchmarks.peer import peer_installed
from tests.benchmarks.pg_lookups import LookupReport, Outcome, _clients, _rows, time_outcome
from tests.benchmarks.pg_suite import Clients, per_call_estimate
from tests.benchmarks.report import fmt_time, markdown_table, over, ratio

RAW = "raw psycopg, GROUP BY"
PAGING = "query_table pages, counted client-side"
_CLIENT = 7
_BY_STATUS = b"SELECT status, count(*) FROM leads GROUP BY status ORDER BY status"
_BY_CAMPAIGN = (
    b"SELECT campaign_id, count(*) FROM leads WHERE client_id = %s "
    b"GROUP BY campaign_id ORDER BY campaign_id"
)


def _counts(envelope: dict[str, Any], column: str) -> dict[Any, int]:
    groups = envelope["metadata"]["aggregates"]["groups"]
    return {g["keys"][column]: g["values"]["count"] for g in groups}


def _expect(want: dict[Any, int]) -> Callable[[dict[Any, int]], None]:
    def check(got: dict[Any, int]) -> None:
        if got != want:
            raise WrongAnswer(f"{len(got)} groups, not the {len(want)} raw SQL gives")

    return check


def _paged(clients: Clients, column: str, filters: dict[str, Any], pages: int | None) -> Any:
    """Page ``column`` of the matching leads through ``query_table`` (500 rows a page, the
    largest page it serves) and count per value; at most ``pages`` pages."""
    query_table = build_tools(clients.agent, content="full")[1]
    counts: Counter[Any] = Counter()
    offset, page = 0, 0
    while pages is None or page < pages:
        args = {"table": "leads", "filters": filters, "columns": [column], "limit": 500}
        envelope = query_table.invoke({**args, "offset": offset})
        data = json.loads(unwrap_boundary(envelope))
        metadata = data["metadata"]
        page += 1
        for record in data["records"]:
            counts[record[column]] += 1
        if not metadata.get("has_more"):
            break
        offset = metadata["next_offset"]
    return dict(counts)


def _contenders(
    clients: Clients, column: str, filters: dict[str, Any], sql: bytes, params: tuple[Any, ...]
) -> dict[str, Contender]:
    cursor = clients.raw.cursor()
    want = {key: count for key, count in cursor.execute(sql, params).fetchall()}
    check = _expect(want)
    flts = [Filter(c, Op.EQ, v) for c, v in filters.items()]
    facade, agent = clients.facade, clients.agent
    aggregate_table = build_tools(agent, content="full")[5]

    def raw() -> dict[Any, int]:
        return {key: count for key, count in cursor.execute(sql, params).fetchall()}

    def by_facade() -> dict[Any, int]:
        result = facade.aggregate("leads", flts, group_by=[column], limit=1000)
        return {g.keys[column]: g.metrics["count"] for g in result.groups}

    def by_agent() -> dict[Any, int]:
        envelope = agent.aggregate("leads", flts, group_by=[column], limit=1000, return_json=True)
        return _counts(envelope, column)

    def by_tool() -> dict[Any, int]:
        args = {"table": "leads", "filters": filters, "group_by": [column], "limit": 1000}
        return _counts(json.loads(unwrap_boundary(aggregate_table.invoke(args))), column)

    contenders = {
        RAW: Contender(raw, check),
        "facade.aggregate": Contender(by_facade, check),
        "RAGAgent.aggregate": Contender(by_agent, check),
        "aggregate_table tool": Contender(by_tool, check),
    }
    peer = _peer(clients, (sql, params))
    if peer is not None:
        # The peer answers text: every group's count must be in it.
        contenders[PEER] = Contender(peer, _text_check(*(f", {n})" for n in want.values())))
    return contenders


def _paging_row(name: str, seconds: float, base: Stats | None, note: str) -> tuple[Any, ...]:
    shown = fmt_time(seconds) + note
    times = f"{seconds / base.median:.0f}×" if base else "—"
    return (name, PAGING, shown, "—", times, "—")


def measure(rows: int, *, quick: bool, with_peer: bool = False) -> LookupReport:
    """Both grouped counts on a fresh reference database of ``rows`` leads; the peer tool (the
    raw statement as text) too when ``with_peer``."""
    with scratch_database(rows) as db:
        section = Section(
            f"Grouped counts on PostgreSQL ({rows:,} leads)",
            "The reference `leads` table; the agent's cache is off. *vs raw* divides the p50 "
            f"by raw psycopg running the `GROUP BY` a careful engineer would write. *{PAGING}* "
            "is what answered 'how many … by …' before aggregates: every row paged through "
            "the `query_table` tool (500 a page) and counted by the caller.",
            ("Scenario", "Contender", "p50", "p95", "vs raw", "vs peer"),
        )
        outcomes: list[Outcome] = []
        targets: list[Target] = []
        paging: dict[str, float] = {}
        with _clients(db, with_peer) as clients:
            for name, column, filters, sql, params in (
                ("count per status, every lead", "status", {}, _BY_STATUS, ()),
                (f"count per campaign, client {_CLIENT}", "campaign_id",
                 {"client_id": _CLIENT}, _BY_CAMPAIGN, (_CLIENT,)),
            ):  # fmt: skip
                contenders = _contenders(clients, column, filters, sql, params)
                outcome = time_outcome(name, RAW, contenders, quick=quick)
                outcomes.append(outcome)
                section.rows += _rows(outcome, list(contenders))
                base = outcome.stats.get(RAW)
                if filters:
                    whole = functools.partial(_paged, clients, column, filters, None)
                    seconds = per_call_estimate(whole)
                    paging[name] = seconds
                    section.rows.append(_paging_row(name, seconds, base, ""))
                else:
                    first = per_call_estimate(
                        functools.partial(_paged, clients, column, filters, 1)
                    )
                    pages = -(-rows // 500)
                    paging[name] = first * pages
                    row = _paging_row(name, first * pages, base, f" (≥ {pages:,} × first page)")
                    section.rows.append(row)
                ours = outcome.stats.get("facade.aggregate")
                if ours is not None and base is not None:
                    targets.append(
                        Target(
                            f"facade.aggregate vs raw GROUP BY — {name}",
                            "≤ 1.2×",
                            ratio(ours, base),
                            ours.median <= 1.2 * base.median,
                            tie=ours.median - 1.2 * base.median <= (base.p75 - base.p25),
                            gap=over(ours.median, 1.2 * base.median, "query"),
                            reason=f"the facade's statement adds the number of groups and of "
                            "rows matched (two window functions) and a READ ONLY transaction to "
                            f"the raw `GROUP BY`: {fmt_time(ours.median - base.median)} here.",
                        )
                    )
        section.notes.append(
            "The facade's statement is one `GROUP BY` with `count(*) OVER ()` and "
            "`sum(count(*)) OVER ()` for the number of groups and of rows matched, text keys "
            'ordered `COLLATE "C"`, in a `READ ONLY` transaction with the statement timeout.'
        )
        figures = {
            "database": db.name,
            "rows": rows,
            "scenarios": {o.name: o.as_dict() for o in outcomes},
            "paging_s": paging,
        }
        return LookupReport(section, targets, figures)


def main(argv: Sequence[str] | None = None) -> int:
    """Measure and print the section as Markdown."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-peer", action="store_true", help="skip the peer tool")
    args = parser.parse_args(argv)
    quiet_logging()
    report = measure(args.rows, quick=args.quick, with_peer=not args.no_peer and peer_installed())
    print(f"## {report.section.title}\n\n{report.section.intro}\n")
    print("\n".join(markdown_table(report.section.columns, report.section.rows)))
    for target in report.targets:
        print(f"- {target.name}: {target.measured} (goal {target.goal}: {target.verdict})")
    for note in report.section.notes:
        print(f"\n{note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
