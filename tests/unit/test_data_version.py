"""``facade.data_version(table)``: a per-table write version for cache keys, on every backend."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from persistence import (
    BackendError,
    Filter,
    MemoryBackend,
    MemoryStore,
    Op,
    TableNotAllowedError,
    create_persistence_agent,
    create_read_only_facade,
    register_backend,
)
from persistence.backends.postgres import data_target
from persistence.facade.versions import WriteVersions
from tests.support.postgrest import BASE_URL, PostgrestEmulator, fake_key


class TestWriteVersions:
    """The process-wide counters: per (target, table), from 0, only growing."""

    def test_counts_per_target_and_table(self) -> None:
        """A bump moves only its own (target, table) counter."""
        versions = WriteVersions()
        assert versions.get("a", "leads") == 0
        assert versions.bump("a", "leads") == 1
        assert versions.bump("a", "leads") == 2
        assert versions.get("a", "leads") == 2
        assert versions.get("a", "clients") == 0
        assert versions.get("b", "leads") == 0

    def test_concurrent_bumps_are_all_counted(self) -> None:
        """Eight threads bumping 500 times each leave the counter at 4000."""
        versions = WriteVersions()

        def bump() -> None:
            for _ in range(500):
                versions.bump("t", "leads")

        threads = [threading.Thread(target=bump) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert versions.get("t", "leads") == 4000


class TestMemoryVersions:
    """Memory: the store's own counter, moved by every write to the store."""

    def test_every_kind_of_write_moves_it(self, store: MemoryStore) -> None:
        """Insert, upsert and delete (through the agent) and a direct store insert all count."""
        writer = create_persistence_agent(kind="memory", store=store)
        reader = create_read_only_facade(kind="memory", store=store)
        seen = [reader.data_version("leads")]
        row = writer.write("leads", {"email": "a@x.io"})
        seen.append(reader.data_version("leads"))
        writer.upsert("leads", {"id": row["id"], "status": "won"})
        seen.append(reader.data_version("leads"))
        store.insert("leads", [{"email": "b@x.io"}])
        seen.append(reader.data_version("leads"))
        writer.delete("leads", [Filter("email", Op.EQ, "b@x.io")])
        seen.append(reader.data_version("leads"))
        assert seen == sorted(set(seen))  # strictly increasing
        assert seen[0] == 0

    def test_reads_and_empty_writes_do_not_move_it(self, store: MemoryStore) -> None:
        """Reading, counting, an empty batch and a delete that matches nothing change nothing."""
        writer = create_persistence_agent(kind="memory", store=store)
        writer.write("leads", {"email": "a@x.io"})
        before = writer.data_version("leads")
        writer.read("leads")
        writer.count("leads")
        writer.batch("leads", [])
        writer.delete("leads", [Filter("email", Op.EQ, "nobody@x.io")])
        assert writer.data_version("leads") == before

    def test_only_the_written_table_and_store(self, store: MemoryStore) -> None:
        """Another table, or the same table of another store, keeps its version."""
        other = MemoryStore()
        create_persistence_agent(kind="memory", store=store).write("leads", {"email": "a@x.io"})
        assert create_read_only_facade(kind="memory", store=store).data_version("leads") == 1
        assert create_read_only_facade(kind="memory", store=store).data_version("messages") == 0
        assert create_read_only_facade(kind="memory", store=other).data_version("leads") == 0

    def test_clear_moves_it_on_never_back(self, store: MemoryStore) -> None:
        """Emptying the store is a change too, and versions never start again at 0."""
        store.insert("leads", [{"email": "a@x.io"}])
        store.insert("leads", [{"email": "b@x.io"}])
        before = store.version("leads")
        store.clear()
        assert store.version("leads") > before
        store.insert("leads", [{"email": "c@x.io"}])
        assert store.version("leads") > before + 1

    def test_failed_write_leaves_it(self, store: MemoryStore) -> None:
        """An all-or-nothing batch that wrote nothing does not move the memory version."""
        writer = create_persistence_agent(kind="memory", store=store)
        row = writer.write("leads", {"email": "a@x.io"})
        before = writer.data_version("leads")
        with pytest.raises(BackendError):
            writer.batch("leads", [{"email": "new@x.io"}, {"id": row["id"]}])
        assert writer.data_version("leads") == before

    def test_table_outside_the_allow_list_is_refused(self) -> None:
        """The table name is checked like a read's."""
        facade = create_read_only_facade(kind="memory", tables=["leads"])
        with pytest.raises(TableNotAllowedError):
            facade.data_version("clients")

    def test_concurrent_writers_and_a_reader(self, store: MemoryStore) -> None:
        """Under concurrent writes the version a reader sees never decreases, and every write
        is counted."""
        writer = create_persistence_agent(kind="memory", store=store)
        reader = create_read_only_facade(kind="memory", store=store)
        done = threading.Event()
        seen: list[int] = []

        def watch() -> None:
            while not done.is_set():
                seen.append(reader.data_version("leads"))

        def write() -> None:
            for i in range(100):
                writer.write("leads", {"email": f"{threading.get_ident()}-{i}@x.io"})

        watcher = threading.Thread(target=watch)
        watcher.start()
        writers = [threading.Thread(target=write) for _ in range(4)]
        for thread in writers:
            thread.start()
        for thread in writers:
            thread.join()
        done.set()
        watcher.join()
        assert seen == sorted(seen)
        assert reader.data_version("leads") == 400


class _Counting(MemoryBackend):
    """A backend that knows nothing of versions: only the base protocol (name is its own)."""

    name = "versionless"
    data_version = None  # type: ignore[assignment]


class TestBackendWithoutVersions:
    """A third-party backend without versions gets the process counter, keyed by its name."""

    def test_agent_writes_move_the_shared_counter(self) -> None:
        """Writes through a PersistenceAgent are counted for every facade of that kind."""
        store = MemoryStore()

        def factory(*, read_only: bool, **options: Any) -> _Counting:
            return _Counting(store)

        register_backend("versionless", factory)
        reader = create_read_only_facade(kind="versionless")
        before = reader.data_version("leads")
        create_persistence_agent(kind="versionless").write("leads", {"email": "a@x.io"})
        store.insert("leads", [{"email": "b@x.io"}])  # outside any agent: not seen
        assert reader.data_version("leads") == before + 1


class TestPostgresTarget:
    """The key of a PostgreSQL backend's versions: server, database, schema; never a secret."""

    @pytest.mark.parametrize(
        ("dsn", "expected"),
        [
            (
                "postgresql://u:secret@db.example:5433/app",
                ("postgres", "db.example", "5433", "app", "public"),
            ),
            (
                "host=db.example dbname=app user=u",
                ("postgres", "db.example", "5432", "app", "public"),
            ),
            ("postgresql://u@db.example", ("postgres", "db.example", "5432", "u", "public")),
            ("not a dsn ===", ("postgres", "", "5432", "", "public")),
        ],
    )
    def test_parsed_from_the_dsn(self, dsn: str, expected: tuple[str, ...]) -> None:
        """Host, port (default 5432) and database (default: the user's name) are kept."""
        assert data_target(dsn, "public") == expected
        assert "secret" not in repr(data_target(dsn, "public"))

    def test_same_database_written_by_another_spelling_of_the_dsn(self) -> None:
        """Options that do not change the database (user, sslmode) share one target."""
        assert data_target("postgresql://a@h:5432/db?sslmode=require", "public") == data_target(
            "host=h port=5432 dbname=db user=b", "public"
        )
        assert data_target("postgresql://a@h/db", "public") != data_target(
            "postgresql://a@h/db", "sales"
        )


@pytest.fixture
def supabase_store() -> Iterator[MemoryStore]:
    yield MemoryStore()


def _supabase(kind: str, store: MemoryStore, url: str = BASE_URL) -> Any:
    http = httpx.Client(transport=PostgrestEmulator(store).transport())
    factory = create_persistence_agent if kind == "agent" else create_read_only_facade
    return factory(kind="supabase", url=url, key=fake_key("anon"), http_client=http)


class TestSupabaseVersions:
    """Supabase: the process counter for the project URL and schema, moved by agent writes."""

    def test_agent_write_moves_the_readers_version(self, supabase_store: MemoryStore) -> None:
        """A facade on the same project sees every write of an agent in this process."""
        reader = _supabase("reader", supabase_store)
        writer = _supabase("agent", supabase_store)
        before = reader.data_version("leads")
        writer.write("leads", {"email": "a@x.io"})
        assert reader.data_version("leads") == before + 1
        writer.delete("leads", [Filter("email", Op.EQ, "a@x.io")])
        assert reader.data_version("leads") == before + 2
        assert reader.data_version("messages") == writer.data_version("messages")

    def test_another_project_keeps_its_version(self, supabase_store: MemoryStore) -> None:
        """A write to one project URL does not move another project's version."""
        other = _supabase("reader", supabase_store, url="https://other-project.supabase.co")
        before = other.data_version("leads")
        _supabase("agent", supabase_store).write("leads", {"email": "a@x.io"})
        assert other.data_version("leads") == before
