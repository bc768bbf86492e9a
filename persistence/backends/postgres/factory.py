"""The factory hook of ``kind="postgres"``: its options checked, nothing connected yet."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from persistence.backends.postgres.backend import PostgresBackend
from persistence.backends.postgres.vectors import SearchSettings
from persistence.errors import ConfigurationError
from persistence.options import check_options, require_text

__all__ = ["create_backend"]

_INT_OPTIONS = ("pool_min_size", "pool_max_size", "statement_timeout_ms")
_FLOAT_OPTIONS = ("pool_timeout", "connect_timeout", "max_idle", "max_lifetime")
_BOOL_OPTIONS = ("prepared_statements", "transaction_pooler", "allow_privileged")
_OPTIONS = frozenset((*_INT_OPTIONS, *_FLOAT_OPTIONS, *_BOOL_OPTIONS, "schema", "clock", "search"))


def _check_options(options: Mapping[str, Any]) -> None:
    check_options("kind='postgres'", options, {"dsn", *_OPTIONS})
    for name in _INT_OPTIONS:
        value = options.get(name)
        if value is not None and (type(value) is not int or value <= 0):
            raise ConfigurationError(f"{name}= must be a positive int, not {value!r}")
    for name in _FLOAT_OPTIONS:
        value = options.get(name)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int | float) or value <= 0
        ):
            raise ConfigurationError(f"{name}= must be a positive number, not {value!r}")
    for name in _BOOL_OPTIONS:
        value = options.get(name)
        if value is not None and type(value) is not bool:
            raise ConfigurationError(f"{name}= must be True or False, not {value!r}")
    schema = options.get("schema")
    if schema is not None and not (isinstance(schema, str) and schema.isidentifier()):
        raise ConfigurationError(f"schema= must be a plain identifier, not {schema!r}")
    search = options.get("search")
    if search is not None and not isinstance(search, SearchSettings):
        raise ConfigurationError(f"search= must be a SearchSettings, not {search!r}")
    low, high = options.get("pool_min_size", 1), options.get("pool_max_size", 10)
    if low > high:
        raise ConfigurationError(f"pool_min_size={low} exceeds pool_max_size={high}")


def create_backend(
    *, read_only: bool = True, dsn: str | None = None, **options: Any
) -> PostgresBackend:
    """Factory hook for ``kind="postgres"``: ``dsn=`` is required; nothing connects yet.

    The facade factories pass ``RAG_POSTGRES_DSN`` and ``RAG_STATEMENT_TIMEOUT_MS`` (through
    ``PersistenceSettings``) for the options a caller leaves out; this hook reads no environment.
    Options: ``schema`` (``"public"``), ``statement_timeout_ms`` (5000), ``pool_min_size`` (1),
    ``pool_max_size`` (10), ``pool_timeout`` (10 s), ``connect_timeout`` (5 s), ``max_idle``
    (600 s), ``max_lifetime`` (3600 s), ``transaction_pooler`` (False; True behind
    PgBouncer/Supavisor in transaction mode), ``prepared_statements`` (default: not
    ``transaction_pooler``), ``allow_privileged`` (False), ``search``
    (a :class:`~persistence.backends.postgres.SearchSettings`: text-search configuration,
    declared vector columns, the exact-path and re-rank bounds).
    """
    dsn = require_text(
        "postgres", "dsn", dsn, what="a connection string", variable="RAG_POSTGRES_DSN"
    )
    _check_options(options)
    return PostgresBackend(dsn, read_only=read_only, **options)
