"""``create_rag_agent``: a ``RAGAgent`` over a new read-only facade, configured from settings."""

from __future__ import annotations

from typing import Any

from persistence.factory import create_read_only_facade
from rag_agent.agent import RAGAgent
from rag_agent.llm import resolve_llm
from rag_agent.settings import RAGSettings

__all__ = ["create_rag_agent"]


def create_rag_agent(
    kind: str = "memory",
    *,
    llm: Any = None,
    settings: RAGSettings | None = None,
    **backend_options: Any,
) -> RAGAgent:
    """A ``RAGAgent`` reading through ``create_read_only_facade(kind, **backend_options)``.

    ``settings`` default to ``RAGSettings.from_env()``. Explicit ``backend_options`` win over
    settings: for ``kind="postgres"`` the DSN defaults to ``RAG_POSTGRES_DSN`` and the statement
    timeout to ``RAG_STATEMENT_TIMEOUT_MS``; for ``kind="supabase"`` the URL and key default to
    ``SUPABASE_URL`` and ``SUPABASE_KEY``. ``llm`` is any LangChain chat model; without one, a
    ``ChatOpenAI`` is built when ``OPENAI_API_KEY`` is set, and otherwise the LLM steps are off
    (``fallback: "disabled"``).

    >>> rag = create_rag_agent(kind="memory")
    >>> rag.run("find leads at acme", return_json=True)["metadata"]["total_count"]
    0
    """
    settings = settings if settings is not None else RAGSettings.from_env()
    options = dict(backend_options)
    if kind == "postgres":
        if settings.postgres_dsn and "dsn" not in options:
            options["dsn"] = settings.postgres_dsn
        options.setdefault("statement_timeout_ms", settings.statement_timeout_ms)
    if kind == "supabase":
        if settings.supabase_url and "url" not in options:
            options["url"] = settings.supabase_url
        if settings.supabase_key and "key" not in options:
            options["key"] = settings.supabase_key
    facade = create_read_only_facade(kind, **options)
    llm = resolve_llm(llm, settings)
    return RAGAgent(facade, settings=settings, llm=llm)
