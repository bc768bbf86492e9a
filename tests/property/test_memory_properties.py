"""Properties of reads on the memory backend: pagination, counting, filter order, threads."""

from __future__ import annotations

import threading

from hypothesis import given
from hypothesis import strategies as st

from persistence import (
    Filter,
    MemoryStore,
    Op,
    Order,
    create_persistence_agent,
    create_read_only_facade,
)

TEXT = st.text(alphabet="aAbB%_\\ é*", max_size=6)
ROWS = st.lists(
    st.fixed_dictionaries(
        {
            "email": st.one_of(st.none(), TEXT),
            "company_name": st.one_of(st.none(), TEXT),
            "score": st.one_of(st.none(), st.integers(-3, 3)),
        }
    ),
    max_size=25,
)
FILTERS = st.one_of(
    st.builds(Filter, st.just("company_name"), st.just(Op.ICONTAINS), TEXT),
    st.builds(
        Filter,
        st.just("score"),
        st.sampled_from([Op.EQ, Op.NEQ, Op.GT, Op.LTE]),
        st.integers(-3, 3),
    ),
    st.builds(Filter, st.just("email"), st.just(Op.IS_NULL), st.booleans()),
    st.builds(
        Filter,
        st.just("score"),
        st.just(Op.IN),
        st.lists(st.integers(-3, 3), min_size=1, max_size=3),
    ),
)
ORDERS = st.lists(
    st.builds(Order, st.sampled_from(["email", "company_name", "score", "id"]), st.booleans()),
    max_size=2,
    unique_by=lambda order: order.column,  # a column twice is refused (one sort key each)
)


def seeded(rows: list[dict[str, object]]):  # type: ignore[no-untyped-def]
    store = MemoryStore()
    create_persistence_agent(kind="memory", store=store).batch("leads", rows)
    return create_read_only_facade(kind="memory", store=store)


class TestPagination:
    @given(rows=ROWS, filters=st.lists(FILTERS, max_size=3), order=ORDERS, size=st.integers(1, 7))
    def test_pages_partition_the_result(self, rows, filters, order, size) -> None:  # type: ignore[no-untyped-def]
        """Pages of any size cover the unpaginated result exactly once, with a constant total."""
        facade = seeded(rows)
        everything = facade.read("leads", filters, order=order)
        collected: list[object] = []
        offset = 0
        while True:
            page = facade.read("leads", filters, order=order, limit=size, offset=offset)
            assert page.total_count == everything.total_count
            collected.extend(row["id"] for row in page.rows)
            if len(page.rows) < size:
                break
            offset += size
        assert collected == [row["id"] for row in everything.rows]
        assert len(set(collected)) == len(collected)

    @given(rows=ROWS, filters=st.lists(FILTERS, max_size=3))
    def test_count_equals_unpaginated_length(self, rows, filters) -> None:  # type: ignore[no-untyped-def]
        """count() is the number of rows an unpaginated read returns."""
        facade = seeded(rows)
        assert facade.count("leads", filters) == len(facade.read("leads", filters).rows)

    @given(rows=ROWS, filters=st.lists(FILTERS, min_size=2, max_size=3), data=st.data())
    def test_filters_commute(self, rows, filters, data) -> None:  # type: ignore[no-untyped-def]
        """The order of filters does not change the result."""
        facade = seeded(rows)
        shuffled = data.draw(st.permutations(filters))
        assert facade.read("leads", filters).rows == facade.read("leads", shuffled).rows

    @given(rows=ROWS, order=ORDERS)
    def test_nulls_sort_as_postgresql(self, rows, order) -> None:  # type: ignore[no-untyped-def]
        """For the first order key, NULLs come last ascending and first descending."""
        facade = seeded(rows)
        if not order:
            return
        first = order[0]
        values = [row[first.column] for row in facade.read("leads", order=order).rows]
        nulls = [v is None for v in values]
        assert nulls == sorted(nulls, reverse=first.descending)


class TestConcurrency:
    def test_writers_and_readers_never_corrupt_the_store(self) -> None:
        """Concurrent batches, upserts and reads leave every row intact and ids unique."""
        store = MemoryStore()
        writer = create_persistence_agent(kind="memory", store=store)
        reader = create_read_only_facade(kind="memory", store=store)
        errors: list[BaseException] = []
        per_thread, threads = 200, 6

        def write(worker: int) -> None:
            try:
                for i in range(per_thread):
                    row = writer.write("leads", {"email": f"w{worker}-{i}@x.io", "score": i})
                    writer.upsert("leads", {"id": row["id"], "status": "seen"})
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        def read() -> None:
            try:
                for _ in range(per_thread):
                    page = reader.read("leads", [Filter("score", Op.GTE, 0)], limit=20)
                    assert page.total_count >= len(page.rows)
                    ids = [r["id"] for r in page.rows]
                    assert ids == sorted(ids)
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        workers = [threading.Thread(target=write, args=(n,)) for n in range(threads)]
        workers += [threading.Thread(target=read) for _ in range(2)]
        for thread in workers:
            thread.start()
        for thread in workers:
            thread.join()
        assert errors == []
        rows = reader.read("leads").rows
        assert len(rows) == per_thread * threads
        assert len({r["id"] for r in rows}) == len(rows)
        assert {r["status"] for r in rows} == {"seen"}
        assert {r["email"] for r in rows} == {
            f"w{w}-{i}@x.io" for w in range(threads) for i in range(per_thread)
        }
