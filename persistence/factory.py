"""Factories that build a backend by kind and wrap it in a facade.

Backends register a factory ``create_backend(*, read_only: bool, **options) -> Backend``; the
bundled ones are imported lazily so an optional SDK is needed only when its kind is used.
Backends read no environment: for ``postgres`` and ``supabase`` the factories fill the options a
caller left out (``dsn``, ``statement_timeout_ms``, ``url``, ``key``) from ``settings=``, by
default ``PersistenceSettings.from_env()``.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from persistence.backends.base import Backend
from persistence.errors import ConfigurationError
from persistence.facade import PersistenceAgent, ReadOnlyPersistenceFacade
from persistence.policy import BUSINESS_TABLES, AccessPolicy
from persistence.redaction import RedactionPolicy
from persistence.settings import PersistenceSettings

__all__ = ["create_persistence_agent", "create_read_only_facade", "known_kinds", "register_backend"]

BackendFactory = Callable[..., Backend]

_lock = threading.Lock()
_registry: dict[str, str | BackendFactory] = {
    "memory": "persistence.backends.memory:create_backend",
    "postgres": "persistence.backends.postgres:create_backend",
    "supabase": "persistence.backends.supabase:create_backend",
}


def register_backend(kind: str, factory: BackendFactory) -> None:
    """Make ``kind`` available to the factories (a third-party backend, or a test double)."""
    with _lock:
        _registry[kind] = factory


def known_kinds() -> tuple[str, ...]:
    """The registered backend kinds, sorted."""
    with _lock:
        return tuple(sorted(_registry))


def _backend(
    kind: str, read_only: bool, options: dict[str, Any], settings: PersistenceSettings | None
) -> Backend:
    with _lock:
        entry = _registry.get(kind) if isinstance(kind, str) else None
    if entry is None:
        raise ConfigurationError(
            f"unknown backend kind {kind!r}; known kinds: {', '.join(known_kinds())}"
        )
    if "read_only" in options:
        # The factory decides: a facade's backend is read-only, an agent's is not.
        raise ConfigurationError(
            "read_only= is not an option: create_read_only_facade builds a read-only backend, "
            "create_persistence_agent a read-write one"
        )
    if settings is not None and not isinstance(settings, PersistenceSettings):
        raise ConfigurationError(
            f"settings= must be a PersistenceSettings, not {type(settings).__name__}"
        )
    if kind in PersistenceSettings.BACKEND_OPTIONS:
        # Read the environment only for a kind that uses it: memory never does.
        settings = settings if settings is not None else PersistenceSettings.from_env()
        options = settings.backend_options(kind, options)
    if isinstance(entry, str):
        module_name, _, attribute = entry.partition(":")
        entry = getattr(importlib.import_module(module_name), attribute)
    return entry(read_only=read_only, **options)


def create_read_only_facade(
    kind: str = "memory",
    *,
    tables: Iterable[str] = BUSINESS_TABLES,
    columns: Mapping[str, Iterable[str]] | None = None,
    default_columns: Iterable[str] | None = None,
    settings: PersistenceSettings | None = None,
    embeddings: Any = None,
    redaction: RedactionPolicy | Mapping[str, Mapping[str, str]] | None = None,
    **options: Any,
) -> ReadOnlyPersistenceFacade:
    """A read-only facade over a new ``kind`` backend; ``tables`` is the read allow-list.

    ``columns`` restricts the columns of the tables it names; ``default_columns`` those of every
    other table (``()``: they expose none), see :class:`~persistence.AccessPolicy`.

    ``embeddings`` (any LangChain ``Embeddings``) serves the semantic leg of
    :meth:`~persistence.ReadOnlyPersistenceFacade.search`.

    ``redaction`` (a :class:`~persistence.redaction.RedactionPolicy`, or its ``rules`` mapping
    ``{table: {column: spec}}``, ``"*"`` for every table) redacts rows before they leave the
    facade; without it, ``settings.redact`` (``RAG_REDACT``, with ``RAG_REDACTION_KEY``) when
    ``settings`` are given or the kind reads the environment.

    ``kind="memory"`` reads ``default_store()`` unless ``store=`` is given. For ``postgres`` and
    ``supabase``, options not given come from ``settings`` (default: the environment).
    """
    policy = AccessPolicy.read_only(tables, columns, default_columns)
    if kind in PersistenceSettings.BACKEND_OPTIONS and settings is None:
        settings = PersistenceSettings.from_env()
    backend = _backend(kind, True, options, settings)
    return ReadOnlyPersistenceFacade(
        backend, policy, embeddings=embeddings, redaction=_redaction(redaction, settings)
    )


def _redaction(
    given: RedactionPolicy | Mapping[str, Mapping[str, str]] | None,
    settings: PersistenceSettings | None,
) -> RedactionPolicy | None:
    """The facade's redaction policy: the one given, else the settings' ``RAG_REDACT``."""
    if isinstance(given, RedactionPolicy):
        return given
    key = settings.redaction_key if isinstance(settings, PersistenceSettings) else None
    lookups = settings.redact_lookups if isinstance(settings, PersistenceSettings) else "hash"
    if given is not None:
        if not isinstance(given, Mapping):
            raise ConfigurationError(
                "redaction= must be a RedactionPolicy or {table: {column: spec}}, "
                f"not {type(given).__name__}"
            )
        rules = {t: c for t, c in given.items() if t != "*"}
        return RedactionPolicy(rules, default=given.get("*"), key=key, lookups=lookups)
    if isinstance(settings, PersistenceSettings) and settings.redact:
        return RedactionPolicy.parse(settings.redact, key=key, lookups=lookups)
    return None


def create_persistence_agent(
    kind: str = "memory",
    *,
    tables: Iterable[str] = BUSINESS_TABLES,
    settings: PersistenceSettings | None = None,
    **options: Any,
) -> PersistenceAgent:
    """A read-write agent over a new ``kind`` backend, for seeding data and trusted callers.

    It may write ``tables`` minus the governance tables. Options not given come from
    ``settings`` as for :func:`create_read_only_facade`.
    """
    backend = _backend(kind, False, options, settings)
    return PersistenceAgent(backend, AccessPolicy.writer(tables))
