"""The offline default embeddings, the ``RAG_EMBEDDINGS`` setting and ``create_rag_agent``'s
``embeddings=``."""

from __future__ import annotations

import importlib.util
import logging
import math
import socket
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings

from persistence import ConfigurationError, MemoryStore, create_persistence_agent
from persistence.search.embedder import Embedder
from rag_agent.factory import create_rag_agent
from rag_agent.pipeline import embeddings as embeddings_module
from rag_agent.pipeline.embeddings import (
    DEFAULT_EMBEDDINGS_MODEL_ID,
    WordLlamaEmbeddings,
    default_embeddings,
    embeddings_from_setting,
)
from rag_agent.settings import RAGSettings
from tests.support.search import HashEmbeddings

needs_wordllama = pytest.mark.skipif(
    importlib.util.find_spec("wordllama") is None, reason="wordllama (the semantic extra) missing"
)


def _refuse(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError(f"a network call was attempted: {args!r} {kwargs!r}")


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No socket may connect anywhere (loopback included), no HTTP client may send, and the
    home folder (wordllama's download cache) is an empty temporary one."""
    monkeypatch.setattr(socket.socket, "connect", _refuse)
    monkeypatch.setattr(socket, "create_connection", _refuse)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import httpx
    import requests

    monkeypatch.setattr(requests.Session, "request", _refuse)
    monkeypatch.setattr(httpx.Client, "send", _refuse)
    import tokenizers

    monkeypatch.setattr(tokenizers.Tokenizer, "from_pretrained", _refuse)
    return tmp_path


@needs_wordllama
class TestDefaultEmbeddings:
    def test_loads_and_embeds_without_any_network_call(
        self, offline: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Loading the model and embedding read only the installed wheel's files."""
        monkeypatch.setattr(embeddings_module, "_models", {})  # load afresh, under the guard
        embeddings_module._import_inference()  # imports wordllama, leaving logging alone
        import wordllama.wordllama

        # wordllama's own resolver (which would look in the cache, then download) is never used.
        monkeypatch.setattr(wordllama.wordllama.WordLlama, "resolve_file", _refuse)
        monkeypatch.setattr(wordllama.wordllama.WordLlama, "load", _refuse)
        embeddings = WordLlamaEmbeddings()
        vectors = embeddings.embed_documents(["cancel my subscription", "could not sign in"])
        assert len(vectors) == 2 and len(embeddings.embed_query("refund")) == 256
        assert not any(offline.iterdir())  # nothing downloaded into a cache

    def test_256_dimensions_unit_length_deterministic(self) -> None:
        embeddings = default_embeddings()
        assert isinstance(embeddings, Embeddings)
        first = embeddings.embed_documents(["stop paying", "login problem"])
        again = WordLlamaEmbeddings().embed_documents(["stop paying", "login problem"])
        assert first == again
        for vector in first:
            assert len(vector) == 256
            assert math.isclose(math.sqrt(sum(v * v for v in vector)), 1.0, rel_tol=1e-5)

    def test_related_texts_are_closer(self) -> None:
        """A static model still tells topics apart: cancellation is nearer to stopping
        payment than to a login problem."""
        embeddings = WordLlamaEmbeddings()
        query = embeddings.embed_query("stop paying for my plan")
        cancel, login = embeddings.embed_documents(["cancel subscription", "password reset"])

        def cosine(a: list[float], b: list[float]) -> float:
            return sum(x * y for x, y in zip(a, b, strict=True))

        assert cosine(query, cancel) > cosine(query, login)

    def test_a_text_with_no_token_is_the_zero_vector_and_search_refuses_it(self) -> None:
        embeddings = WordLlamaEmbeddings()
        assert set(embeddings.embed_query("")) == {0.0}
        with pytest.raises(ValueError, match="zero vector"):
            Embedder(embeddings).embed_query("")

    def test_model_id_and_dimension_are_recorded(self) -> None:
        embedder = Embedder(WordLlamaEmbeddings())
        assert embedder.model_id.endswith(DEFAULT_EMBEDDINGS_MODEL_ID)
        assert embedder.dimension == 256

    def test_importing_it_leaves_the_callers_logging_alone(self) -> None:
        root = logging.getLogger()
        before = (list(root.handlers), root.level)
        WordLlamaEmbeddings().embed_query("hello")
        assert (list(root.handlers), root.level) == before

    def test_semantic_search_with_the_default_model(self) -> None:
        """End to end on memory: the cancellation inquiry ranks first for a paraphrase that
        shares no keyword with it."""
        store = MemoryStore()
        create_persistence_agent(kind="memory", store=store).batch(
            "inquiries",
            [
                {"subject": "Password reset", "body": "I cannot log into my account"},
                {"subject": "Cancel subscription", "body": "Please end my plan"},
                {"subject": "Shipping delay", "body": "Where is my parcel"},
            ],
        )
        rag = create_rag_agent(
            kind="memory", store=store, llm=False, embeddings=default_embeddings()
        )
        result = rag.facade.search("inquiries", "want to stop paying", mode="semantic", k=1)
        assert result.rows[0]["subject"] == "Cancel subscription"

    def test_missing_files_are_a_configuration_error(self, tmp_path: Path) -> None:
        with pytest.raises(ConfigurationError, match="reinstall"):
            WordLlamaEmbeddings(tmp_path)


class TestWithoutWordllama:
    def test_default_is_none(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(embeddings_module, "_package_dir", lambda: None)
        assert default_embeddings() is None

    def test_setting_default_names_the_extra(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(embeddings_module, "_package_dir", lambda: None)
        with pytest.raises(ConfigurationError, match=r"readonly-rag\[semantic\]") as info:
            embeddings_from_setting("default")
        assert info.value.variable == "RAG_EMBEDDINGS"


class TestSetting:
    @pytest.mark.parametrize("value", [None, "", "none", " NONE "])
    def test_none(self, value: str | None) -> None:
        assert embeddings_from_setting(value) is None

    @needs_wordllama
    def test_default(self) -> None:
        assert isinstance(embeddings_from_setting("Default"), WordLlamaEmbeddings)

    def test_openai_is_built_on_first_use(self, offline: Path) -> None:
        """Configuring OpenAI embeddings sends nothing and needs no key."""
        embeddings = embeddings_from_setting("openai:text-embedding-3-small")
        assert isinstance(embeddings, Embeddings)
        assert Embedder(embeddings).model_id.endswith("openai:text-embedding-3-small")

    @pytest.mark.parametrize("value", ["openai:", "openai: ", "word2vec", "default:x"])
    def test_bad_values_name_the_variable(self, value: str) -> None:
        with pytest.raises(ConfigurationError) as info:
            embeddings_from_setting(value)
        assert info.value.variable == "RAG_EMBEDDINGS"

    def test_read_from_the_environment_and_validated(self) -> None:
        assert RAGSettings.from_env({}).embeddings == "none"
        assert RAGSettings.from_env({"RAG_EMBEDDINGS": " Default "}).embeddings == "default"
        assert (
            RAGSettings.from_env({"RAG_EMBEDDINGS": "openai:text-embedding-3-large"}).embeddings
            == "openai:text-embedding-3-large"
        )
        with pytest.raises(ConfigurationError, match="RAG_EMBEDDINGS") as info:
            RAGSettings.from_env({"RAG_EMBEDDINGS": "bert"})
        assert info.value.variable == "RAG_EMBEDDINGS"


class TestCreateRagAgent:
    def test_explicit_embeddings_win_over_the_setting(self) -> None:
        explicit = HashEmbeddings()
        rag = create_rag_agent(
            kind="memory",
            llm=False,
            settings=RAGSettings(embeddings="openai:text-embedding-3-small"),
            embeddings=explicit,
        )
        assert rag.facade.embedder is not None
        assert rag.facade.embedder.embeddings is explicit

    def test_the_setting_applies_without_an_argument(self) -> None:
        rag = create_rag_agent(
            kind="memory",
            llm=False,
            settings=RAGSettings(embeddings="openai:text-embedding-3-small"),
        )
        assert rag.facade.embedder is not None
        assert rag.facade.embedder.model_id.endswith("openai:text-embedding-3-small")

    def test_none_by_default(self) -> None:
        assert create_rag_agent(kind="memory", llm=False).facade.embedder is None
