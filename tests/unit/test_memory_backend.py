"""The memory backend compares values as PostgreSQL does."""

from __future__ import annotations

from typing import Any

import pytest

from persistence import (
    Filter,
    InvalidQueryError,
    MemoryStore,
    Op,
    create_persistence_agent,
    create_read_only_facade,
)


class TestBoolIsNotANumber:
    @pytest.fixture
    def seeded(self) -> Any:
        store = MemoryStore()
        writer = create_persistence_agent(kind="memory", store=store)
        writer.batch("leads", [{"score": 1}, {"score": 0}, {"score": 2}])
        return create_read_only_facade(kind="memory", store=store)

    @pytest.mark.parametrize(
        "flt",
        [
            Filter("score", Op.EQ, True),
            Filter("score", Op.NEQ, False),
            Filter("score", Op.GT, False),
            Filter("score", Op.LTE, True),
            Filter("score", Op.IN, [True, False]),
        ],
    )
    def test_a_bool_on_an_integer_column_is_a_type_error(self, seeded: Any, flt: Filter) -> None:
        """As on PostgreSQL, a boolean compared with an integer column is a typed error."""
        with pytest.raises(InvalidQueryError, match=r"leads\.score is integer"):
            seeded.read("leads", [flt])
        with pytest.raises(InvalidQueryError, match=r"leads\.score is integer"):
            seeded.count("leads", [flt])

    @pytest.mark.parametrize(
        "flt",
        [
            Filter("score", Op.EQ, True),
            Filter("score", Op.NEQ, False),
            Filter("score", Op.GT, False),
            Filter("score", Op.LTE, True),
            Filter("score", Op.IN, [True, False]),
        ],
    )
    def test_a_bool_never_matches_an_untyped_integer(self, flt: Filter) -> None:
        """On an untyped column, True is not 1 and False is not 0: they never match."""
        store = MemoryStore(schema={"leads": ["id", "score"]})
        create_persistence_agent(kind="memory", store=store).batch(
            "leads", [{"score": 1}, {"score": 0}, {"score": 2}]
        )
        reader = create_read_only_facade(kind="memory", store=store)
        assert reader.read("leads", [flt]).total_count == 0

    def test_numbers_still_compare_across_int_and_float(self, seeded: Any) -> None:
        """Integers and floats stay comparable, as numeric types are in SQL."""
        assert seeded.count("leads", [Filter("score", Op.GTE, 1.0)]) == 2


class TestInLists:
    def test_in_matches_as_equality_does_over_any_row_value(self) -> None:
        """`in` matches what `eq` would (1.0 is 1, True is not 1) and a JSON value in a row, which
        equals no scalar, matches nothing rather than raising."""
        store = MemoryStore(schema={"leads": ["id", "value"]})
        create_persistence_agent(kind="memory", store=store).batch(
            "leads",
            [{"value": 1}, {"value": True}, {"value": [1]}, {"value": {"a": 1}}, {"value": "1"}],
        )
        reader = create_read_only_facade(kind="memory", store=store)
        page = reader.read("leads", [Filter("value", Op.IN, [1.0, "x"])])
        assert [row["id"] for row in page.rows] == [1]
        page = reader.read("leads", [Filter("value", Op.IN, [True])])
        assert [row["id"] for row in page.rows] == [2]


class TestReadOnlyBackend:
    def test_a_backend_built_read_only_refuses_writes_itself(self) -> None:
        """The factory builds the read-only facade's memory backend read-only: its own insert,
        upsert and delete refuse, as the PostgreSQL and Supabase backends do; a writer's do not."""
        from persistence import PersistencePermissionError
        from persistence.backends.memory import create_backend

        store = MemoryStore()
        reader = create_backend(read_only=True, store=store)
        for write in (
            lambda: reader.insert("leads", [{"email": "a@x.io"}]),
            lambda: reader.upsert("leads", [{"id": 1, "email": "a@x.io"}]),
            lambda: reader.delete("leads", [Filter("id", Op.EQ, 1)]),
        ):
            with pytest.raises(PersistencePermissionError, match="memory backend is read-only"):
                write()
        assert store.rows("leads") == []
        create_backend(read_only=False, store=store).insert("leads", [{"email": "a@x.io"}])
        assert len(store.rows("leads")) == 1
