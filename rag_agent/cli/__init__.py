"""The ``rag-agent`` command line: ask, chat, tables, load, demo, tools, doctor, mcp, index,
search-function.

Run it as ``rag-agent`` or ``python -m rag_agent.cli``; ``main(argv)`` runs it in-process.

Output contract:

- results go to **stdout**: a readable table on a terminal; the envelope as JSON with ``--json``
  or whenever stdout is not a terminal (one JSON document per line in ``chat`` and ``demo``);
- everything else (logs, errors, prompts) goes to **stderr**; logs at WARNING unless
  ``RAG_DEBUG=1``;
- exit codes: ``0`` success, ``1`` a query failed (the envelope carries ``error``), ``2`` usage or
  configuration error, ``3`` backend unavailable or timed out, ``4`` internal error. An error
  is one line on stderr; the traceback only with ``RAG_DEBUG=1``.

The backend is the one named (``--backend``, ``RAG_BACKEND``) or configured (``--dsn`` or
``RAG_POSTGRES_DSN``: postgres; ``--url`` or ``SUPABASE_URL``: supabase), else memory, where the
bundled sample dataset is loaded first, unless ``--empty``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rag_agent.cli._common import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_QUERY_ERROR,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    UsageError,
)
from rag_agent.cli.app import build_parser, main
from rag_agent.cli.render import format_envelope, format_grid

if TYPE_CHECKING:
    from rag_agent.cli.logs import configure_logging

__all__ = [
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_QUERY_ERROR",
    "EXIT_UNAVAILABLE",
    "EXIT_USAGE",
    "UsageError",
    "build_parser",
    "configure_logging",
    "format_envelope",
    "format_grid",
    "main",
]


def __getattr__(name: str) -> Any:
    # Logging needs structlog and the settings: loaded when asked for, not by ``--help``.
    if name == "configure_logging":
        from rag_agent.cli.logs import configure_logging

        return configure_logging
    raise AttributeError(f"module 'rag_agent.cli' has no attribute {name!r}")
