"""``create_rag_agent``: a ``RAGAgent`` over a new read-only facade, configured from settings."""

from __future__ import annotations

from typing import Any

from persistence.factory import create_read_only_facade
from rag_agent.agent import RAGAgent
from rag_agent.pipeline.embeddings import embeddings_from_setting
from rag_agent.settings import RAGSettings
from rag_agent.understanding.llm.chat_model import resolve_llm

__all__ = ["create_rag_agent"]


def create_rag_agent(
    kind: str = "memory",
    *,
    llm: Any = None,
    settings: RAGSettings | None = None,
    embeddings: Any = None,
    **backend_options: Any,
) -> RAGAgent:
    """A ``RAGAgent`` reading through ``create_read_only_facade(kind, **backend_options)``.

    ``settings`` default to ``RAGSettings.from_env()`` and are handed to the facade factory, so
    explicit ``backend_options`` win over them: for ``kind="postgres"`` the DSN defaults to
    ``RAG_POSTGRES_DSN`` and the statement timeout to ``RAG_STATEMENT_TIMEOUT_MS``; for
    ``kind="supabase"`` the URL and key default to ``SUPABASE_URL`` and ``SUPABASE_KEY``. ``llm``
    is any LangChain chat model; without one, a ``ChatOpenAI`` is built when ``OPENAI_API_KEY``
    is set, and otherwise the LLM steps are off (``fallback: "disabled"``), with a warning once per
    process; ``llm=False`` (or ``RAG_LLM=off``) turns them off on purpose, without it.
    ``embeddings`` (any LangChain ``Embeddings``) serves the semantic leg of search; without it,
    ``RAG_EMBEDDINGS`` decides (``none`` by default; see :mod:`rag_agent.pipeline.embeddings`).

    >>> rag = create_rag_agent(kind="memory")
    >>> rag.run("find leads at acme", return_json=True)["metadata"]["total_count"]
    0
    """
    settings = settings if settings is not None else RAGSettings.from_env()
    if embeddings is None:
        embeddings = embeddings_from_setting(settings.embeddings, settings)
    facade = create_read_only_facade(
        kind, settings=settings, embeddings=embeddings, **backend_options
    )
    llm = resolve_llm(llm, settings)
    return RAGAgent(facade, settings=settings, llm=llm)
