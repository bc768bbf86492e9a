"""Choosing the chat model: injected model, ChatOpenAI from settings, or none with one warning."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import httpx
import pytest
from langchain_openai import ChatOpenAI
from pydantic import SecretStr
from structlog.testing import capture_logs

from persistence import ConfigurationError
from rag_agent.runtime.deadline import extraction_timeout
from rag_agent.settings import RAGSettings
from rag_agent.understanding.llm import chat_model as llm_module
from rag_agent.understanding.llm.chat_model import (
    DEFAULT_MAX_RETRIES,
    OPENAI_INSTALL_HINT,
    build_openai_chat_model,
    resolve_llm,
)
from tests.unit.test_llm_scripted import ScriptedChatModel


@pytest.fixture(autouse=True)
def _fresh_warning() -> Iterator[None]:
    llm_module._reset_disabled_warning()
    yield
    llm_module._reset_disabled_warning()


class TestResolveLLM:
    def test_injected_model_wins_over_the_key(self) -> None:
        """A model passed explicitly is used even when OPENAI_API_KEY is set."""
        model = ScriptedChatModel(script=[])
        settings = RAGSettings(openai_api_key="sk-test")
        assert resolve_llm(model, settings) is model

    def test_injected_object_must_be_a_chat_model(self) -> None:
        """Anything but a LangChain chat model is a configuration error."""
        with pytest.raises(ConfigurationError, match="BaseChatModel"):
            resolve_llm("gpt-4o", RAGSettings())  # type: ignore[arg-type]

    def test_key_builds_chat_openai_from_settings(self) -> None:
        """With a key, ChatOpenAI gets the base URL, model, timeout and bounded retries."""
        settings = RAGSettings.from_env(
            {
                "OPENAI_API_KEY": "sk-test",
                "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
                "RAG_OPENAI_MODEL": "local-model",
            }
        )
        model = resolve_llm(None, settings)
        assert isinstance(model, ChatOpenAI)
        assert model.model_name == "local-model"
        assert model.openai_api_base == "http://127.0.0.1:9/v1"
        assert model.request_timeout == extraction_timeout(settings.llm_deadline_s)
        assert model.max_retries == DEFAULT_MAX_RETRIES == 1
        key = model.openai_api_key
        assert isinstance(key, SecretStr) and key.get_secret_value() == "sk-test"

    def test_timeout_follows_the_deadline(self) -> None:
        """RAG_LLM_DEADLINE_S sets the request timeout: a quarter of it per extraction try."""
        settings = RAGSettings.from_env({"OPENAI_API_KEY": "sk-test", "RAG_LLM_DEADLINE_S": "8"})
        model = resolve_llm(None, settings)
        assert isinstance(model, ChatOpenAI) and model.request_timeout == 2.0

    def test_default_model_name(self) -> None:
        """Without RAG_OPENAI_MODEL the model is gpt-4o-mini."""
        model = resolve_llm(None, RAGSettings.from_env({"OPENAI_API_KEY": "sk-test"}))
        assert isinstance(model, ChatOpenAI) and model.model_name == "gpt-4o-mini"

    def test_explicit_timeout_and_retries(self) -> None:
        """Explicit timeout and retry arguments reach the client."""
        model = resolve_llm(None, RAGSettings(openai_api_key="sk-test"), timeout=5.0, max_retries=0)
        assert isinstance(model, ChatOpenAI)
        assert (model.request_timeout, model.max_retries) == (5.0, 0)

    def test_http_client_is_passed_through(self) -> None:
        """The caller's httpx client is the one the OpenAI client uses."""
        client = httpx.Client()
        try:
            model = resolve_llm(None, RAGSettings(openai_api_key="sk-test"), http_client=client)
            assert isinstance(model, ChatOpenAI) and model.http_client is client
        finally:
            client.close()

    def test_no_key_disables_with_one_warning(self) -> None:
        """Without a model or a key: None, and a single warning however often it is asked."""
        with capture_logs() as logs:
            assert resolve_llm(None, RAGSettings()) is None
            assert resolve_llm(None, RAGSettings()) is None
        warnings = [e for e in logs if e["event"] == "rag.llm.disabled"]
        assert len(warnings) == 1
        assert warnings[0]["log_level"] == "warning"
        assert "OPENAI_API_KEY" in warnings[0]["hint"]

    @pytest.mark.parametrize(
        ("llm", "settings"),
        [
            (False, RAGSettings(openai_api_key="sk-test")),
            (None, RAGSettings(llm=False, openai_api_key="sk-test")),
            (None, RAGSettings.from_env({"RAG_LLM": "off"})),
        ],
    )
    def test_off_on_purpose_is_silent(self, llm: bool | None, settings: RAGSettings) -> None:
        """llm=False or RAG_LLM=off: None even with a key, and no warning."""
        with capture_logs() as logs:
            assert resolve_llm(llm, settings) is None  # type: ignore[arg-type]
        assert [e for e in logs if e["event"] == "rag.llm.disabled"] == []

    def test_injected_model_wins_over_rag_llm_off(self) -> None:
        """An explicit model is used even with RAG_LLM=off: arguments win over settings."""
        model = ScriptedChatModel(script=[])
        assert resolve_llm(model, RAGSettings(llm=False)) is model

    def test_missing_extra_gives_an_install_hint(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A key without langchain-openai installed names the extra to install."""
        monkeypatch.setitem(sys.modules, "langchain_openai", None)
        with pytest.raises(ConfigurationError) as info:
            resolve_llm(None, RAGSettings(openai_api_key="sk-test"))
        assert OPENAI_INSTALL_HINT in str(info.value)
        assert info.value.variable == "OPENAI_API_KEY"

    @pytest.mark.parametrize("options", [{"timeout": 0}, {"max_retries": -1}])
    def test_invalid_bounds_are_refused(self, options: dict[str, float]) -> None:
        """A non-positive timeout or negative retry count is a configuration error."""
        with pytest.raises(ConfigurationError):
            build_openai_chat_model(api_key="sk-test", **options)  # type: ignore[arg-type]
