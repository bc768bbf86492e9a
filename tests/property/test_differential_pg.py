"""Differential test: random tables and queries give identical pages on memory and PostgreSQL.

Where the two cannot agree, the strategies are constrained, and this is why:

* Text ordering and ``gt``/``lt`` on text follow the database's collation; the test database uses
  ``C.UTF-8`` (code-point order, as Python compares ``str``). Under a linguistic collation
  (``en_US``...) order on text columns differs from the memory backend; docs say so.
* ``icontains``/``ilike``/``ieq`` fold case with PostgreSQL's ``lower()`` (one character at a
  time); the memory backend's ``fold_case`` agrees on this server's C.UTF-8 ctype, including the
  characters where Python's own ``str.lower`` differs (``İ``, Greek capital sigma at the end of a
  word) and ``ß``, which ``str.casefold`` would widen: the alphabet has all of them.
* Values always have, or are a string that converts to, the column's type: one that does not is
  a typed error on every backend (tested in the contract suite).
* ``numeric(12, 2)`` values written have at most two decimals (PostgreSQL rounds more; the memory
  store keeps what it is given), and uuid keys are written explicitly (each backend draws its own
  random default).

The typed test runs on the uuid-keyed ``SUPABASE_STYLE`` schema and covers every column kind
the library coerces: uuid, integer, bigint, numeric, boolean, date, timestamp, timestamptz, text.
"""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from persistence import (
    Filter,
    MemoryStore,
    Op,
    Order,
    PersistenceAgent,
    ReadOnlyPersistenceFacade,
    create_persistence_agent,
    create_read_only_facade,
)
from persistence.schema import SUPABASE_STYLE
from persistence.values.like import fold_case
from tests.conftest import PostgresDatabase

pytestmark = pytest.mark.postgres

# Mixed case, unicode that folds one-to-one, and every character with a meaning somewhere:
# LIKE wildcards and escape, PostgREST's wildcard, quotes, separators.
ALPHABET = "aAbBzZ09 éÉüÜñÑжЖωΩ中😀ßẞİıiIΣσς%_\\*'\".,:()-"
TEXT_COLUMNS = ("email", "company_name", "status")
TIME_BASE = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)

# Short texts over the case-folding letters, so that values written and values asked for often
# differ only in case (``ieq`` and ``icontains`` then have matches to agree on).
texts = st.text(alphabet=ALPHABET, max_size=6) | st.text(alphabet="aAßẞİiIıΣσς", max_size=3)
scores = st.integers(min_value=-3, max_value=3)
times = st.integers(min_value=0, max_value=5).map(lambda h: TIME_BASE + dt.timedelta(hours=h))
ROW = st.fixed_dictionaries(
    {
        "email": st.none() | texts,
        "company_name": st.none() | texts,
        "status": st.none() | st.sampled_from(["new", "New", "won", "ÉTÉ", "été", ""]),
        "score": st.none() | scores,
        "created_at": st.none() | times,
    }
)
COLUMN_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "email": texts,
    "company_name": texts,
    "status": texts,
    "score": scores,
    "created_at": times,
    "id": st.integers(min_value=0, max_value=12),
}
COMPARISONS = (Op.EQ, Op.NEQ, Op.GT, Op.GTE, Op.LT, Op.LTE)
TEXT_OPS = (Op.IEQ, Op.ICONTAINS, Op.ILIKE)
# Words and their case variants, so that text operators have matches to agree on.
CASE_WORDS = st.sampled_from(
    ["ann@x.io", "ANN@X.IO", "Ann@X.io", "a_n@x.io", "a%n@x.io", "straße", "STRASSE", "STRAẞE",
     "ΟΔΟΣ", "οδος", "οδοσ", "İstanbul", "istanbul", "ıstanbul", "ISTANBUL", "", "*", "A*N"]
)  # fmt: skip


@st.composite
def filters(draw: st.DrawFn) -> Filter:
    column = draw(st.sampled_from(sorted(COLUMN_VALUES)))
    ops = [*COMPARISONS, Op.IN, Op.IS_NULL]
    if column in TEXT_COLUMNS:
        ops += [Op.ICONTAINS, Op.ILIKE, Op.IEQ]
    op = draw(st.sampled_from(ops))
    values = COLUMN_VALUES[column]
    if op is Op.IS_NULL:
        return Filter(column, op, draw(st.booleans()))
    if op is Op.IN:
        return Filter(column, op, draw(st.lists(values, min_size=1, max_size=4)))
    if op is Op.ILIKE:
        pattern = draw(st.text(alphabet=ALPHABET + "%%__", max_size=6))
        if (len(pattern) - len(pattern.rstrip("\\"))) % 2:
            pattern += "\\"  # a lone trailing escape is refused by Filter; escape it
        return Filter(column, op, pattern)
    return Filter(column, op, draw(values))


QUERY = st.fixed_dictionaries(
    {
        "filters": st.lists(filters(), max_size=3),
        "order": st.lists(
            st.builds(Order, st.sampled_from(sorted(COLUMN_VALUES)), st.booleans()),
            max_size=2,
            unique_by=lambda order: order.column,
        ),
        "limit": st.none() | st.integers(min_value=0, max_value=8),
        "offset": st.integers(min_value=0, max_value=8),
    }
)


class TestDifferentialMemoryVsPostgres:
    @given(rows=st.lists(ROW, max_size=12), queries=st.lists(QUERY, min_size=1, max_size=6))
    def test_same_pages_and_counts(
        self,
        pg: tuple[PostgresDatabase, PersistenceAgent, ReadOnlyPersistenceFacade],
        rows: list[dict[str, Any]],
        queries: list[dict[str, Any]],
    ) -> None:
        """Every query returns the same rows, in the same order, and the same total."""
        database, writer, reader = pg
        database.truncate()
        store = MemoryStore()
        memory = create_read_only_facade(kind="memory", store=store)
        create_persistence_agent(kind="memory", store=store).batch("leads", rows)
        if rows:
            writer.batch("leads", rows)
        for query in queries:
            note(repr(query))
            got = reader.read("leads", **query)
            want = memory.read("leads", **query)
            assert got.rows == want.rows
            assert got.total_count == want.total_count
            assert reader.count("leads", query["filters"]) == want.total_count

    @given(
        emails=st.lists(st.none() | CASE_WORDS, max_size=10),
        asked=st.lists(st.tuples(st.sampled_from(TEXT_OPS), CASE_WORDS), min_size=1, max_size=8),
    )
    def test_text_operators_fold_case_alike(
        self,
        pg: tuple[PostgresDatabase, PersistenceAgent, ReadOnlyPersistenceFacade],
        emails: list[str | None],
        asked: list[tuple[Op, str]],
    ) -> None:
        """ieq, icontains and ilike over words that differ only in case (and in the letters
        where Python's own folding differs) select the same rows on both backends."""
        database, writer, reader = pg
        database.truncate()
        store = MemoryStore()
        memory = create_read_only_facade(kind="memory", store=store)
        rows = [{"email": email} for email in emails]
        create_persistence_agent(kind="memory", store=store).batch("leads", rows)
        if rows:
            writer.batch("leads", rows)
        for op, value in asked:
            flt = [Filter("email", op, value)]
            want = memory.read("leads", flt, columns=["id"])
            assert reader.read("leads", flt, columns=["id"]) == want, (op, value)


# Every code point a ``text`` value can hold: no NUL, no surrogate.
ANY_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"))


@pytest.fixture(scope="module")
def lower_on_server(postgres_db: PostgresDatabase) -> Iterator[Callable[[list[str]], list[str]]]:
    """PostgreSQL's ``lower()`` of each text, in one round trip, over one connection."""
    import psycopg

    with psycopg.connect(postgres_db.reader_dsn) as conn:

        def lower(values: list[str]) -> list[str]:
            rows = conn.execute(
                "SELECT lower(v) FROM unnest(%s::text[]) WITH ORDINALITY AS u(v, n) ORDER BY n",
                (values,),
            ).fetchall()
            return [row[0] for row in rows]

        yield lower


class TestFoldCaseMatchesLower:
    """The memory backend's case folding is PostgreSQL's ``lower()`` on this server."""

    def test_every_code_point(self, lower_on_server: Callable[[list[str]], list[str]]) -> None:
        """Each of the 1,112,062 characters lowers to the same text on both sides."""
        characters = [chr(c) for c in range(1, 0x110000) if not 0xD800 <= c <= 0xDFFF]
        server = lower_on_server(characters)
        differ = [(c, server[i]) for i, c in enumerate(characters) if fold_case(c) != server[i]]
        assert differ == []

    @given(
        values=st.lists(
            ANY_TEXT | st.text(alphabet="ΣσςİIıißẞ AΟΔ.@", max_size=12), min_size=1, max_size=20
        )
    )
    def test_any_text(
        self, lower_on_server: Callable[[list[str]], list[str]], values: list[str]
    ) -> None:
        """Whole strings too: no context (a final sigma, a dotted I) changes the folding."""
        assert [fold_case(v) for v in values] == lower_on_server(values)

    def test_known_divergences_of_python(
        self, lower_on_server: Callable[[list[str]], list[str]]
    ) -> None:
        """Where ``str.lower``/``str.casefold`` differ from the server, ``fold_case`` does not."""
        values = ["ΟΔΟΣ", "İstanbul", "STRAẞE", "straße"]
        server = lower_on_server(values)
        assert server == [fold_case(v) for v in values]
        assert server != [v.lower() for v in values]
        assert server != [v.casefold() for v in values]


# --- every column kind: the uuid-keyed Supabase-style schema ------------------------------------

DAY0 = dt.date(2025, 3, 1)
NAIVE0 = dt.datetime(2025, 3, 1, 9, 0)
ZONES = st.sampled_from(
    [dt.UTC, dt.timezone(dt.timedelta(hours=2)), dt.timezone(-dt.timedelta(hours=5))]
)
UUIDS = [uuid.UUID(int=n * 0x0101_0101_0101_0101_0101_0101_0101_0101) for n in range(1, 9)]

uuids = st.sampled_from(UUIDS)
bigints = st.integers(min_value=-3, max_value=3).map(lambda n: n * 10**12)
money = st.integers(min_value=-300, max_value=300).map(lambda n: decimal.Decimal(n).scaleb(-2))
days = st.integers(min_value=0, max_value=4).map(lambda n: DAY0 + dt.timedelta(days=n))
naive_times = st.integers(min_value=0, max_value=4).map(lambda h: NAIVE0 + dt.timedelta(hours=h))
aware_times = st.builds(
    lambda h, zone: (TIME_BASE + dt.timedelta(hours=h)).astimezone(zone),
    st.integers(min_value=0, max_value=5),
    ZONES,
)
TYPED_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "id": uuids,
    "client_id": uuids,
    "score": scores,
    "employee_count": bigints,
    "deal_value": money,
    "is_qualified": st.booleans(),
    "next_follow_up": days,
    "last_contacted_at": naive_times,
    "created_at": aware_times,
    "email": texts,
    "status": st.sampled_from(["new", "New", "won", "ÉTÉ", "été", ""]),
}
TYPED_ROW = st.fixed_dictionaries(
    {c: TYPED_VALUES[c] if c == "id" else st.none() | TYPED_VALUES[c] for c in TYPED_VALUES}
)


def _as_text(value: Any) -> str:
    """How a person or a model would write ``value``: ISO 8601, decimal digits, uuid text."""
    if isinstance(value, bool):
        return "yes" if value else "off"
    if isinstance(value, dt.date | dt.datetime):
        return value.isoformat()
    return str(value).upper() if isinstance(value, uuid.UUID) else str(value)


def _spelled(values: st.SearchStrategy[Any], column: str) -> st.SearchStrategy[Any]:
    """A value as itself or, except on text columns, as the string that means it."""
    if column in ("email", "status"):
        return values
    return values | values.map(_as_text)


@st.composite
def typed_filters(draw: st.DrawFn) -> Filter:
    column = draw(st.sampled_from(sorted(TYPED_VALUES)))
    ops = [*COMPARISONS, Op.IN, Op.IS_NULL]
    if column == "email":
        ops.append(Op.ICONTAINS)
    op = draw(st.sampled_from(ops))
    values = _spelled(TYPED_VALUES[column], column)
    if op is Op.IS_NULL:
        return Filter(column, op, draw(st.booleans()))
    if op is Op.IN:
        return Filter(column, op, draw(st.lists(values, min_size=1, max_size=4)))
    return Filter(column, op, draw(values))


TYPED_QUERY = st.fixed_dictionaries(
    {
        "filters": st.lists(typed_filters(), max_size=3),
        "order": st.lists(
            st.builds(Order, st.sampled_from(sorted(TYPED_VALUES)), st.booleans()),
            max_size=2,
            unique_by=lambda order: order.column,
        ),
        "limit": st.none() | st.integers(min_value=0, max_value=6),
        "offset": st.integers(min_value=0, max_value=6),
    }
)


class TestDifferentialEveryColumnKind:
    @given(
        rows=st.lists(TYPED_ROW, max_size=8, unique_by=lambda row: row["id"]),
        queries=st.lists(TYPED_QUERY, min_size=1, max_size=6),
    )
    def test_same_pages_and_counts_for_every_kind(
        self,
        pg_typed: tuple[PostgresDatabase, PersistenceAgent, ReadOnlyPersistenceFacade],
        rows: list[dict[str, Any]],
        queries: list[dict[str, Any]],
    ) -> None:
        """uuid, integer, bigint, numeric, boolean, date, timestamp, timestamptz and text columns,
        filtered with Python values or their strings, give the same pages on both backends."""
        database, writer, reader = pg_typed
        database.truncate()
        store = MemoryStore(schema=SUPABASE_STYLE.types)
        memory = create_read_only_facade(kind="memory", store=store)
        create_persistence_agent(kind="memory", store=store).batch("leads", rows)
        if rows:
            # A lead's client must exist (leads.client_id is a foreign key).
            database.add_clients(row["client_id"] for row in rows)
            writer.batch("leads", rows)
        columns = sorted(TYPED_VALUES)
        for query in queries:
            note(repr(query))
            got = reader.read("leads", columns=columns, **query)
            want = memory.read("leads", columns=columns, **query)
            assert got.rows == want.rows
            assert got.total_count == want.total_count
            assert reader.count("leads", query["filters"]) == want.total_count
