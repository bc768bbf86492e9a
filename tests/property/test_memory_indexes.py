"""The memory store's hash indexes answer ``eq``/``ieq`` exactly as a scan would, through any
sequence of inserts, upserts (which may change the indexed value) and deletes."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from persistence import Filter, MemoryBackend, MemoryStore, Op
from persistence.query import Query
from persistence.values.like import fold_case

# Case pairs, PostgreSQL's special folds (İ, Σ) and a character lower() leaves alone (ß).
EMAIL = st.text(alphabet="aAbBİiΣσß@.", max_size=5)
WRITE = st.tuples(st.integers(1, 8), st.one_of(st.none(), EMAIL))
STEP = st.one_of(
    st.tuples(st.just("upsert"), st.lists(WRITE, min_size=1, max_size=3)),
    st.tuples(st.just("delete"), EMAIL),
)


def _apply(store: MemoryStore, steps: list[tuple[str, Any]]) -> None:
    backend = MemoryBackend(store)
    for kind, arg in steps:
        if kind == "upsert":
            # One row per id within a batch, as a database would insist.
            rows = {key: {"id": key, "email": email} for key, email in arg}
            backend.upsert("leads", list(rows.values()))
        else:
            backend.delete("leads", [Filter("email", Op.IEQ, arg)])


def _scan(store: MemoryStore, op: Op, value: Any) -> list[Any]:
    def hit(stored: Any) -> bool:
        if op is Op.IEQ:
            return isinstance(stored, str) and fold_case(stored) == fold_case(value)
        return stored is not None and type(stored) is type(value) and stored == value

    column = "id" if isinstance(value, int) else "email"
    return [row["id"] for row in store.rows("leads") if hit(row[column])]


class TestIndexesAgreeWithAScan:
    @given(steps=st.lists(STEP, max_size=12), probe=EMAIL, key=st.integers(0, 9))
    def test_lookups(self, steps: list[tuple[str, Any]], probe: str, key: int) -> None:
        indexed, plain = MemoryStore(), MemoryStore(indexes={"leads": ()})
        _apply(indexed, steps)
        _apply(plain, steps)
        assert indexed.rows("leads") == plain.rows("leads")
        for store in (indexed, plain):
            backend = MemoryBackend(store)
            for op, column, value in (
                (Op.IEQ, "email", probe),
                (Op.EQ, "email", probe),
                (Op.EQ, "id", key),
            ):
                page = backend.read(Query("leads", (Filter(column, op, value),)))
                assert [r["id"] for r in page.rows] == _scan(store, op, value)
                assert backend.count("leads", [Filter(column, op, value)]) == page.total_count
