"""``metadata.backend``: every envelope an agent builds names the backend's kind and database,
never a secret (the same bytes on memory and PostgreSQL would otherwise not say who answered)."""

from __future__ import annotations

import json

import httpx
import pytest

from persistence import MemoryStore, create_persistence_agent, create_read_only_facade
from rag_agent import RAGAgent
from rag_agent.envelope.assemble import clip, error_info
from rag_agent.settings import RAGSettings
from tests.support.postgrest import fake_key

SECRET = "s3cr3t-pa55word"


class TestFacadeNamesItsDatabase:
    """``facade.backend_database``: the database alone, whatever the DSN or URL carries."""

    @pytest.mark.parametrize(
        "dsn",
        [
            f"postgresql://reader:{SECRET}@db.internal.example:6543/crm?sslmode=require",
            f"host=db.internal.example port=6543 dbname=crm user=reader password={SECRET}",
        ],
    )
    def test_postgres_database_name_only(self, dsn: str) -> None:
        facade = create_read_only_facade(kind="postgres", dsn=dsn)  # connects on first read
        try:
            assert facade.backend_name == "postgres"
            assert facade.backend_database == "crm"
        finally:
            facade.close()

    def test_supabase_host_only(self) -> None:
        http = httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(500)))
        facade = create_read_only_facade(
            kind="supabase", url="https://abcdefgh.supabase.co", key=fake_key("anon"),
            http_client=http,
        )  # fmt: skip
        assert (facade.backend_name, facade.backend_database) == (
            "supabase",
            "abcdefgh.supabase.co",
        )

    def test_memory_store_name(self) -> None:
        assert create_read_only_facade(kind="memory", store=MemoryStore()).backend_database is None
        named = create_read_only_facade(kind="memory", store=MemoryStore(name="sample"))
        assert named.backend_database == "sample"


class TestEnvelopeMetadata:
    """The agent puts ``backend`` in every envelope: answers, misses and errors alike."""

    def _agent(self, store: MemoryStore) -> RAGAgent:
        return RAGAgent(create_read_only_facade(kind="memory", store=store), settings=RAGSettings())

    def test_answer_names_the_backend(self) -> None:
        store = MemoryStore(name="sample")
        create_persistence_agent(kind="memory", store=store).write("leads", {"email": "a@x.io"})
        envelope = self._agent(store).run("lead #1", return_json=True)
        assert envelope["metadata"]["backend"] == {"kind": "memory", "database": "sample"}

    def test_error_names_the_backend(self) -> None:
        agent = self._agent(MemoryStore())
        envelope = agent.run("lead #1", table="users", return_json=True)
        assert envelope["metadata"]["error"]["type"] == "TableNotAllowedError"
        assert envelope["metadata"]["backend"] == {"kind": "memory"}

    def test_no_secret_in_a_postgres_envelope(self) -> None:
        """An unreachable server: the error envelope names the database, not the password."""
        dsn = f"postgresql://reader:{SECRET}@127.0.0.1:1/crm?connect_timeout=1"
        facade = create_read_only_facade(kind="postgres", dsn=dsn, pool_timeout=1.0)
        try:
            envelope = RAGAgent(facade, settings=RAGSettings()).run("lead #1", return_json=True)
        finally:
            facade.close()
        assert envelope["metadata"]["backend"] == {"kind": "postgres", "database": "crm"}
        assert SECRET not in json.dumps(envelope)
        assert "reader" not in json.dumps(envelope["metadata"]["backend"])


class TestErrorMessageClip:
    """A long error message is cut at a word, marked with an ellipsis, never mid-word."""

    def test_short_message_unchanged(self) -> None:
        assert clip("role is a superuser") == "role is a superuser"

    def test_long_message_cut_at_a_word(self) -> None:
        words = " ".join(["pg_write_server_files"] * 40)
        cut = clip(words, 100)
        assert len(cut) <= 100
        assert cut.endswith("pg_write_server_files…")

    def test_error_info_uses_it(self) -> None:
        info = error_info(ValueError("word " * 200))
        assert info.message.endswith("word…")
        assert len(info.message) <= 500
