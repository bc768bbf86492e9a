"""The ``rag-agent`` command line: ask, chat, tables, load, demo, tools, doctor.

Run it as ``rag-agent`` or ``python -m rag_agent.cli``; ``main(argv)`` runs it in-process.

Output contract:

- results go to **stdout**: a readable table on a terminal; the envelope as JSON with ``--json``
  or whenever stdout is not a terminal (one JSON document per line in ``chat`` and ``demo``);
- everything else (logs, errors, prompts) goes to **stderr**; logs at WARNING unless
  ``RAG_DEBUG=1``;
- exit codes: ``0`` success, ``1`` a query failed (the envelope carries ``error``), ``2`` usage or
  configuration error. An error is one line on stderr; the traceback only with ``RAG_DEBUG=1``.

With the memory backend (the default) the bundled sample dataset is loaded first, unless
``--empty``.
"""

from rag_agent.cli._common import EXIT_OK, EXIT_QUERY_ERROR, EXIT_USAGE, UsageError
from rag_agent.cli.app import build_parser, main
from rag_agent.cli.logs import configure_logging
from rag_agent.cli.render import format_envelope, format_grid

__all__ = [
    "EXIT_OK",
    "EXIT_QUERY_ERROR",
    "EXIT_USAGE",
    "UsageError",
    "build_parser",
    "configure_logging",
    "format_envelope",
    "format_grid",
    "main",
]
