"""``data_version`` on PostgreSQL: agent writes in this process move every facade's version."""

from __future__ import annotations

import pytest

from persistence import (
    BackendError,
    Filter,
    Op,
    create_persistence_agent,
    create_read_only_facade,
)
from tests.conftest import PostgresDatabase

pytestmark = pytest.mark.postgres


class TestPostgresVersions:
    """The process counter for the DSN's server, database and schema."""

    def test_writer_and_reader_roles_share_the_database_version(
        self, postgres_clean: PostgresDatabase
    ) -> None:
        """Different roles on the same database see one version; each agent write moves it."""
        with (
            create_persistence_agent(kind="postgres", dsn=postgres_clean.writer_dsn) as writer,
            create_read_only_facade(kind="postgres", dsn=postgres_clean.reader_dsn) as reader,
        ):
            before = reader.data_version("leads")
            row = writer.write("leads", {"email": "a@x.io"})
            assert reader.data_version("leads") == before + 1
            writer.upsert("leads", {"id": row["id"], "status": "won"})
            writer.delete("leads", [Filter("id", Op.EQ, row["id"])])
            assert reader.data_version("leads") == before + 3
            reader.read("leads")
            assert reader.data_version("leads") == before + 3

    def test_a_failed_write_still_moves_it(self, postgres_clean: PostgresDatabase) -> None:
        """When a write fails the version moves anyway: a needless cache miss beats a stale hit."""
        with create_persistence_agent(kind="postgres", dsn=postgres_clean.writer_dsn) as writer:
            row = writer.write("leads", {"email": "a@x.io"})
            before = writer.data_version("leads")
            with pytest.raises(BackendError):
                writer.batch("leads", [{"id": row["id"], "email": "duplicate"}])
            assert writer.data_version("leads") == before + 1

    def test_another_database_keeps_its_version(self, postgres_clean: PostgresDatabase) -> None:
        """A write to this database does not move the version of another one on the server."""
        from psycopg.conninfo import make_conninfo

        other = make_conninfo(postgres_clean.reader_dsn, dbname="postgres")
        elsewhere = create_read_only_facade(kind="postgres", dsn=other)  # never connects
        before = elsewhere.data_version("leads")
        with create_persistence_agent(kind="postgres", dsn=postgres_clean.writer_dsn) as writer:
            writer.write("leads", {"email": "a@x.io"})
        assert elsewhere.data_version("leads") == before
        elsewhere.close()
