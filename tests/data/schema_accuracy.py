"""Score the retrieval agent on the labelled questions of both schemas (:mod:`schema_questions`).

Run::

    python -m tests.data.schema_accuracy [--backend memory|postgres] [--half tune|held_out|all]
                                         [--schema sample|second|all] [--show-failures N]

The agent is built as :func:`rag_agent.create_rag_agent` builds it — a read-only facade over the
data and a :class:`~rag_agent.RAGAgent` — with no LLM, the cache off, and its ``now`` pinned to
:data:`~tests.data.schema_questions.NOW` (``create_rag_agent`` takes no clock, so the two parts
are made here). On memory the data is loaded into a private store typed with the schema (the
second schema's relations declared); on PostgreSQL into a scratch database per schema made from
``RAG_TEST_POSTGRES_DSN`` (default ``postgresql://postgres@127.0.0.1:5432/postgres``) and dropped
at the end.

Each question runs as ``agent.run(text, table=question.given_table, limit=500,
return_json=True)``: the table is **not** given when the text names it by its plain noun (the
agent must read it), and given otherwise (see :attr:`Question.given_table`). A question is right
when the envelope has no ``error``, its ``source`` is the question's table, and

* for a row question: ``total_count`` equals the number of true rows and the records' ids
  (``provenance.row_id``) are exactly the true ids — or, where more than 500 rows are true, 500
  of them;
* for a "how many" question: ``total_count`` equals the true count (a count-only envelope,
  ``metadata.count_only``, reports it there too; whether it was count-only is shown with the
  failures but not scored).

:func:`evaluate` returns the figures (:class:`Report`), so a test can assert on them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from persistence import MemoryStore, create_read_only_facade
from persistence.schema import REFERENCE
from rag_agent import RAGAgent
from rag_agent.settings import RAGSettings
from tests.data import second_schema
from tests.data.schema_questions import CLASSES, NOW, SCHEMAS, Question, questions, schema_rows
from tests.support.leftovers import scratch_name

__all__ = ["LIMIT", "Report", "Result", "build_agents", "evaluate", "row_id", "score"]

#: The page asked for on every question (the default ``RAG_MAX_LIMIT``).
LIMIT = 500
HALVES = ("tune", "held_out")
ADMIN_DSN = os.environ.get("RAG_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


@dataclass(frozen=True)
class Result:
    """One question's outcome; ``reason`` says why it is wrong (empty when right)."""

    question: Question
    right: bool
    reason: str
    total_count: int | None
    got_ids: frozenset[str]
    filters: tuple[str, ...] = ()
    ignored: tuple[str, ...] = ()
    count_only: bool = False


@dataclass
class Report:
    """Every result of a run, and the figures per schema, class and half."""

    backend: str
    results: list[Result] = field(default_factory=list)

    def _tally(self, key: Any) -> dict[Any, tuple[int, int]]:
        tally: dict[Any, list[int]] = defaultdict(lambda: [0, 0])
        for result in self.results:
            cell = tally[key(result.question)]
            cell[0] += result.right
            cell[1] += 1
        return {k: (v[0], v[1]) for k, v in tally.items()}

    def by_class(self) -> dict[tuple[str, str, str], tuple[int, int]]:
        """(schema, class, half) -> (right, asked)."""
        return self._tally(lambda q: (q.schema, q.cls, q.half))

    def by_schema(self) -> dict[tuple[str, str], tuple[int, int]]:
        """(schema, half) -> (right, asked)."""
        return self._tally(lambda q: (q.schema, q.half))

    def overall(self) -> tuple[int, int]:
        """(right, asked) over every question of the run."""
        return sum(r.right for r in self.results), len(self.results)

    def figures(self) -> dict[str, Any]:
        """The figures as a JSON-ready dict: ``"schema/class/half"`` and ``"schema/half"`` ->
        ``{"right", "asked", "accuracy"}``, and ``"overall"``."""

        def cell(right: int, asked: int) -> dict[str, Any]:
            return {"right": right, "asked": asked, "accuracy": right / asked if asked else None}

        return {
            "backend": self.backend,
            "by_class": {"/".join(k): cell(*v) for k, v in sorted(self.by_class().items())},
            "by_schema": {"/".join(k): cell(*v) for k, v in sorted(self.by_schema().items())},
            "overall": cell(*self.overall()),
        }

    def failures(self) -> list[Result]:
        return [r for r in self.results if not r.right]


# --- agents -------------------------------------------------------------------------------------


def _settings() -> RAGSettings:
    return RAGSettings.from_env({}, cache_disabled=True, llm=False)


def _agent(facade: Any) -> RAGAgent:
    return RAGAgent(facade, settings=_settings(), llm=None, now=lambda: NOW)


def _memory_facade(schema: str) -> Any:
    if schema == "sample":
        from rag_agent.ops.sample import load_sample

        store = MemoryStore()
        load_sample(store)
        return create_read_only_facade(kind="memory", store=store, settings=_settings())
    store = second_schema.memory_store()
    second_schema.load_memory(store)
    return create_read_only_facade(
        kind="memory",
        store=store,
        relations=second_schema.SECOND.relations,
        settings=_settings(),
    )


def _load_sample_postgres(dsn: str) -> None:
    import psycopg
    from psycopg import sql

    data = schema_rows("sample")
    with psycopg.connect(dsn) as conn:
        for statement in REFERENCE.statements():
            conn.execute(statement.encode())
        for table, rows in data.items():
            columns = REFERENCE.columns[table]
            statement = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
                sql.Identifier(table),
                sql.SQL(", ").join(map(sql.Identifier, columns)),
                sql.SQL(", ").join(sql.Placeholder() * len(columns)),
            )
            with conn.cursor() as cursor:
                cursor.executemany(statement, [tuple(r[c] for c in columns) for r in rows])
        conn.commit()


@contextlib.contextmanager
def _scratch_database(admin_dsn: str) -> Iterator[str]:
    """A new, empty database (its DSN); dropped afterwards."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    # Named as the suite names what it makes: a killed run's database is swept at the next start.
    name = scratch_name("schema_acc")
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}".encode())
    try:
        yield make_conninfo(admin_dsn, dbname=name)
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)".encode())


@contextlib.contextmanager
def build_agents(
    backend: str = "memory", schemas: Iterable[str] = SCHEMAS, *, admin_dsn: str = ADMIN_DSN
) -> Iterator[dict[str, RAGAgent]]:
    """schema -> an agent over that schema's data on ``backend`` (``memory`` or ``postgres``)."""
    wanted = tuple(schemas)
    if backend == "memory":
        yield {schema: _agent(_memory_facade(schema)) for schema in wanted}
        return
    if backend != "postgres":
        raise ValueError(f"unknown backend {backend!r}; memory or postgres")
    with contextlib.ExitStack() as stack:
        agents = {}
        for schema in wanted:
            dsn = stack.enter_context(_scratch_database(admin_dsn))
            if schema == "sample":
                _load_sample_postgres(dsn)
            else:
                second_schema.load_postgres(dsn)
            facade = stack.enter_context(
                create_read_only_facade(
                    kind="postgres", dsn=dsn, allow_privileged=True, settings=_settings()
                )
            )
            agents[schema] = _agent(facade)
        yield agents


# --- scoring ------------------------------------------------------------------------------------


def row_id(record: dict[str, Any]) -> str:
    """A record's row id (``provenance.row_id``, else its ``id``), as text."""
    provenance = record.get("provenance") or {}
    return str(provenance.get("row_id", record.get("id")))


def answer_details(envelope: dict[str, Any]) -> dict[str, Any]:
    """What a failure shows of an answer: its total, the ids it returned, its filters (as
    ``column op value``) and what it ignored."""
    meta = envelope.get("metadata") or {}
    return {
        "total_count": meta.get("total_count"),
        "got_ids": frozenset(row_id(r) for r in envelope.get("records") or []),
        "filters": tuple(
            f"{f.get('column')} {f.get('op')} {f.get('value')!r}" for f in meta.get("filters") or ()
        ),
        "ignored": tuple(
            str(i.get("text", i)) if isinstance(i, dict) else str(i)
            for i in meta.get("ignored") or ()
        ),
    }


def score(question: Question, envelope: dict[str, Any]) -> Result:
    """Whether ``envelope`` (``run(..., return_json=True)``) answers ``question``."""
    meta = envelope.get("metadata") or {}
    records = envelope.get("records") or []
    details = {**answer_details(envelope), "count_only": bool(meta.get("count_only"))}
    total, got = details["total_count"], details["got_ids"]

    def result(reason: str) -> Result:
        return Result(question, not reason, reason, **details)

    if meta.get("error"):
        return result(f"error: {meta['error']}")
    source = meta.get("source")
    if source != f"persistence.{question.table}" and (total or records):
        return result(f"read {source}, not {question.table}")
    if question.kind == "count":
        if total != question.truth_count:
            return result(f"count {total}, truth {question.truth_count}")
        return result("")
    truth = frozenset(str(i) for i in question.truth_ids)
    if total != len(truth):
        return result(f"total_count {total}, truth {len(truth)}")
    if len(truth) <= LIMIT:
        if got != truth:
            return result(f"{len(got - truth)} wrong ids, {len(truth - got)} missing")
    elif len(got) != LIMIT or not got <= truth:
        return result(f"{len(got - truth)} wrong ids of {len(got)} (truth above {LIMIT})")
    return result("")


def evaluate(
    backend: str = "memory",
    *,
    half: str = "all",
    schema: str = "all",
    selected: Sequence[Question] | None = None,
) -> Report:
    """Run the questions (all, or one half / one schema, or ``selected``) and score them."""
    chosen = [
        q
        for q in (questions() if selected is None else selected)
        if half in ("all", q.half) and schema in ("all", q.schema)
    ]
    report = Report(backend)
    with build_agents(backend, sorted({q.schema for q in chosen}, key=SCHEMAS.index)) as agents:
        for question in chosen:
            envelope = agents[question.schema].run(
                question.text, table=question.given_table, limit=LIMIT, return_json=True
            )
            report.results.append(score(question, envelope))
    return report


# --- printing -----------------------------------------------------------------------------------


def _pct(right: int, asked: int) -> str:
    return f"{right:>3}/{asked:<3} {right / asked:5.2f}" if asked else f"{'-':>14}"


def render(report: Report, *, show_failures: int = 0) -> str:
    lines = [f"backend: {report.backend}"]
    cells = report.by_class()
    schemas = [s for s in SCHEMAS if any(k[0] == s for k in cells)]
    columns = [(s, h) for s in schemas for h in HALVES]
    lines.append(f"{'class':15}" + "".join(f"  {s + '/' + h:>16}" for s, h in columns))
    for cls in CLASSES:
        row = "".join(f"  {_pct(*cells.get((s, cls, h), (0, 0))):>16}" for s, h in columns)
        lines.append(f"{cls:15}{row}")
    totals = report.by_schema()
    lines.append(
        f"{'all classes':15}"
        + "".join(f"  {_pct(*totals.get((s, h), (0, 0))):>16}" for s, h in columns)
    )
    lines.append(f"overall: {_pct(*report.overall())}")
    for result in report.failures()[:show_failures]:
        q = result.question
        truth = q.truth_count
        lines.append(
            f"- {q.id} [{q.half}] table={q.table} given={q.given_table} truth={truth} "
            f"got={result.total_count}{' count_only' if result.count_only else ''}: "
            f"{q.text!r}\n    {result.reason}; filters={list(result.filters)} "
            f"ignored={list(result.ignored)}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.data.schema_accuracy")
    parser.add_argument("--backend", choices=("memory", "postgres"), default="memory")
    parser.add_argument("--half", choices=("tune", "held_out", "all"), default="all")
    parser.add_argument("--schema", choices=("sample", "second", "all"), default="all")
    parser.add_argument("--show-failures", type=int, default=0, metavar="N")
    args = parser.parse_args(argv)
    report = evaluate(args.backend, half=args.half, schema=args.schema)
    print(render(report, show_failures=args.show_failures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
