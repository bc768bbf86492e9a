"""The memory backend compares values as PostgreSQL does."""

from __future__ import annotations

from typing import Any

import pytest

from persistence import (
    Filter,
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
    def test_a_bool_never_matches_an_integer(self, seeded: Any, flt: Filter) -> None:
        """As on PostgreSQL (where it is a type error), True is not 1 and False is not 0."""
        assert seeded.read("leads", [flt]).total_count == 0

    def test_numbers_still_compare_across_int_and_float(self, seeded: Any) -> None:
        """Integers and floats stay comparable, as numeric types are in SQL."""
        assert seeded.count("leads", [Filter("score", Op.GTE, 1.0)]) == 2
