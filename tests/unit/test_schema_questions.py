"""The labelled two-schema question set and the second schema: integrity, not the agent's score.

The set (:mod:`tests.data.schema_questions`) must be big enough, cover every class on both
schemas, split each class evenly into halves, and carry truths that hold; the second schema
(:mod:`tests.data.second_schema`) must be deterministic and hold the same rows on memory and
PostgreSQL, with its enum types, CHECK lists and foreign keys in the catalog.
"""

from __future__ import annotations

import ast
import datetime as dt
import inspect
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

from persistence import ReadOnlyPersistenceFacade, create_read_only_facade
from tests.conftest import PostgresDatabase, _postgres_database
from tests.data import schema_accuracy, schema_questions, second_schema
from tests.data.schema_questions import CLASSES, SCHEMAS, Question, questions, schema_rows
from tests.data.second_schema import NOW, SECOND, SECOND_TABLES


@pytest.fixture(scope="module")
def made() -> tuple[Question, ...]:
    return questions()


def test_the_set_is_big_enough(made: tuple[Question, ...]) -> None:
    assert len(made) >= 360
    per_schema = Counter(q.schema for q in made)
    assert set(per_schema) == set(SCHEMAS)
    assert all(per_schema[s] >= 150 for s in SCHEMAS), per_schema


def test_every_class_is_asked_on_both_schemas(made: tuple[Question, ...]) -> None:
    cells = Counter((q.schema, q.cls) for q in made)
    missing = [(s, c) for s in SCHEMAS for c in CLASSES if cells[s, c] < 10]
    assert not missing, missing
    assert {q.cls for q in made} == set(CLASSES)


def test_halves_are_even_within_each_class(made: tuple[Question, ...]) -> None:
    halves = Counter((q.schema, q.cls, q.half) for q in made)
    for schema in SCHEMAS:
        for cls in CLASSES:
            tune, held = halves[schema, cls, "tune"], halves[schema, cls, "held_out"]
            assert held - tune in (0, 1), (schema, cls, tune, held)
    assert {q.half for q in made} == {"tune", "held_out"}


def test_ids_and_texts_are_unique(made: tuple[Question, ...]) -> None:
    assert len({q.id for q in made}) == len(made)
    texts = Counter((q.schema, q.text.casefold()) for q in made)
    assert [t for t, n in texts.items() if n > 1] == []


def test_the_set_is_deterministic(made: tuple[Question, ...]) -> None:
    schema_questions.questions.cache_clear()
    again = questions()
    assert [q.as_dict() for q in again] == [q.as_dict() for q in made]
    assert second_schema.generate() == second_schema.generate()


def test_truths_hold(made: tuple[Question, ...]) -> None:
    for q in made:
        ids = {row["id"] for row in schema_rows(q.schema)[q.table]}
        assert q.given_table in (None, q.table), q.id
        if q.kind == "count":
            assert q.truth_ids == frozenset(), q.id
            assert q.truth_count >= 0, q.id
            continue
        assert q.kind == "rows", q.id
        assert q.truth_ids <= ids, q.id
        assert q.truth_count == len(q.truth_ids), q.id
        # Non-empty, apart from the questions that are deliberately answered by no row.
        assert bool(q.truth_ids) != q.zero, q.id
    zero = [q for q in made if q.zero]
    assert zero and all(q.kind == "rows" for q in zero)


def test_a_question_naming_its_table_is_not_given_it(made: tuple[Question, ...]) -> None:
    by_text = {(q.schema, q.text): q for q in made}
    assert by_text["second", "leads in Spain"].given_table is None
    assert by_text["second", "won deals"].given_table == "leads"
    assert by_text["second", "messages of leads at " + _company(made)].given_table is None
    assert by_text["sample", "staged leads from the web form"].given_table is None


def _company(made: tuple[Question, ...]) -> str:
    (q,) = [q for q in made if q.schema == "second" and q.text.startswith("messages of leads at")]
    return q.text.removeprefix("messages of leads at ")


def test_some_truths_by_hand(made: tuple[Question, ...]) -> None:
    """A few truths recomputed another way (a second reading of the predicate)."""
    by_text = {(q.schema, q.text): q for q in made}
    leads = schema_rows("second")["leads"]
    clients = {c["id"]: c for c in schema_rows("second")["clients"]}

    spain = by_text["second", "leads in Spain"]
    assert spain.truth_ids == {r["id"] for r in leads if r["country"] == "Spain"}

    gold = by_text["second", "leads of gold-tier clients"]
    assert gold.truth_ids == {r["id"] for r in leads if clients[r["client_id"]]["tier"] == "gold"}

    spring = by_text["second", "leads opened between February and April 2025"]
    assert spring.truth_ids == {
        r["id"] for r in leads if dt.date(2025, 2, 1) <= r["opened_at"] <= dt.date(2025, 4, 30)
    }

    how_many = by_text["second", "how many leads are neither won nor lost?"]
    assert how_many.truth_count == sum(r["stage"] not in ("won", "lost") for r in leads)

    sample_leads = schema_rows("sample")["leads"]
    not_customers = by_text["sample", "leads that are not customers"]
    assert not_customers.truth_count == sum(
        r["status"] is not None and r["status"] != "customer" for r in sample_leads
    )


def test_truths_are_computed_without_the_parser() -> None:
    """The set's module imports nothing of the agent's understanding (nor the agent)."""
    for module in (schema_questions, second_schema):
        tree = ast.parse(inspect.getsource(module))
        imported = {
            node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
        } | {
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            for alias in node.names
        }
        assert not any(
            name.startswith(("rag_agent.understanding", "rag_agent.agent", "rag_agent.pipeline"))
            for name in imported
        ), (module.__name__, imported)


def test_second_schema_is_unlike_the_sample() -> None:
    from persistence.schema import REFERENCE

    assert set(SECOND.columns) == set(REFERENCE.columns)
    assert "company_name" not in SECOND.columns["leads"]
    assert "status" not in SECOND.columns["leads"]
    assert {"stage", "lead_score", "country", "owner_email", "is_duplicate"} <= set(
        SECOND.columns["leads"]
    )
    assert {(r.parent_table, r.child_table) for r in SECOND.relations} >= {
        ("clients", "leads"),
        ("clients", "campaigns"),
        ("campaigns", "sequences"),
        ("leads", "conversations"),
        ("conversations", "messages"),
        ("leads", "inquiries"),
        ("clients", "inquiries"),
    }
    assert SECOND.types["leads"]["stage"].labels == second_schema.ENUMS["lead_stage"]


def test_second_schema_dates_are_before_now() -> None:
    for table in SECOND_TABLES:
        for row in second_schema.rows(table):
            for value in row.values():
                if isinstance(value, dt.datetime):
                    assert value < NOW
                elif isinstance(value, dt.date):
                    assert value < NOW.date()


def test_memory_holds_the_generated_rows() -> None:
    store = second_schema.memory_store()
    counts = second_schema.load_memory(store)
    assert counts == {t: len(second_schema.rows(t)) for t in SECOND_TABLES}
    assert second_schema.load_memory(store) == counts  # idempotent
    facade = _memory_facade()
    for table in SECOND_TABLES:
        assert _all_rows(facade, table) == second_schema.rows(table)


def test_the_harness_scores_an_envelope() -> None:
    """The harness's scoring rule on hand-made envelopes (not the agent's accuracy)."""
    row_q = Question(
        "x-1", "second", "leads", "t", "value_exact", "tune", "rows", frozenset({1, 2}), 2, None
    )
    count_q = Question(
        "x-2", "second", "leads", "t", "count", "tune", "count", frozenset(), 7, None
    )

    def envelope(ids: list[int], total: int, table: str = "leads") -> dict[str, Any]:
        records = [{"id": i, "provenance": {"row_id": i}} for i in ids]
        meta = {"source": f"persistence.{table}", "total_count": total}
        return {"metadata": meta, "records": records}

    assert schema_accuracy.score(row_q, envelope([2, 1], 2)).right
    assert not schema_accuracy.score(row_q, envelope([1], 1)).right
    assert not schema_accuracy.score(row_q, envelope([1, 2], 3)).right
    assert not schema_accuracy.score(row_q, envelope([1, 2], 2, table="messages")).right
    assert schema_accuracy.score(count_q, envelope([], 7)).right
    assert not schema_accuracy.score(count_q, envelope([], 6)).right
    failed = {"metadata": {"error": "boom", "total_count": 7}, "records": []}
    assert not schema_accuracy.score(count_q, failed).right


# --- PostgreSQL ---------------------------------------------------------------------------------


def _memory_facade() -> ReadOnlyPersistenceFacade:
    store = second_schema.memory_store()
    second_schema.load_memory(store)
    return create_read_only_facade(kind="memory", store=store, relations=SECOND.relations)


def _all_rows(facade: ReadOnlyPersistenceFacade, table: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while True:
        page = facade.read(table, order=("id",), limit=500, offset=len(out))
        out.extend(page.rows)
        if len(out) >= page.total_count or not page.rows:
            return out


@pytest.fixture(scope="module")
def postgres_second() -> Iterator[PostgresDatabase]:
    """A scratch database with the second schema's enum types and tables, and its rows."""
    for database in _postgres_database(SECOND):  # type: ignore[arg-type]
        second_schema.load_postgres(database.writer_dsn, create=False)
        yield database


@pytest.mark.postgres
def test_postgres_holds_the_same_rows_as_memory(postgres_second: PostgresDatabase) -> None:
    memory = _memory_facade()
    with create_read_only_facade(kind="postgres", dsn=postgres_second.reader_dsn) as pg:
        for table in SECOND_TABLES:
            on_memory, on_pg = _all_rows(memory, table), _all_rows(pg, table)
            assert len(on_pg) == len(on_memory) == len(second_schema.rows(table))
            assert on_pg == on_memory, table
            typed = [(k, type(v)) for k, v in on_pg[0].items() if isinstance(v, Decimal | dt.date)]
            assert typed == [
                (k, type(v)) for k, v in on_memory[0].items() if isinstance(v, Decimal | dt.date)
            ]


@pytest.mark.postgres
def test_postgres_catalog_has_the_enums_checks_and_keys(
    postgres_second: PostgresDatabase,
) -> None:
    labels = postgres_second.execute(
        "SELECT t.typname, array_agg(e.enumlabel ORDER BY e.enumsortorder) FROM pg_type t "
        "JOIN pg_enum e ON e.enumtypid = t.oid GROUP BY t.typname"
    )
    assert {name: tuple(values) for name, values in labels} == dict(second_schema.ENUMS)
    checks = postgres_second.execute(
        "SELECT conrelid::regclass::text, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE contype = 'c'"
    )
    checked = {table for table, _ in checks}
    assert {"clients", "campaigns", "staging_leads", "conversations", "messages"} <= checked
    keys = postgres_second.execute(
        "SELECT conrelid::regclass::text, confrelid::regclass::text FROM pg_constraint "
        "WHERE contype = 'f'"
    )
    assert {(parent, child) for child, parent in keys} == {
        (r.parent_table, r.child_table) for r in SECOND.relations
    }
    with create_read_only_facade(kind="postgres", dsn=postgres_second.reader_dsn) as pg:
        assert pg.column_types("leads")["stage"].labels == second_schema.ENUMS["lead_stage"]
