"""Typed values at the facade: the memory store's typed schema, ``check_filters`` and
``column_types``, and the coerced filters every backend receives."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from collections.abc import Mapping, Sequence

import pytest

from persistence import (
    AccessPolicy,
    Capabilities,
    ColumnKind,
    ColumnNotAllowedError,
    ColumnType,
    ConfigurationError,
    Filter,
    InvalidQueryError,
    MemoryBackend,
    MemoryStore,
    Op,
    Page,
    PersistenceAgent,
    Query,
    ReadOnlyPersistenceFacade,
    TableNotAllowedError,
    UnsupportedOperatorError,
    column_type,
    create_persistence_agent,
    create_read_only_facade,
)
from persistence.backends.memory import UNTYPED
from persistence.schema import SUPABASE_STYLE, TABLE_TYPES
from tests.support.memory import SpyBackend

KEY = uuid.UUID("6f1c2d3e-4b5a-4c6d-8e7f-901a2b3c4d5e")


class _Recording(SpyBackend):
    """Records the filters each read, count and delete receives."""

    def __init__(self, store: MemoryStore | None = None) -> None:
        super().__init__(store)
        self.received: list[tuple[Filter, ...]] = []

    def read(self, query: Query) -> Page:
        self.received.append(query.filters)
        return super().read(query)

    def count(self, table: str, filters: Sequence[Filter]) -> int:
        self.received.append(tuple(filters))
        return super().count(table, filters)

    def delete(self, table: str, filters: Sequence[Filter]) -> int:
        self.received.append(tuple(filters))
        return super().delete(table, filters)


class _Untold(MemoryBackend):
    """A backend that cannot tell its column types (as a Supabase key refused the description)."""

    def column_types(self, table: str) -> Mapping[str, ColumnType] | None:
        return None


class TestTypedMemoryStore:
    def test_default_schema_is_the_reference_types(self) -> None:
        """A store's default schema types every reference column from its DDL type."""
        types = MemoryStore().column_types("leads")
        assert list(types) == list(TABLE_TYPES["leads"])
        assert types["id"] == ColumnType(ColumnKind.INTEGER, "bigint", 64)
        assert types["created_at"].kind is ColumnKind.TIMESTAMPTZ

    def test_values_are_stored_as_their_column_type(self) -> None:
        """A string written to a bigint or timestamptz column is stored as PostgreSQL would."""
        agent = create_persistence_agent(kind="memory", store=MemoryStore())
        row = agent.write("leads", {"client_id": " 42", "created_at": "2025-03-01T12:00:00+02:00"})
        assert row["client_id"] == 42
        assert row["created_at"] == dt.datetime(2025, 3, 1, 10, tzinfo=dt.UTC)
        assert row["created_at"].tzinfo is dt.UTC

    def test_a_refused_value_writes_nothing(self) -> None:
        """A value that cannot be its column's type is InvalidQueryError; the batch is undone."""
        store = MemoryStore()
        agent = create_persistence_agent(kind="memory", store=store)
        with pytest.raises(InvalidQueryError, match=r"leads\.score is integer; 'high'"):
            agent.batch("leads", [{"email": "ok@x.io"}, {"email": "no@x.io", "score": "high"}])
        assert store.rows("leads") == []

    def test_names_only_are_untyped(self) -> None:
        """Columns given by name only keep their values as written, and say so."""
        store = MemoryStore(schema={"notes": ["id", "body"]})
        store.insert("notes", [{"body": 42}])
        assert store.rows("notes")[0]["body"] == 42
        assert store.column_types("notes") == {"id": UNTYPED, "body": UNTYPED}

    def test_a_uuid_key_is_drawn_and_coerced(self) -> None:
        """A uuid-keyed table draws a random uuid for a row without one, and stores a given
        uuid text as a UUID."""
        store = MemoryStore(schema=SUPABASE_STYLE.types)
        drawn, given = store.insert("leads", [{"email": "a@x.io"}, {"id": str(KEY).upper()}])
        assert isinstance(drawn["id"], uuid.UUID)
        assert given["id"] == KEY

    def test_upsert_finds_the_row_by_its_typed_key(self) -> None:
        """An upsert whose key is a string finds the row stored under the typed key."""
        store = MemoryStore()
        store.insert("leads", [{"email": "a@x.io"}])
        store.upsert("leads", [{"id": "1", "status": "won"}])
        assert [(r["id"], r["status"]) for r in store.rows("leads")] == [(1, "won")]

    def test_a_learned_column_is_untyped_and_last(self) -> None:
        """A column first seen on write is learned after the schema's, untyped."""
        store = MemoryStore(schema={"events": {"id": "bigint", "at": "timestamptz"}})
        store.insert("events", [{"at": "2025-01-01", "note": "x"}])
        assert list(store.column_types("events").items()) == [
            ("id", column_type("bigint")),
            ("at", column_type("timestamptz")),
            ("note", UNTYPED),
        ]

    @pytest.mark.parametrize(
        "schema", [["leads"], {"leads": "email"}, {"leads": {"email": 5}}], ids=repr
    )
    def test_a_malformed_schema_is_a_configuration_error(self, schema: object) -> None:
        """schema= must map tables to column names or to type names."""
        with pytest.raises(ConfigurationError):
            MemoryStore(schema=schema)  # type: ignore[arg-type]


class TestCheckFilters:
    def test_values_come_back_coerced_without_reading(self) -> None:
        """check_filters coerces each value to its column's type and reads no row."""
        backend = _Recording()
        facade = ReadOnlyPersistenceFacade(backend, AccessPolicy.read_only())
        checked = facade.check_filters(
            "leads",
            [
                Filter("id", Op.IN, ["7", 8]),
                Filter("created_at", Op.GTE, "2025-03-01"),
                Filter("email", Op.EQ, "a@x.io"),
            ],
        )
        assert checked == (
            Filter("id", Op.IN, (7, 8)),
            Filter("created_at", Op.GTE, dt.datetime(2025, 3, 1, tzinfo=dt.UTC)),
            Filter("email", Op.EQ, "a@x.io"),
        )
        assert backend.calls == []

    def test_typed_filters_come_back_as_the_same_objects(self) -> None:
        """Filters already of their columns' types are returned as they are, every time."""
        facade = create_read_only_facade(kind="memory", store=MemoryStore())
        filters = (Filter("score", Op.GT, 3), Filter("status", Op.EQ, "new"))
        first = facade.check_filters("leads", filters)
        assert all(a is b for a, b in zip(first, filters, strict=True))
        assert facade.check_filters("leads", filters) == first

    @pytest.mark.parametrize(
        ("table", "flt", "policy", "error"),
        [
            ("users", Filter("id", Op.EQ, 1), None, TableNotAllowedError),
            ("leads", Filter("phone", Op.EQ, "1"), {"leads": ["id"]}, ColumnNotAllowedError),
            ("leads", Filter("password", Op.EQ, "x"), None, ColumnNotAllowedError),
            ("leads", Filter("score", Op.ICONTAINS, "1"), None, InvalidQueryError),
            ("leads", Filter("score", Op.EQ, "1.5"), None, InvalidQueryError),
        ],
        ids=lambda v: str(v) if isinstance(v, Filter | str) else "",
    )
    def test_refusals_are_those_of_a_read(
        self,
        table: str,
        flt: Filter,
        policy: dict[str, list[str]] | None,
        error: type[Exception],
    ) -> None:
        """check_filters raises exactly what a read of the same filter raises."""
        backend = _Recording()
        facade = ReadOnlyPersistenceFacade(backend, AccessPolicy.read_only(columns=policy))
        with pytest.raises(error) as checked:
            facade.check_filters(table, [flt])
        with pytest.raises(error) as read:
            facade.read(table, [flt])
        assert str(checked.value) == str(read.value)
        assert backend.calls == []

    def test_an_undeclared_operator_is_refused(self) -> None:
        """An operator the backend does not declare is refused before any coercion or I/O."""

        class EqualityOnly(_Recording):
            capabilities = Capabilities(operators=frozenset({Op.EQ}))

        backend = EqualityOnly()
        facade = ReadOnlyPersistenceFacade(backend, AccessPolicy.read_only())
        with pytest.raises(UnsupportedOperatorError):
            facade.check_filters("leads", [Filter("score", Op.GT, "not even a number")])
        assert backend.calls == []


class TestBackendsReceiveTypedValues:
    def test_reads_counts_and_deletes_get_coerced_filters(self) -> None:
        """The backend sees typed values for reads, counts and the writer's delete."""
        backend = _Recording()
        backend.insert("leads", [{"score": 5}])
        agent = PersistenceAgent(backend, AccessPolicy.writer())
        flt = Filter("id", Op.EQ, "1")
        typed = (Filter("id", Op.EQ, 1),)
        assert agent.read("leads", [flt]).total_count == 1
        assert agent.count("leads", [flt]) == 1
        assert agent.delete("leads", [flt]) == 1
        assert backend.received == [typed, typed, typed]

    def test_a_boolean_column_gets_a_boolean(self) -> None:
        """1 on a boolean column reaches the backend as True (equal to 1, but not the same)."""
        backend = _Recording(MemoryStore(schema=SUPABASE_STYLE.types))
        facade = ReadOnlyPersistenceFacade(backend, AccessPolicy.read_only())
        facade.count("leads", [Filter("is_qualified", Op.EQ, 1)])
        assert backend.received[0][0].value is True

    def test_a_backend_that_cannot_tell_gets_values_as_given(self) -> None:
        """Without column types the facade checks columns by name and coerces nothing."""
        store = MemoryStore(schema={"leads": ["id", "score"]})
        store.insert("leads", [{"score": decimal.Decimal(5)}])
        facade = ReadOnlyPersistenceFacade(_Untold(store), AccessPolicy.read_only())
        assert facade.column_types("leads") == {}
        assert facade.check_filters("leads", [Filter("score", Op.EQ, "5")]) == (
            Filter("score", Op.EQ, "5"),
        )
        with pytest.raises(ColumnNotAllowedError):
            facade.check_filters("leads", [Filter("email", Op.EQ, "a")])


class TestColumnTypes:
    def test_only_allowed_columns_are_listed_in_table_order(self) -> None:
        """column_types lists the policy's columns the backend knows, in table order."""
        policy = AccessPolicy.read_only(columns={"leads": ["score", "email", "id"]})
        facade = ReadOnlyPersistenceFacade(MemoryBackend(MemoryStore()), policy)
        assert list(facade.column_types("leads")) == ["id", "email", "score"]
        assert facade.column_types("leads")["score"] == column_type("integer")

    def test_a_table_outside_the_allow_list_is_refused(self) -> None:
        """column_types checks the table like every read."""
        facade = create_read_only_facade(kind="memory", store=MemoryStore())
        with pytest.raises(TableNotAllowedError):
            facade.column_types("pg_user")

    def test_the_answer_is_read_only(self) -> None:
        """The mapping handed out cannot change what the facade coerces."""
        facade = create_read_only_facade(kind="memory", store=MemoryStore())
        types = facade.column_types("leads")
        with pytest.raises(TypeError):
            types["score"] = column_type("text")  # type: ignore[index]
