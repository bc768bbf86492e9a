"""Shared by the read-plan tests on memory and PostgreSQL: random reads, and what a facade
answers to one (its page, or its error's type and message)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from hypothesis import strategies as st

from persistence import Filter, Op, Order, PersistenceError, create_persistence_agent

if TYPE_CHECKING:
    from tests.conftest import PostgresDatabase

__all__ = ["LEADS", "holding_leads", "outcome", "reads"]

LEADS = [
    {
        "email": f"user{i}@{'acme' if i % 3 else 'globex'}.io",
        "company_name": ["Acme Inc.", "ACME corp", "Globex", "Initech"][i % 4],
        "status": ["new", "won", "lost"][i % 3],
        "score": None if i % 5 == 0 else i * 7 % 50,
    }
    for i in range(12)
]


@contextmanager
def holding_leads(database: PostgresDatabase) -> Iterator[PostgresDatabase]:
    """``database`` holding :data:`LEADS` (written once through a writer), emptied after."""
    database.truncate()
    with create_persistence_agent(kind="postgres", dsn=database.writer_dsn) as writer:
        writer.batch("leads", LEADS)
    yield database
    database.truncate()


_COLUMNS = ("id", "email", "company_name", "status", "score")
_OPS = (Op.EQ, Op.NEQ, Op.GT, Op.LTE, Op.IN, Op.IS_NULL, Op.ICONTAINS, Op.IEQ)
_VALUES = st.one_of(
    st.integers(-5, 60),
    st.sampled_from(["7", "acme", "ACME", "won", "user3@acme.io", "x", "12abc", "3.5"]),
    st.booleans(),
)


@st.composite
def _filter(draw: st.DrawFn) -> Filter | None:
    column, op = draw(st.sampled_from(_COLUMNS)), draw(st.sampled_from(_OPS))
    if op is Op.IS_NULL:
        value: Any = draw(st.booleans())
    elif op is Op.IN:
        value = draw(st.lists(_VALUES, min_size=1, max_size=3))
    else:
        value = draw(_VALUES)
    try:
        return Filter(column, op, value)
    except PersistenceError:
        return None  # a value no Filter takes: not a read to compare


@st.composite
def reads(draw: st.DrawFn) -> dict[str, Any]:
    """Keyword arguments of one ``facade.read("leads", ...)``: filters, columns, order, page."""
    filters = [f for f in draw(st.lists(_filter(), max_size=3)) if f is not None]
    columns = draw(st.none() | st.lists(st.sampled_from(_COLUMNS), min_size=1, max_size=3))
    order = draw(
        st.lists(
            st.sampled_from(_COLUMNS).flatmap(
                lambda c: st.sampled_from([c, Order(c), Order(c, descending=True)])
            ),
            max_size=2,
        )
    )
    return {
        "filters": filters,
        "columns": columns,
        "order": order,
        "limit": draw(st.sampled_from([None, 0, 3, 50, -1])),
        "offset": draw(st.sampled_from([0, 2, -1])),
    }


def outcome(facade: Any, read: dict[str, Any]) -> tuple[Any, ...]:
    """The rows and total of the read, or its error's type and message."""
    try:
        page = facade.read("leads", **read)
    except PersistenceError as exc:
        return ("error", type(exc).__name__, str(exc))
    return ("page", page.rows, page.total_count)
