"""PostgreSQL enum columns (``create type … as enum``): labels read from ``pg_enum``, filters
rewritten onto the labels, grouped counts, and the same answers as the memory backend.

PostgreSQL refuses ``lower(enum)`` and ``enum ILIKE …``; before labels were read, ``ieq`` and
``icontains`` on an enum column failed with "function lower(...) does not exist". The scratch
table looks like a real schema's: uuid keys, a timestamptz, an enum with a label in capitals.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from persistence import (
    Filter,
    InvalidQueryError,
    MemoryStore,
    Op,
    ReadOnlyPersistenceFacade,
    create_persistence_agent,
    create_read_only_facade,
)
from persistence.values.types import ColumnKind, column_type, enum_type
from tests.conftest import PostgresDatabase
from tests.support.postgrest import BASE_URL, PostgrestEmulator, fake_key

pytestmark = pytest.mark.postgres

TABLE = "enum_test_leads"
LABELS = ("new", "Qualified", "lost", "won")
START = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
ROWS: list[dict[str, Any]] = [
    {
        "id": uuid.UUID(int=index + 1),
        "email": f"lead{index}@acme.io",
        "stage": None if index % 7 == 6 else LABELS[index * 5 % 4],
        "created_at": START + dt.timedelta(days=index),
    }
    for index in range(30)
]
MEMORY_SCHEMA = {
    TABLE: {
        "id": column_type("uuid"),
        "email": column_type("text"),
        "stage": enum_type("enum_test_stage", LABELS),
        "created_at": column_type("timestamptz"),
    }
}


@pytest.fixture(scope="module")
def pg(postgres_db: PostgresDatabase) -> Iterator[ReadOnlyPersistenceFacade]:
    """A reader facade over a scratch enum table in the session database (dropped after)."""
    postgres_db.execute(
        "CREATE TYPE enum_test_stage AS ENUM (" + ", ".join(f"'{x}'" for x in LABELS) + ")"
    )
    postgres_db.execute(
        f"CREATE TABLE {TABLE} (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), email text, "
        "stage enum_test_stage, created_at timestamptz NOT NULL DEFAULT now())"
    )
    try:
        for row in ROWS:
            postgres_db.execute(
                f"INSERT INTO {TABLE} (id, email, stage, created_at) VALUES (%s, %s, %s, %s)",
                (row["id"], row["email"], row["stage"], row["created_at"]),
            )
        with create_read_only_facade(
            kind="postgres", dsn=postgres_db.reader_dsn, tables=[TABLE]
        ) as facade:
            yield facade
    finally:
        postgres_db.execute(f"DROP TABLE IF EXISTS {TABLE}")
        postgres_db.execute("DROP TYPE IF EXISTS enum_test_stage")


@pytest.fixture(scope="module")
def store() -> MemoryStore:
    """The same rows in a memory store declaring the same enum."""
    store = MemoryStore(schema=MEMORY_SCHEMA)
    create_persistence_agent(kind="memory", store=store, tables=[TABLE]).batch(TABLE, ROWS)
    return store


@pytest.fixture(scope="module")
def memory(store: MemoryStore) -> ReadOnlyPersistenceFacade:
    """A memory facade over the rows."""
    return create_read_only_facade(kind="memory", store=store, tables=[TABLE])


@pytest.fixture(scope="module")
def emulated(store: MemoryStore) -> Iterator[ReadOnlyPersistenceFacade]:
    """A Supabase facade over the PostgREST emulator, whose description lists the labels."""
    http = httpx.Client(transport=PostgrestEmulator(store, aggregates=True).transport())
    with http:
        yield create_read_only_facade(
            kind="supabase",
            url=BASE_URL,
            key=fake_key(),
            http_client=http,
            sleep=lambda _: None,
            tables=[TABLE],
        )


def emails(facade: ReadOnlyPersistenceFacade, *filters: Filter) -> set[str]:
    """The e-mails of every row matching ``filters``."""
    return {row["email"] for row in facade.read(TABLE, filters, limit=100).rows}


def expected(predicate: Any) -> set[str]:
    """The e-mails of the rows whose stage passes ``predicate`` (never a NULL stage)."""
    return {r["email"] for r in ROWS if r["stage"] is not None and predicate(r["stage"])}


class TestEnumCatalog:
    def test_the_labels_come_from_pg_enum_in_declaration_order(
        self, pg: ReadOnlyPersistenceFacade
    ) -> None:
        """The column is text-like, and its type carries the labels as declared."""
        stage = pg.column_types(TABLE)["stage"]
        assert stage.kind is ColumnKind.TEXT
        assert stage.name == "enum_test_stage"
        assert stage.labels == LABELS
        assert pg.column_types(TABLE)["email"].labels is None


class TestEnumFilters:
    def test_ieq_matches_the_label_whatever_the_case(self, pg: ReadOnlyPersistenceFacade) -> None:
        """'QUALIFIED' finds the 'Qualified' rows (this failed: lower(enum) does not exist)."""
        assert emails(pg, Filter("stage", Op.IEQ, "QUALIFIED")) == expected(
            lambda s: s == "Qualified"
        )

    def test_icontains_matches_every_label_containing_the_text(
        self, pg: ReadOnlyPersistenceFacade
    ) -> None:
        """'O' is in 'lost' and 'won' (ignoring case), never in 'new' or 'Qualified'."""
        found = emails(pg, Filter("stage", Op.ICONTAINS, "O"))
        assert found == expected(lambda s: s in {"lost", "won"})

    def test_eq_maps_a_label_written_in_another_case(self, pg: ReadOnlyPersistenceFacade) -> None:
        """eq 'qualified' means the one label it can mean, as the facade's check shows."""
        [checked] = pg.check_filters(TABLE, [Filter("stage", Op.EQ, "qualified")])
        assert checked == Filter("stage", Op.EQ, "Qualified")
        assert emails(pg, checked) == expected(lambda s: s == "Qualified")

    def test_a_value_that_is_no_label_is_a_typed_error_listing_them(
        self, pg: ReadOnlyPersistenceFacade
    ) -> None:
        """No query runs on 'archived': the error names the enum and its labels."""
        with pytest.raises(InvalidQueryError) as caught:
            pg.read(TABLE, [Filter("stage", Op.EQ, "archived")])
        message = str(caught.value)
        assert "enum_test_stage" in message and "'Qualified'" in message and "'won'" in message

    def test_ordering_follows_the_declaration(self, pg: ReadOnlyPersistenceFacade) -> None:
        """gt 'Qualified' is lost and won, as PostgreSQL orders the enum."""
        assert emails(pg, Filter("stage", Op.GT, "qualified")) == expected(
            lambda s: s in {"lost", "won"}
        )

    def test_in_and_neq_map_each_value(self, pg: ReadOnlyPersistenceFacade) -> None:
        """in ['NEW', 'won'] and neq 'LOST' are label equalities."""
        assert emails(pg, Filter("stage", Op.IN, ("NEW", "won"))) == expected(
            lambda s: s in {"new", "won"}
        )
        assert emails(pg, Filter("stage", Op.NEQ, "LOST")) == expected(lambda s: s != "lost")


class TestSupabaseEnum:
    def test_the_labels_come_from_the_description(
        self, emulated: ReadOnlyPersistenceFacade
    ) -> None:
        """PostgREST's enum list gives the same type as pg_enum."""
        assert emulated.column_types(TABLE)["stage"] == enum_type("enum_test_stage", LABELS)


class TestEnumAggregates:
    def test_a_count_per_label_in_code_point_order(self, pg: ReadOnlyPersistenceFacade) -> None:
        """Grouping by an enum works (an enum takes no COLLATE) and orders as memory does."""
        result = pg.aggregate(TABLE, group_by=("stage",), metrics=("count", "max:stage"))
        keys = [g.keys["stage"] for g in result.groups]
        assert keys == [*sorted(k for k in keys if k is not None), None]
        counts = {g.keys["stage"]: g.metrics["count"] for g in result.groups}
        assert counts == {
            label: sum(1 for r in ROWS if r["stage"] == label) for label in (*LABELS, None)
        }


_OPS = st.sampled_from([Op.EQ, Op.NEQ, Op.IEQ, Op.ICONTAINS, Op.GT, Op.LTE, Op.IN, Op.IS_NULL])
_VALUES = st.sampled_from([*LABELS, "QUALIFIED", "New", "o", "L", "e", "archived", "", "%", "wo"])


class TestEnumDifferential:
    @settings(
        max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(
        op=_OPS,
        value=_VALUES,
        second=_VALUES,
        group=st.booleans(),
        limit=st.sampled_from([None, 1, 2]),
    )
    def test_memory_postgresql_and_postgrest_agree(
        self,
        pg: ReadOnlyPersistenceFacade,
        memory: ReadOnlyPersistenceFacade,
        emulated: ReadOnlyPersistenceFacade,
        op: Op,
        value: str,
        second: str,
        group: bool,
        limit: int | None,
    ) -> None:
        """Every filter on the enum gives the same rows, or the same error, on all backends;
        grouped, the same groups in the same order, capped alike (PostgREST orders an enum by
        declaration: the backend orders the groups itself)."""
        arg: Any = (value, second) if op is Op.IN else (value == "" if op is Op.IS_NULL else value)
        flt = Filter("stage", op, arg)
        answers = []
        for facade in (memory, pg, emulated):
            try:
                if group:
                    result = facade.aggregate(
                        TABLE,
                        [flt],
                        group_by=("stage",),
                        metrics=("count", "count_distinct:email"),
                        limit=limit,
                    )
                    groups = [(dict(g.keys), dict(g.metrics)) for g in result.groups]
                    answers.append([groups, result.capped, result.matched])
                else:
                    answers.append(sorted(emails(facade, flt)))
            except InvalidQueryError as exc:
                answers.append(["error", str(exc)])
        assert answers[0] == answers[1] == answers[2]
