"""Opening a backend for a command: options from flags and settings, the sample data."""

from __future__ import annotations

import argparse
import contextlib
import importlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from persistence import (
    Backend,
    MemoryStore,
    ReadOnlyPersistenceFacade,
    create_read_only_facade,
)
from persistence.schema import TABLE_DDL
from rag_agent.cli._common import Envelope, UsageError
from rag_agent.factory import create_rag_agent
from rag_agent.settings import RAGSettings

BACKENDS = ("memory", "postgres", "supabase")


@dataclass
class Connection:
    """What a command reads through: a facade, and the agent over it when one was asked for."""

    facade: ReadOnlyPersistenceFacade
    agent: Any = None
    loaded: Mapping[str, int] | None = None


def backend_options(args: argparse.Namespace, settings: RAGSettings) -> dict[str, Any]:
    """The backend options of ``args``: flags win, ``settings`` fill the rest (secrets unwrapped).

    The Supabase key comes from the settings (``SUPABASE_KEY``) only: a command line shows in
    ``ps``.
    """
    kind = args.backend
    variables = settings.env_variables()
    if kind == "postgres":
        options = settings.backend_options(kind, {"dsn": args.dsn or None})
        if not options.get("dsn"):
            raise UsageError(f"the postgres backend needs --dsn or {variables['postgres_dsn']}")
    elif kind == "supabase":
        options = settings.backend_options(kind, {"url": args.url or None})
        if not options.get("url"):
            raise UsageError(f"the supabase backend needs --url or {variables['supabase_url']}")
        if not options.get("key"):
            raise UsageError(
                f"the supabase backend needs {variables['supabase_key']} in the environment"
            )
    else:
        if args.dsn or args.url:
            raise UsageError("--dsn and --url need --backend postgres or --backend supabase")
        return {}
    if getattr(args, "allow_privileged", False):
        options["allow_privileged"] = True
    return options


@contextlib.contextmanager
def connect(
    args: argparse.Namespace, *, agent: bool, settings: RAGSettings
) -> Iterator[Connection]:
    """A read-only facade for ``args`` (and a ``RAGAgent`` over it with ``agent=True``).

    The memory backend gets a private store with the sample data, unless ``--empty``.
    """
    from rag_agent.sample import load_sample

    options = backend_options(args, settings)
    loaded = None
    if args.backend == "memory":
        store = MemoryStore()
        if not getattr(args, "empty", False):
            loaded = load_sample(store)
        options["store"] = store
    if agent:
        rag = create_rag_agent(args.backend, settings=settings, **options)
        connection = Connection(rag.facade, rag, loaded)
    else:
        facade = create_read_only_facade(args.backend, settings=settings, **options)
        connection = Connection(facade)
    try:
        yield connection
    finally:
        (connection.agent or connection.facade).close()


def writable_backend(kind: str, options: Mapping[str, Any]) -> Backend:
    # Seeding is a deployment step: the governance tables are written below the access policy,
    # by the backend itself; every other table goes through a PersistenceAgent (see cmd_load).
    module = importlib.import_module(f"persistence.backends.{kind}")
    backend: Backend = module.create_backend(read_only=False, **options)
    return backend


def create_postgres_tables(dsn: str) -> None:
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - the postgres extra is part of [all]
        raise UsageError(
            '--create-tables needs psycopg: pip install "readonly-rag[postgres]"'
        ) from exc
    # The DDL is a constant of persistence.schema; nothing a user typed reaches this statement.
    # (Passed as bytes: psycopg's LiteralString typing cannot see that a mapping value is constant.)
    with psycopg.connect(dsn, autocommit=True) as conn:
        for ddl in TABLE_DDL.values():
            conn.execute(ddl.encode())


# --------------------------------------------------------------------------- the agent


def run_query(agent: Any, text: str, args: argparse.Namespace, **overrides: Any) -> Envelope:
    options = {
        "table": args.table,
        "limit": args.limit,
        "offset": args.offset,
        "include_raw": args.include_raw,
        "count_only": True if args.count else None,
    }
    options.update(overrides)
    envelope: Envelope = agent.run(text, return_json=True, **options)
    return envelope
