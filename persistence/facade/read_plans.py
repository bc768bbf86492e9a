"""The facade's read plans: its decisions about a read's *shape*, made once and reused.

A read's shape is what the facade's checks look at apart from values: the table, each filter's
column and operator, the projected columns and the order (``include`` reads are not cached).
Every decision about a shape (table in the allow-list, columns allowed by the policy and known
to the backend, operators declared by its capabilities, redaction's refusals, the columns a read
naming none returns) depends only on it, on the facade's immutable policies and on the backend's
catalog; so :class:`ReadPlans` memoises them per facade, with the catalog facts they were made on.

A backend may offer a reader per shape (``read_statement(query)``, the PostgreSQL backend's
statement with its columns checked against its catalog): the plan keeps it, so a cached read
goes from the facade's checks straight to one round trip, checked once.

What is never cached: values. Every call still checks ``limit`` and ``offset`` and coerces every
filter value to its column's type, with the same errors as an uncached read; a plan is used only
while the backend reports the very catalog facts it was made on (a reloaded catalog makes a new
one). A shape that was refused is not cached: it is refused again, by the full checks.

Thread-safety: safe to share between threads; a plan is immutable and the table of plans is a
dict read and written whole (a race at worst makes the same plan twice).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, NamedTuple

from persistence.query import MAX_ORDER_KEYS, Filter, Order, Query
from persistence.values.types import ColumnType

__all__ = ["PLAN_CACHE_SIZE", "ReadPlan", "ReadPlans", "read_shape", "statement_key"]

#: Plans kept per facade; all are dropped when it is full (shapes are few in practice).
PLAN_CACHE_SIZE = 512


class ReadPlan(NamedTuple):
    """The checked parts of a read of one shape, and the catalog facts they were checked on."""

    table: str
    columns: tuple[str, ...] | None
    order: tuple[Order, ...]
    known: frozenset[str] | None
    types: Mapping[str, ColumnType]
    #: The backend's reader of this shape (its statement, built and checked once), when the
    #: backend offers one (``read_statement``): it binds the coerced values of each call.
    reader: Any = None
    #: What of the coerced filters the reader's statement depends on (see :func:`statement_key`):
    #: a call whose coerced filters differ (``is_null`` true or false, an enum filter that
    #: became another operator) takes the backend's own read.
    reader_key: Hashable = None

    def current(self, known: frozenset[str] | None, types: Mapping[str, ColumnType]) -> bool:
        """True when the backend still reports the catalog facts this plan was made on."""
        return (self.types is types or self.types == types) and (
            self.known is known or self.known == known
        )


class ReadPlans:
    """A facade's plans by shape (see the module docstring); ``size=0`` caches nothing."""

    __slots__ = ("_plans", "_size")

    def __init__(self, size: int = PLAN_CACHE_SIZE) -> None:
        self._size = size
        self._plans: dict[Hashable, ReadPlan] = {}

    def __len__(self) -> int:
        return len(self._plans)

    def get(self, shape: Hashable) -> ReadPlan | None:
        return self._plans.get(shape)

    def put(self, shape: Hashable, plan: ReadPlan) -> None:
        if not self._size:
            return
        if len(self._plans) >= self._size:
            self._plans = {}
        self._plans[shape] = plan


def read_shape(
    table: object,
    filters: tuple[Any, ...],
    columns: Any,
    order: Any,
) -> Hashable | None:
    """The shape of a read, or ``None`` when an argument is not of the exact types a plan is
    made for (such a read takes the full checks, which say what is wrong with it)."""
    if type(table) is not str:
        return None
    keys = []
    for flt in filters:
        if type(flt) is not Filter:
            return None
        keys.append((flt.column, flt.op))
    shown: tuple[str, ...] | None = None
    if columns is not None:
        if type(columns) not in (tuple, list):
            return None
        shown = tuple(columns)
        if any(type(c) is not str for c in shown):
            return None
    if type(order) not in (tuple, list) or len(order) > MAX_ORDER_KEYS:
        return None  # the full checks refuse too many keys before anything hashes them
    sorts = tuple(order)
    for item in sorts:
        if type(item) is not str and type(item) is not Order:
            return None
    return (table, tuple(keys), shown, sorts)


def statement_key(query: Query) -> Hashable:
    """What a statement depends on in a query of coerced filters beyond the shape: each
    filter's column and operator after coercion (an enum filter may become another operator),
    whether an ``is_null`` asks for NULL or for NOT NULL, and whether every match is counted."""
    return (
        tuple((f.column, f.op, f.value is True) for f in query.filters),
        query.counts_every_match,
    )
