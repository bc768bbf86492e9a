"""The memory store's compact rows: fresh dicts out, learned columns, shared values, indexes."""

from __future__ import annotations

import threading

import pytest

from persistence import ConfigurationError, Filter, MemoryBackend, MemoryStore, Op
from persistence.query import Query


def _backend(store: MemoryStore) -> MemoryBackend:
    return MemoryBackend(store)


class TestRowsOut:
    def test_read_rows_are_fresh_dicts(self) -> None:
        """A caller mutating a row it read, or a nested value in it, changes nothing stored."""
        store = MemoryStore(schema={"notes": ["id", "body"]})
        store.insert("notes", [{"body": "x", "tags": ["a"]}])
        backend = _backend(store)
        first = backend.read(Query("notes")).rows[0]
        first["body"] = "changed"
        first["tags"].append("b")
        again = backend.read(Query("notes", (Filter("id", Op.EQ, 1),))).rows[0]
        assert again == {"id": 1, "body": "x", "tags": ["a"]}
        assert store.rows("notes")[0] is not store.rows("notes")[0]

    def test_learned_column_widens_older_rows(self) -> None:
        """A column first seen on a later write reads NULL on the rows written before it."""
        store = MemoryStore(schema={"notes": ["id", "body"]})
        store.insert("notes", [{"body": "a"}, {"body": "b"}])
        store.insert("notes", [{"body": "c", "mood": "calm"}])
        backend = _backend(store)
        null_mood = backend.read(Query("notes", (Filter("mood", Op.IS_NULL, True),)))
        assert [r["body"] for r in null_mood.rows] == ["a", "b"]
        assert [r["mood"] for r in backend.read(Query("notes")).rows] == [None, None, "calm"]

    def test_repeated_short_text_is_shared(self) -> None:
        """Equal short strings written separately are stored once (interned per column)."""
        store = MemoryStore()
        store.insert("leads", [{"status": "".join(["wo", "n"])} for _ in range(3)])
        state = store._tables["leads"]
        position = state.layout.positions["status"]
        stored = [values[position] for values in state.by_id.values()]
        assert stored == ["won"] * 3
        assert len({id(value) for value in stored}) == 1


class TestIndexes:
    def test_email_lookup_follows_updates_and_deletes(self) -> None:
        store = MemoryStore()
        backend = _backend(store)
        backend.insert("leads", [{"email": "Ada@X.io"}, {"email": "bob@x.io"}])

        def ids(value: str) -> list[object]:
            page = backend.read(Query("leads", (Filter("email", Op.IEQ, value),)))
            return [row["id"] for row in page.rows]

        assert ids("ada@x.IO") == [1]
        backend.upsert("leads", [{"id": 1, "email": "bob@X.io"}])
        assert ids("ada@x.io") == []
        assert ids("BOB@x.io") == [1, 2]
        backend.delete("leads", [Filter("id", Op.EQ, 2)])
        assert ids("bob@x.io") == [1]

    def test_eq_on_an_indexed_column_is_still_case_sensitive(self) -> None:
        store = MemoryStore()
        store.insert("leads", [{"email": "Ada@x.io"}])
        page = _backend(store).read(Query("leads", (Filter("email", Op.EQ, "ada@x.io"),)))
        assert page.rows == []

    def test_id_lookup_keeps_booleans_apart_from_integers(self) -> None:
        store = MemoryStore(schema={"flags": ["id"]})
        store.insert("flags", [{"id": 1}])
        page = _backend(store).read(Query("flags", (Filter("id", Op.EQ, True),)))
        assert page.rows == []

    def test_other_columns_can_be_indexed(self) -> None:
        store = MemoryStore(indexes={"leads": ["company_name"]})
        store.insert("leads", [{"company_name": "Globex"}, {"company_name": "Initech"}])
        assert list(store._tables["leads"].indexes) == ["company_name"]
        page = _backend(store).read(Query("leads", (Filter("company_name", Op.IEQ, "GLOBEX"),)))
        assert [r["id"] for r in page.rows] == [1]

    @pytest.mark.parametrize("bad", ["email", {"leads": "email"}, {"leads": [1]}])
    def test_bad_indexes_are_refused(self, bad: object) -> None:
        with pytest.raises(ConfigurationError):
            MemoryStore(indexes=bad)  # type: ignore[arg-type]

    @pytest.mark.parametrize("indexes", [None, {"leads": ()}])
    def test_upsert_on_conflict_finds_the_row_with_or_without_an_index(
        self, indexes: dict[str, tuple[str, ...]] | None
    ) -> None:
        """Exact equality decides the conflict: a case variant is a new row."""
        store = MemoryStore(indexes=indexes)
        store.insert("leads", [{"email": "a@x.io", "status": "new"}])
        store.upsert("leads", [{"email": "a@x.io", "status": "won"}], on_conflict="email")
        store.upsert("leads", [{"email": "A@x.io", "status": "lost"}], on_conflict="email")
        assert [(r["id"], r["email"], r["status"]) for r in store.rows("leads")] == [
            (1, "a@x.io", "won"),
            (2, "A@x.io", "lost"),
        ]


class TestThreads:
    def test_index_lookups_during_writes_see_whole_rows(self) -> None:
        """While a writer moves a row between two emails, an indexed lookup finds it under the
        email it holds at that moment, never under the old one nor half-updated."""
        store = MemoryStore()
        store.insert("leads", [{"id": 1, "email": "a@x.io", "status": "a"}])
        backend = _backend(store)
        stop = threading.Event()
        wrong: list[object] = []

        def writer() -> None:
            for turn in range(2_000):
                mark = "ab"[turn % 2]
                store.upsert("leads", [{"id": 1, "email": f"{mark}@x.io", "status": mark}])
            stop.set()

        def reader() -> None:
            while not stop.is_set():
                for mark in "ab":
                    flt = Filter("email", Op.IEQ, f"{mark.upper()}@X.IO")
                    for row in backend.read(Query("leads", (flt,))).rows:
                        if (row["email"], row["status"]) != (f"{mark}@x.io", mark):
                            wrong.append(row)

        threads = [threading.Thread(target=writer), threading.Thread(target=reader)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert wrong == []
