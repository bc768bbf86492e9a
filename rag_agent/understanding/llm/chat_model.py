"""Choosing the chat model behind the LLM steps (filter extraction and the agent fallback).

Resolution order, first match wins:

1. a LangChain chat model passed explicitly (``create_rag_agent(llm=...)``): used as is;
2. ``OPENAI_API_KEY`` set (or ``settings.openai_api_key``): a ``ChatOpenAI`` from
   ``langchain-openai`` with ``OPENAI_BASE_URL`` (any OpenAI-compatible server), the model
   ``RAG_OPENAI_MODEL`` (default ``gpt-4o-mini``), a request timeout of a quarter of
   ``RAG_LLM_DEADLINE_S`` and at most one retry (:mod:`rag_agent.runtime.deadline`);
3. ``llm=False`` or ``RAG_LLM=off``: no model, deliberately, so no warning;
4. otherwise no model: one warning per process (structlog event ``rag.llm.disabled``) and the
   LLM steps are skipped (the fallback reports ``"disabled"``).

``langchain_openai`` is imported here only, and only in case 2, so the library works without the
``openai`` extra as long as a model is injected or none is wanted.

Example::

    from rag_agent.understanding.llm.chat_model import resolve_llm
    from rag_agent.settings import RAGSettings

    llm = resolve_llm(None, RAGSettings.from_env())   # None when OPENAI_API_KEY is unset
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.language_models import BaseChatModel

from persistence import get_logger, register_secret
from persistence.errors import ConfigurationError
from rag_agent.runtime.deadline import EXTRACTION_MAX_RETRIES, extraction_timeout

if TYPE_CHECKING:
    import httpx

    from rag_agent.settings import RAGSettings

__all__ = [
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_OPENAI_MODEL",
    "DEFAULT_TIMEOUT_SECONDS",
    "OPENAI_INSTALL_HINT",
    "build_openai_chat_model",
    "resolve_llm",
]

#: Model used when ``RAG_OPENAI_MODEL`` is unset.
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
#: Seconds one HTTP request to the model may take before it is abandoned.
DEFAULT_TIMEOUT_SECONDS = 30.0
#: Retries on connection errors, 408/409/429 and 5xx (the OpenAI client backs off between them).
DEFAULT_MAX_RETRIES = EXTRACTION_MAX_RETRIES
OPENAI_INSTALL_HINT = 'pip install "readonly-rag[openai]"'

_log = get_logger("rag_agent.understanding.llm.chat_model")
_warned_lock = threading.Lock()
_warned = False


def resolve_llm(
    llm: BaseChatModel | Literal[False] | None,
    settings: RAGSettings,
    *,
    http_client: httpx.Client | None = None,
    timeout: float | None = None,
    max_retries: int = DEFAULT_MAX_RETRIES,
) -> BaseChatModel | None:
    """The chat model for the LLM steps, or ``None`` when none is configured.

    An injected ``llm`` wins; otherwise a ``ChatOpenAI`` is built when ``settings`` holds an
    OpenAI key. ``http_client`` is handed to the OpenAI client (a proxy, custom TLS, or an
    ``httpx.MockTransport`` in tests). ``timeout`` is the request timeout, by default the
    extraction's share of ``settings.llm_deadline_s`` (``RAG_LLM_DEADLINE_S``); a fallback call
    is given the run's remaining time instead. Raises ``ConfigurationError`` when ``llm`` is not
    a chat model, or when a key is set but ``langchain-openai`` is not installed. ``llm=False`` (or
    ``settings.llm`` off, ``RAG_LLM=off``) means no model on purpose: ``None``, without the
    warning.
    """
    if llm is False or (llm is None and not settings.llm):
        return None
    if llm is not None:
        if not isinstance(llm, BaseChatModel):
            raise ConfigurationError(
                f"llm= must be a LangChain chat model (BaseChatModel), not {type(llm).__name__}"
            )
        return llm
    if settings.openai_api_key is not None:
        api_key = settings.openai_api_key.get_secret_value()
        register_secret(api_key)  # masked in logs wherever it turns up
        return build_openai_chat_model(
            api_key=api_key,
            base_url=settings.openai_base_url,
            model=settings.openai_model or DEFAULT_OPENAI_MODEL,
            http_client=http_client,
            timeout=extraction_timeout(settings.llm_deadline_s) if timeout is None else timeout,
            max_retries=max_retries,
        )
    _warn_disabled_once()
    return None


def build_openai_chat_model(
    *,
    api_key: str,
    base_url: str | None = None,
    model: str = DEFAULT_OPENAI_MODEL,
    http_client: httpx.Client | None = None,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
    max_retries: int = DEFAULT_MAX_RETRIES,
) -> BaseChatModel:
    """A ``ChatOpenAI`` with a request timeout, bounded retries and temperature 0.

    Temperature 0 because both LLM steps extract facts; nothing here benefits from variety.
    """
    if timeout <= 0:
        raise ConfigurationError(f"timeout must be positive, not {timeout!r}")
    if max_retries < 0:
        raise ConfigurationError(f"max_retries must be >= 0, not {max_retries!r}")
    try:
        from langchain_openai import ChatOpenAI
    except ImportError as exc:
        raise ConfigurationError(
            "OPENAI_API_KEY is set but langchain-openai is not installed; "
            f"run `{OPENAI_INSTALL_HINT}` or pass llm= explicitly",
            variable="OPENAI_API_KEY",
        ) from exc
    options: dict[str, Any] = {
        "model": model,
        "api_key": api_key,
        "timeout": timeout,
        "max_retries": max_retries,
        "temperature": 0,
    }
    if base_url:
        options["base_url"] = base_url
    if http_client is not None:
        options["http_client"] = http_client
    chat: BaseChatModel = ChatOpenAI(**options)
    return chat


def _warn_disabled_once() -> None:
    global _warned
    with _warned_lock:
        if _warned:
            return
        _warned = True
    _log.warning(
        "rag.llm.disabled",
        reason="no chat model injected and OPENAI_API_KEY is not set",
        effect="LLM filter extraction and the agent fallback are disabled",
        hint=f"set OPENAI_API_KEY (and `{OPENAI_INSTALL_HINT}`) or pass llm=",
    )


def _reset_disabled_warning() -> None:
    """Forget that the warning was given (for tests of the warning itself)."""
    global _warned
    with _warned_lock:
        _warned = False
