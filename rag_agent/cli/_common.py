"""What every part of the CLI shares: exit codes, the usage error, small stream helpers."""

from __future__ import annotations

from typing import Any, TextIO

EXIT_OK = 0
EXIT_QUERY_ERROR = 1
EXIT_USAGE = 2

Envelope = dict[str, Any]


class UsageError(Exception):
    """A mistake in the command line or the configuration: exit code 2."""


def isatty(stream: TextIO) -> bool:
    """Whether ``stream`` is a terminal (False for anything that cannot tell)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
