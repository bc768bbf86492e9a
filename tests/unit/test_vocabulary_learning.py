"""Learning a table's vocabulary: a first page of a text column's values spares the grouped
count of a column with many values, and never changes what is learned."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any
from unittest import mock

import pytest
from hypothesis import given
from hypothesis import strategies as st

from persistence import MemoryStore, create_read_only_facade, vocabulary
from persistence.aggregate import AggregateResult
from persistence.errors import BackendUnavailableError, InvalidQueryError
from persistence.query import Page
from persistence.relations import Relation
from persistence.values.types import ColumnType
from persistence.vocabulary import SAMPLE_ROWS, SchemaVocabulary


class Observed:
    """A memory facade whose reads can be refused or fail, counting grouped counts."""

    def __init__(self, store: MemoryStore, *, read_error: Exception | None = None) -> None:
        self.facade = create_read_only_facade(kind="memory", store=store)
        self.read_error = read_error
        self.grouped: list[str] = []

    def tables(self) -> tuple[str, ...]:
        return self.facade.tables()

    def column_types(self, table: str) -> Mapping[str, ColumnType]:
        return self.facade.column_types(table)

    def relations(self, table: str) -> tuple[Relation, ...]:
        return self.facade.relations(table)

    def redacted_columns(self, table: str) -> Mapping[str, str]:
        return self.facade.redacted_columns(table)

    def aggregate(self, table: str, *, group_by: list[str], limit: int) -> AggregateResult:
        self.grouped.extend(group_by)
        return self.facade.aggregate(table, group_by=group_by, limit=limit)

    def read(
        self, table: str, *, columns: Sequence[str] | None, limit: int | None, exact_total: bool
    ) -> Page:
        if self.read_error is not None:
            raise self.read_error
        return self.facade.read(table, columns=columns, limit=limit, exact_total=exact_total)


def _store(columns: dict[str, list[str | None]]) -> MemoryStore:
    rows = len(next(iter(columns.values())))
    store = MemoryStore(schema={"leads": {"id": "bigint", **{c: "text" for c in columns}}})
    store.insert(
        "leads", [{"id": i + 1, **{c: v[i] for c, v in columns.items()}} for i in range(rows)]
    )
    return store


def _learned(facade: Any, max_values: int) -> dict[str, Any]:
    return SchemaVocabulary.learn(facade, max_values=max_values).to_dict()


#: The first page's rows in the property below: small, so examples reach past it cheaply.
_PAGE = 40


@st.composite
def _columns(draw: st.DrawFn) -> tuple[dict[str, list[str | None]], int]:
    """Two text columns over the same rows, their distinct values drawn around the limit: rows
    before a drawn split take values from one range, later rows (past the first page, when
    there are more rows than it holds) from another, so the page may hold fewer distinct values
    than the column, as many, or more than the limit."""
    max_values = draw(st.integers(1, 12))
    rows = draw(st.integers(1, _PAGE + 3 * max_values))
    rng = random.Random(draw(st.integers(0, 2**32)))
    columns: dict[str, list[str | None]] = {}
    for name in ("kind", "label"):
        split = draw(st.integers(0, rows))
        early, late = draw(st.integers(1, max_values + 2)), draw(st.integers(1, 3 * max_values))
        nulls = draw(st.floats(0, 0.3))
        columns[name] = [
            None
            if rng.random() < nulls
            else f"{name}{rng.randrange(early)}"
            if i < split
            else f"{name}{rng.randrange(1000, 1000 + late)}"
            for i in range(rows)
        ]
    return columns, max_values


class TestSampleChangesNothing:
    @given(_columns())
    def test_same_vocabulary_as_the_grouped_count_alone(
        self, drawn: tuple[dict[str, list[str | None]], int]
    ) -> None:
        columns, max_values = drawn
        store = _store(columns)
        refused = Observed(store, read_error=InvalidQueryError("no reads"))
        with mock.patch.object(vocabulary, "SAMPLE_ROWS", _PAGE):
            learned = _learned(Observed(store), max_values)
        assert [t["table"] for t in learned["tables"]] == ["leads"]
        assert learned == _learned(refused, max_values)


class TestManyValues:
    def test_skipped_without_a_grouped_count(self) -> None:
        """More distinct e-mail addresses in the first page than the limit: no grouped count
        for that column; the column of few values still gets one."""
        rows = SAMPLE_ROWS + 50
        store = _store(
            {
                "email": [f"n{i}@example.org" for i in range(rows)],
                "stage": [("won", "lost", None)[i % 3] for i in range(rows)],
            }
        )
        facade = Observed(store)
        learned = SchemaVocabulary.learn(facade).table("leads")
        assert learned is not None
        assert learned.columns["email"].values is None
        assert learned.columns["email"].skipped == "more than 200 distinct values"
        assert learned.columns["stage"].values == ("lost", "won")
        assert facade.grouped == ["stage"]

    def test_a_lost_backend_is_said_not_learned_around(self) -> None:
        store = _store({"stage": ["won", "lost"]})
        facade = Observed(store, read_error=BackendUnavailableError("gone"))
        with pytest.raises(BackendUnavailableError):
            SchemaVocabulary.learn(facade)
