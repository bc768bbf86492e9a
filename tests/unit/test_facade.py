"""The facade's own checks: argument shapes, declared operators, one column look-up per call."""

from __future__ import annotations

import decimal
from collections.abc import Mapping
from typing import Any

import pytest

from persistence import (
    AccessPolicy,
    Capabilities,
    ColumnNotAllowedError,
    Filter,
    InvalidQueryError,
    MemoryBackend,
    MemoryStore,
    Op,
    ReadOnlyPersistenceFacade,
    UnsupportedOperatorError,
    create_read_only_facade,
)
from persistence.values.types import ColumnType
from tests.support.memory import SpyBackend, one_lead_store


@pytest.fixture
def facade() -> Any:
    return create_read_only_facade(kind="memory", store=MemoryStore())


@pytest.fixture
def store() -> MemoryStore:
    return one_lead_store()


class TestArgumentShapes:
    @pytest.mark.parametrize(
        "kwargs",
        [
            {"filters": None},
            {"filters": 5},
            {"order": 5},
            {"order": None},
            {"columns": 5},
        ],
    )
    def test_read_with_non_iterable_arguments_raises_a_typed_error(
        self, facade: Any, kwargs: dict[str, Any]
    ) -> None:
        """A non-iterable filters/order/columns is an InvalidQueryError, never a bare TypeError."""
        with pytest.raises(InvalidQueryError):
            facade.read("leads", **kwargs)

    @pytest.mark.parametrize("filters", [None, 5, object()])
    def test_count_with_non_iterable_filters_raises_a_typed_error(
        self, facade: Any, filters: object
    ) -> None:
        """count() refuses non-iterable filters with an InvalidQueryError too."""
        with pytest.raises(InvalidQueryError):
            facade.count("leads", filters)

    @pytest.mark.parametrize("kwargs", [{"columns": "email"}, {"order": "email"}])
    def test_a_bare_string_is_refused_not_split_into_letters(
        self, facade: Any, kwargs: dict[str, Any]
    ) -> None:
        """columns="email" is refused with a hint, rather than read as the columns e, m, a..."""
        with pytest.raises(InvalidQueryError, match=r"\['email'\]"):
            facade.read("leads", **kwargs)

    def test_a_read_with_a_nan_decimal_raises_no_decimal_error(self, facade: Any) -> None:
        """Through the facade, a non-finite Decimal is the library's typed error."""
        with pytest.raises(InvalidQueryError):
            facade.read("leads", [Filter("score", Op.LT, decimal.Decimal("NaN"))])


class _EqualityOnly(SpyBackend):
    """A backend that declares only ``eq`` and ``in``."""

    capabilities = Capabilities(operators=frozenset({Op.EQ, Op.IN}))


class TestDeclaredOperators:
    def test_capabilities_say_which_operators_are_supported(self) -> None:
        """supports() answers from the declared operators; the default declares every one."""
        declared = Capabilities(operators=frozenset({Op.EQ}))
        assert declared.supports(Op.EQ)
        assert not declared.supports(Op.ICONTAINS)
        assert all(Capabilities().supports(op) for op in Op)

    @pytest.mark.parametrize("call", ["read", "count"])
    def test_an_undeclared_operator_is_refused_before_the_backend_reads(
        self, store: MemoryStore, call: str
    ) -> None:
        """A filter the backend does not declare is UnsupportedOperatorError; nothing is read."""
        backend = _EqualityOnly(store)
        facade = ReadOnlyPersistenceFacade(backend, AccessPolicy.read_only())
        with pytest.raises(UnsupportedOperatorError) as info:
            getattr(facade, call)("leads", [Filter("company_name", Op.ICONTAINS, "acme")])
        assert (info.value.operator, info.value.backend) == ("icontains", "memory")
        assert backend.calls == []

    def test_declared_operators_are_served(self, store: MemoryStore) -> None:
        """A filter with a declared operator reaches the backend, and the facade only passes
        through what it answers."""
        backend = _EqualityOnly(store)
        facade = ReadOnlyPersistenceFacade(backend, AccessPolicy.read_only())
        page = facade.read("leads", [Filter("email", Op.EQ, "a@x.io")], limit=5, offset=0)
        assert [row["email"] for row in page.rows] == ["a@x.io"]
        assert facade.capabilities is backend.capabilities
        assert backend.calls == ["read"]


class _ColumnsSpy(MemoryBackend):
    """A memory backend that records each ``columns`` and ``column_types`` call (Supabase may
    send a request for one)."""

    def __init__(self, store: MemoryStore) -> None:
        super().__init__(store)
        self.column_calls: list[str] = []

    def columns(self, table: str) -> frozenset[str] | None:
        self.column_calls.append(table)
        return super().columns(table)

    def column_types(self, table: str) -> Mapping[str, ColumnType]:
        self.column_calls.append(table)
        return super().column_types(table)


class TestColumnLookups:
    def test_read_under_a_column_policy_asks_for_columns_once(self, store: MemoryStore) -> None:
        """One read under a column rule asks the backend for the table's columns once."""
        spy = _ColumnsSpy(store)
        policy = AccessPolicy.read_only(columns={"leads": ["id", "email"]})
        facade = ReadOnlyPersistenceFacade(spy, policy)
        page = facade.read("leads", [Filter("email", Op.EQ, "a@x.io")], order=["email"])
        assert page.rows == [{"email": "a@x.io", "id": 1}]
        assert spy.column_calls == ["leads"]

    def test_column_outside_the_policy_is_refused_before_the_backend_is_asked(
        self, store: MemoryStore
    ) -> None:
        """A read naming a column the policy forbids is refused without asking the backend."""
        spy = _ColumnsSpy(store)
        policy = AccessPolicy.read_only(columns={"leads": ["id", "email"]})
        facade = ReadOnlyPersistenceFacade(spy, policy)
        with pytest.raises(ColumnNotAllowedError) as info:
            facade.read("leads", [Filter("phone", Op.EQ, "555-0100")])
        assert info.value.column == "phone"
        assert spy.column_calls == []

    def test_count_asks_for_columns_once(self, store: MemoryStore) -> None:
        """A count under a column rule asks the backend for the table's columns once too."""
        spy = _ColumnsSpy(store)
        policy = AccessPolicy.read_only(columns={"leads": ["id", "email"]})
        facade = ReadOnlyPersistenceFacade(spy, policy)
        assert facade.count("leads", [Filter("email", Op.EQ, "a@x.io")]) == 1
        assert spy.column_calls == ["leads"]
