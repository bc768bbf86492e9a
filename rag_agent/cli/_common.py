"""What every part of the CLI shares: exit codes, the usage error, small stream helpers.

Kept free of heavy imports: ``rag-agent --help`` loads this module and the parser only.
"""

from __future__ import annotations

from typing import Any, TextIO

EXIT_OK = 0
#: A query failed (the envelope carries ``metadata.error``), or ``doctor`` found a problem.
EXIT_QUERY_ERROR = 1
#: A usage or configuration error: a bad option or variable, a missing DSN, a malformed DSN, a
#: privileged role, a missing optional extra.
EXIT_USAGE = 2
#: The backend could not be reached or did not answer in time.
EXIT_UNAVAILABLE = 3
#: Something failed that the CLI did not anticipate (a bug, or an unclassified driver error).
EXIT_INTERNAL = 4
#: Interrupted (Ctrl-C), as shells report SIGINT.
EXIT_INTERRUPTED = 130

#: The bundled backends (``--backend``); ``rag_agent.settings.BACKEND_KINDS``, repeated here so
#: that the parser needs no settings.
BACKENDS = ("memory", "postgres", "supabase")

Envelope = dict[str, Any]


class UsageError(Exception):
    """A mistake in the command line or the configuration: exit code 2."""


class PromptInterrupted(KeyboardInterrupt):
    """Ctrl-C at a prompt whose line was already ended where the prompt was written (stdout,
    for ``input()``): exit 130 without another newline on stderr."""


def isatty(stream: TextIO) -> bool:
    """Whether ``stream`` is a terminal (False for anything that cannot tell)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def cli_words(text: str) -> str:
    """A library message in the command line's words: the Python argument
    ``allow_privileged=True`` is the flag ``--allow-privileged`` here."""
    return text.replace("allow_privileged=True", "--allow-privileged")


def column_list(value: str, option: str = "--columns") -> list[str]:
    """A ``--columns`` value (``subject,body``) as its column names; none is a usage error."""
    columns = [c.strip() for c in value.split(",") if c.strip()]
    if not columns:
        raise UsageError(f"{option} names no column")
    return columns
