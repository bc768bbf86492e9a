"""Library logging: structlog events that stay off an application's stdout until it says otherwise.

structlog's built-in defaults print every event, debug included, to stdout, and an application's
stdout may be a protocol channel (a tool server speaking over stdio, a CLI printing JSON). So
until the application configures structlog (``structlog.configure``, or ``capture_logs`` in
tests), our events go to a logger that drops everything below WARNING and writes to stderr; from
then on the application's configuration applies. The choice is made at each use, so configuring
structlog after importing this library works.

Both chains mask secrets with :func:`persistence.redact_secrets`; an application configuring
structlog itself should put that processor before its renderer.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

from persistence.secrets import redact_secrets

__all__ = ["get_logger"]


class _Stderr:
    """A structlog logger writing rendered lines to whatever ``sys.stderr`` is now."""

    def msg(self, message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    debug = info = warning = warn = error = err = critical = exception = fatal = msg


_QUIET: Any = structlog.wrap_logger(
    _Stderr(),
    wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
    processors=[
        redact_secrets,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="%Y-%m-%d %H:%M:%S", utc=True),
        structlog.dev.ConsoleRenderer(
            colors=False, exception_formatter=structlog.dev.plain_traceback
        ),
    ],
)


class _LibraryLogger:
    """The application's structlog logger once structlog is configured, else the quiet one."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def _target(self) -> Any:
        if structlog.is_configured():
            return structlog.get_logger(self._name)
        return _QUIET

    def bind(self, **context: Any) -> Any:
        """The target's ``bind``: named here, so the call every run makes does not go through
        :meth:`__getattr__` (a failed attribute lookup first)."""
        return self._target().bind(**context)

    def __getattr__(self, method: str) -> Any:
        return getattr(self._target(), method)


def get_logger(name: str) -> Any:
    """A logger for the library's events (``rag.query``, ``postgres.retry``, ...)."""
    return _LibraryLogger(name)
