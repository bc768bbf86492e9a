"""The facade's read plans (decisions cached by a read's shape), on the memory backend."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings

from persistence import (
    AccessPolicy,
    ColumnNotAllowedError,
    Filter,
    InvalidQueryError,
    MemoryBackend,
    MemoryStore,
    Op,
    Order,
    Page,
    Query,
    ReadOnlyPersistenceFacade,
    RedactionPolicy,
    TableNotAllowedError,
    create_persistence_agent,
    create_read_only_facade,
)
from persistence.facade.read_plans import ReadPlans, read_shape
from persistence.values.types import ColumnType
from tests.support.read_plans import LEADS, outcome, reads


def _store() -> MemoryStore:
    store = MemoryStore()
    create_persistence_agent(kind="memory", store=store).batch("leads", LEADS)
    return store


@pytest.fixture(scope="module")
def store() -> MemoryStore:
    return _store()


def _uncached(facade: ReadOnlyPersistenceFacade) -> ReadOnlyPersistenceFacade:
    facade._plans = ReadPlans(0)
    return facade


class TestPlanCache:
    def test_a_read_caches_its_shape_once(self, store: MemoryStore) -> None:
        """Reads of one shape with other values share one plan; another shape makes another."""
        facade = create_read_only_facade(kind="memory", store=store)
        for lead_id in (1, 2, 3):
            facade.read("leads", [Filter("id", Op.EQ, lead_id)], limit=5)
        assert len(facade._plans) == 1
        facade.read("leads", [Filter("id", Op.GT, 1)], limit=5)
        assert len(facade._plans) == 2

    def test_a_cached_shape_still_coerces_and_checks_values(self, store: MemoryStore) -> None:
        """A value the column's type refuses is refused on a cached shape too, and a value it
        takes is coerced ("7" for a bigint)."""
        facade = create_read_only_facade(kind="memory", store=store)
        assert facade.read("leads", [Filter("id", Op.EQ, 7)]).rows[0]["id"] == 7
        assert facade.read("leads", [Filter("id", Op.EQ, "7")]).rows[0]["id"] == 7
        with pytest.raises(InvalidQueryError, match=r"leads\.id"):
            facade.read("leads", [Filter("id", Op.EQ, "seven")])
        with pytest.raises(InvalidQueryError) as info:
            facade.read("leads", [Filter("id", Op.EQ, 7)], limit=-1)
        assert info.value.field == "limit"
        with pytest.raises(InvalidQueryError) as info:
            facade.read("leads", [Filter("id", Op.EQ, 7)], offset=-3)
        assert info.value.field == "offset"
        assert len(facade._plans) == 1

    def test_the_backend_gets_coerced_values_on_a_cached_shape(self) -> None:
        """The query reaching the backend carries values coerced by the facade, every call."""
        backend = _Recording(_store())
        facade = ReadOnlyPersistenceFacade(backend, AccessPolicy.read_only())
        for value in ("7", "8", 9):
            facade.read("leads", [Filter("id", Op.IN, [value, "1"])], limit=5)
        assert [q.filters[0].value for q in backend.queries] == [(7, 1), (8, 1), (9, 1)]
        assert len(facade._plans) == 1

    def test_shapes_that_differ_only_in_what_is_not_a_value_are_not_confused(
        self, store: MemoryStore
    ) -> None:
        """Column, operator, projection and order are each part of the shape."""
        facade = create_read_only_facade(kind="memory", store=store)
        eq = facade.read("leads", [Filter("score", Op.EQ, 7)])
        neq = facade.read("leads", [Filter("score", Op.NEQ, 7)])
        assert eq.total_count + neq.total_count == sum(1 for r in LEADS if r["score"] is not None)
        assert facade.read("leads", [Filter("id", Op.EQ, 7)]).total_count == 1
        assert facade.read("leads", [Filter("score", Op.EQ, 7)]).total_count == eq.total_count
        narrow = facade.read("leads", columns=["id"], limit=1)
        assert list(narrow.rows[0]) == ["id"]
        assert len(facade.read("leads", limit=1).rows[0]) > 1
        up = facade.read("leads", order=["id"], limit=1).rows[0]["id"]
        down = facade.read("leads", order=[Order("id", descending=True)], limit=1).rows[0]["id"]
        assert (up, down) == (1, len(LEADS))

    def test_a_refused_shape_is_refused_again_and_never_cached(self) -> None:
        """A column outside the policy is refused on every call; no plan is kept for it."""
        store = _store()
        policy = AccessPolicy.read_only(columns={"leads": ["id", "email"]})
        facade = ReadOnlyPersistenceFacade(MemoryBackend(store), policy)
        for _ in range(2):
            with pytest.raises(ColumnNotAllowedError):
                facade.read("leads", [Filter("phone", Op.EQ, "555")])
            with pytest.raises(TableNotAllowedError):
                facade.read("users", [Filter("id", Op.EQ, 1)])
        assert len(facade._plans) == 0

    def test_a_cached_shape_keeps_the_policy_columns(self) -> None:
        """A read naming no column returns only the policy's columns, cached or not."""
        store = _store()
        policy = AccessPolicy.read_only(columns={"leads": ["id", "email"]})
        facade = ReadOnlyPersistenceFacade(MemoryBackend(store), policy)
        for lead_id in (1, 2):
            row = facade.read("leads", [Filter("id", Op.EQ, lead_id)]).rows[0]
            assert set(row) == {"id", "email"}

    def test_redaction_refusals_hold_on_a_cached_shape(self) -> None:
        """A fuzzy filter on a redacted column is refused every time."""
        redaction = RedactionPolicy({"leads": {"email": "mask:email"}}, lookups="all")
        facade = create_read_only_facade(kind="memory", store=_store(), redaction=redaction)
        facade.read("leads", [Filter("email", Op.EQ, "user1@acme.io")])
        for _ in range(2):
            with pytest.raises(ColumnNotAllowedError, match="redacted"):
                facade.read("leads", [Filter("email", Op.ICONTAINS, "acme")])

    def test_a_changed_catalog_makes_a_new_plan(self) -> None:
        """When the backend reports other columns, a cached shape is checked anew: a column it
        no longer has is refused."""
        store = _store()
        backend = _Shrinking(store)
        facade = ReadOnlyPersistenceFacade(backend, AccessPolicy.read_only())
        assert facade.read("leads", [Filter("score", Op.EQ, 7)]).total_count >= 0
        backend.without = "score"
        with pytest.raises(ColumnNotAllowedError) as info:
            facade.read("leads", [Filter("score", Op.EQ, 7)])
        assert info.value.column == "score"

    @settings(max_examples=150, deadline=None)
    @given(reads())
    def test_cached_and_uncached_reads_answer_alike(self, read: dict[str, Any]) -> None:
        """Whatever the read: the facade with plans answers (rows, or error and message) as
        the facade without, on its first call of a shape and on the cached ones after."""
        store = _MODULE_STORE
        cached = create_read_only_facade(kind="memory", store=store)
        uncached = _uncached(create_read_only_facade(kind="memory", store=store))
        expected = outcome(uncached, read)
        assert outcome(cached, read) == expected
        assert outcome(cached, read) == expected  # the shape's plan, if it was accepted


_MODULE_STORE = _store()


class _Recording(MemoryBackend):
    """A memory backend that keeps every query it is asked."""

    def __init__(self, store: MemoryStore) -> None:
        super().__init__(store)
        self.queries: list[Query] = []

    def read(self, query: Query) -> Page:
        self.queries.append(query)
        return super().read(query)


class _Shrinking(MemoryBackend):
    """A memory backend that can stop reporting one column (as after a migration)."""

    without: str | None = None

    def column_types(self, table: str) -> Mapping[str, ColumnType]:
        types = super().column_types(table)
        if self.without is None:
            return types
        return {c: t for c, t in types.items() if c != self.without}

    def columns(self, table: str) -> frozenset[str] | None:
        return frozenset(self.column_types(table))


class TestReadShape:
    def test_values_are_not_part_of_the_shape(self) -> None:
        """Two reads differing only in values have one shape."""
        one = read_shape("leads", (Filter("id", Op.EQ, 1),), None, ())
        two = read_shape("leads", (Filter("id", Op.EQ, 2),), None, ())
        assert one == two and one is not None

    @pytest.mark.parametrize(
        ("table", "filters", "columns", "order"),
        [
            (b"leads", (), None, ()),
            ("leads", ({"column": "id"},), None, ()),
            ("leads", (), "id", ()),
            ("leads", (), ["id", 5], ()),
            ("leads", (), None, "id"),
            ("leads", (), None, [("id", "desc")]),
        ],
    )
    def test_arguments_of_other_types_have_no_shape(
        self, table: Any, filters: Any, columns: Any, order: Any
    ) -> None:
        """Anything but the exact types takes the full checks (which name the mistake)."""
        assert read_shape(table, filters, columns, order) is None

    def test_malformed_arguments_raise_the_same_typed_errors(self, store: MemoryStore) -> None:
        """A str as columns or order is an InvalidQueryError, as before plans existed."""
        facade = create_read_only_facade(kind="memory", store=store)
        with pytest.raises(InvalidQueryError):
            facade.read("leads", columns="id")  # type: ignore[arg-type]
        with pytest.raises(InvalidQueryError):
            facade.read("leads", order="id")  # type: ignore[arg-type]
