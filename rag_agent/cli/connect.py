"""Opening a backend for a command: options from flags and settings, the sample data."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import re
import urllib.parse
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
from persistence.settings import mask_userinfo
from rag_agent.cli._common import Envelope, UsageError
from rag_agent.factory import create_rag_agent
from rag_agent.settings import RAGSettings


@dataclass
class Connection:
    """What a command reads through: a facade, and the agent over it when one was asked for."""

    facade: ReadOnlyPersistenceFacade
    agent: Any = None
    loaded: Mapping[str, int] | None = None


def resolve_backend(args: argparse.Namespace, settings: RAGSettings, *, default: str) -> str:
    """The backend a command reads: named, else inferred from what is configured.

    ``--backend`` wins; then ``--dsn`` (postgres) or ``--url`` (supabase); then ``RAG_BACKEND``;
    then ``RAG_POSTGRES_DSN`` or ``SUPABASE_URL``, whichever is set; else ``default``. Two
    candidates at the same level are a usage error: the CLI never picks one silently.
    """
    if args.backend:
        return str(args.backend)
    variables = settings.env_variables()
    flags = [kind for kind, given in (("postgres", args.dsn), ("supabase", args.url)) if given]
    if len(flags) > 1:
        raise UsageError("--dsn and --url name two backends; choose one with --backend")
    if flags:
        return flags[0]
    if settings.backend:
        return settings.backend
    configured = [
        kind
        for kind, value in (
            ("postgres", settings.postgres_dsn),
            ("supabase", settings.supabase_url),
        )
        if value is not None
    ]
    if len(configured) > 1:
        raise UsageError(
            f"both {variables['postgres_dsn']} and {variables['supabase_url']} are set; choose "
            f"with --backend or {variables['backend']}"
        )
    return configured[0] if configured else default


def mask_dsn(dsn: str) -> str:
    """``dsn`` with its password shown as ``***`` (URL or ``key=value`` form)."""
    if "://" in dsn:
        return mask_userinfo(dsn)
    return _KEYWORD_PASSWORD.sub(r"\1***", dsn)


_KEYWORD_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def dsn_password_warning(dsn: object) -> str | None:
    """The warning for a ``--dsn`` that holds a password, or ``None``.

    A command line is readable by every local user (``ps``, ``/proc``) and lands in shell
    history; the DSN works, but its password should come from the environment.
    """
    if not isinstance(dsn, str) or not _has_password(dsn):
        return None
    return (
        "rag-agent: warning: --dsn holds a password, which every local user can read with ps "
        "and your shell keeps in its history; pass the DSN by RAG_POSTGRES_DSN, or leave the "
        "password out and give it by PGPASSWORD or a PGPASSFILE (~/.pgpass)"
    )


def _has_password(dsn: str) -> bool:
    if "://" in dsn:
        try:
            parts = urllib.parse.urlsplit(dsn)
        except ValueError:
            return ":" in dsn.partition("://")[2].partition("@")[0]
        query = urllib.parse.parse_qs(parts.query)
        return bool(parts.password) or any(k.lower() == "password" for k in query)
    return _KEYWORD_PASSWORD.search(dsn) is not None


def target_of(args: argparse.Namespace, settings: RAGSettings) -> str:
    """The backend a command read, for an error line: ``postgres (postgresql://u:***@h/db)``."""
    kind = getattr(args, "backend", None) or "the backend"
    if kind == "postgres":
        dsn = args.dsn or _secret(settings.postgres_dsn)
        return f"postgres ({mask_dsn(dsn)})" if dsn else kind
    if kind == "supabase":
        url = args.url or settings.supabase_url
        return f"supabase ({mask_userinfo(url)})" if url else kind
    return str(kind)


def secrets_of(args: argparse.Namespace, settings: RAGSettings) -> list[str]:
    """The secrets an error line must never show: keys, and the password of any DSN."""
    found = [_secret(settings.supabase_key), _secret(settings.openai_api_key)]
    for dsn in (getattr(args, "dsn", None), _secret(settings.postgres_dsn)):
        if not dsn:
            continue
        if "://" in dsn:
            with contextlib.suppress(ValueError):
                found.append(urllib.parse.unquote(urllib.parse.urlsplit(dsn).password or ""))
        found += [m.group(2).strip("'") for m in _KEYWORD_PASSWORD.finditer(dsn)]
    return sorted({s for s in found if s and len(s) >= 3}, key=len, reverse=True)


def _secret(value: Any) -> str:
    return value.get_secret_value() if value is not None else ""


def check_dsn(dsn: str) -> None:
    # libpq's own parser, before any connection: a malformed DSN is a configuration error.
    try:
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:  # pragma: no cover - the backend says which extra is missing
        return
    try:
        _check_values(conninfo_to_dict(dsn))
    except Exception as exc:
        # libpq quotes the pieces it could not read, which may be a password: never shown.
        reason = _QUOTED.sub(
            lambda m: '"…"' if len(m[1]) > 1 and m[1] in dsn else m[0], " ".join(str(exc).split())
        )
        shown = f" {mask_dsn(dsn)!r}" if "://" in dsn else ""
        raise UsageError(f"the DSN{shown} is malformed: {reason}") from None


_QUOTED = re.compile(r'"([^"]*)"')
# libpq parses these keywords' values only when it connects, and then reports a bad value as
# "connection is bad": an unavailable backend (exit 3) for what is a typing mistake (exit 2).
_CHOICES = {
    "sslmode": ("disable", "allow", "prefer", "require", "verify-ca", "verify-full"),
    "gssencmode": ("disable", "prefer", "require"),
    "channel_binding": ("disable", "prefer", "require"),
    "target_session_attrs": (
        "any", "read-write", "read-only", "primary", "standby", "prefer-standby",
    ),
    "load_balance_hosts": ("disable", "random"),
    "sslnegotiation": ("postgres", "direct"),
}  # fmt: skip
_NUMBERS = ("port", "connect_timeout", "keepalives", "keepalives_idle", "keepalives_interval",
            "keepalives_count", "tcp_user_timeout")  # fmt: skip


def _check_values(params: Mapping[str, Any]) -> None:
    """Refuse a value libpq would refuse only on connecting (a choice, a number)."""
    for key, choices in _CHOICES.items():
        value = params.get(key)
        if value is not None and str(value) not in choices:
            raise ValueError(f"{key} must be one of {', '.join(choices)}, not {str(value)!r}")
    for key in _NUMBERS:
        value = str(params.get(key) or "")
        # A port may list one per host ("5432,5433").
        if value and not all(p.strip().lstrip("-").isdigit() for p in value.split(",")):
            raise ValueError(f"the {key.replace('_', ' ')} {value!r} is not a number")


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
        check_dsn(options["dsn"])
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
            raise UsageError("--dsn and --url name a postgres or supabase backend, not memory")
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
    from rag_agent.ops.sample import load_sample

    options = backend_options(args, settings)
    loaded = None
    if args.backend == "memory":
        sample = not getattr(args, "empty", False)
        # Named, so that every envelope read from it says backend {memory, sample}.
        store = MemoryStore(name=SAMPLE_DATABASE if sample else None)
        if sample:
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


#: The database name the CLI's sample store answers under (``metadata.backend.database``).
SAMPLE_DATABASE = "sample"


def sample_note(connection: Connection, args: argparse.Namespace, settings: RAGSettings) -> str:
    """The stderr line saying the answer comes from the bundled sample, or ``""``.

    Without it, a script that forgot its DSN would print the sample's rows as if they were its
    own: the JSON on stdout is the same shape whichever backend answered.
    """
    if connection.loaded is None:
        return ""
    variables = settings.env_variables()
    return (
        "rag-agent: note: answering from the bundled sample data (memory backend); set --dsn or "
        f"{variables['postgres_dsn']} (or --url / {variables['supabase_url']}) to read your "
        "database\n"
    )


def writable_backend(kind: str, options: Mapping[str, Any]) -> Backend:
    # Seeding is a deployment step: the governance tables are written below the access policy,
    # by the backend itself; every other table goes through a PersistenceAgent (see cmd_load).
    module = importlib.import_module(f"persistence.backends.{kind}")
    backend: Backend = module.create_backend(read_only=False, **options)
    return backend


def load_sample_into(kind: str, options: Mapping[str, Any]) -> dict[str, int]:
    """Write the bundled sample into a ``kind`` backend; rows written per table."""
    from persistence import GOVERNANCE_TABLES, AccessPolicy, PersistenceAgent
    from rag_agent.ops.sample import SAMPLE_TABLES, load_sample

    backend = writable_backend(kind, options)
    try:
        governance = [t for t in SAMPLE_TABLES if t in GOVERNANCE_TABLES]
        counts = load_sample(backend, tables=governance)
        counts.update(load_sample(PersistenceAgent(backend, AccessPolicy.writer())))
    finally:
        backend.close()
    return counts


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
        "trace": bool(getattr(args, "trace", False)),
    }
    options.update(overrides)
    envelope: Envelope = agent.run(text, return_json=True, **options)
    return envelope
