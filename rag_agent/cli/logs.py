"""Logging for the CLI: structlog and stdlib logs to stderr, WARNING unless ``RAG_DEBUG=1``.

Both are redacted (:func:`persistence.redact_secrets`, :class:`persistence.RedactingFormatter`):
not even ``RAG_DEBUG=1`` prints a DSN password, an API key or a token.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator, MutableMapping
from typing import Any, TextIO

import structlog

from persistence import RedactingFormatter, redact_secrets
from rag_agent.settings import RAGSettings


@contextlib.contextmanager
def logging_for_cli(stream: TextIO, *, debug: bool) -> Iterator[None]:
    """Configure logging for one CLI run (``debug``: ``RAG_DEBUG``), then put back what was there.

    ``main`` is also called in-process (tests, notebooks): it must not leave the host's logging
    pointed at a stream that only existed for one call.
    """
    saved_structlog = structlog.get_config()
    root = logging.getLogger()
    saved_root = (root.level, list(root.handlers))
    configure_logging(stream, debug=debug)
    try:
        yield
    finally:
        structlog.configure(**saved_structlog)
        for handler in list(root.handlers):
            root.removeHandler(handler)
        root.setLevel(saved_root[0])
        for handler in saved_root[1]:
            root.addHandler(handler)


# Events the CLI already reports in its own words: a failed run is the "query failed" line, and
# a missing LLM shows as `fallback: disabled` in the envelope. With RAG_DEBUG=1 they are logged.
_REPORTED_EVENTS = frozenset({"rag.error", "rag.llm.disabled"})


def _drop_reported_events(
    logger: Any, method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    if event_dict.get("event") in _REPORTED_EVENTS:
        raise structlog.DropEvent
    return event_dict


def configure_logging(stream: TextIO | None = None, *, debug: bool | None = None) -> None:
    """Send structlog and stdlib logs to stderr, at WARNING unless ``debug`` (or ``RAG_DEBUG=1``).

    ``debug=None`` takes it from ``RAGSettings.from_env()``. Only the CLI configures logging: a
    library must leave that to its application.
    """
    if debug is None:
        debug = RAGSettings.from_env().debug
    level = logging.DEBUG if debug else logging.WARNING
    target = stream if stream is not None else sys.stderr
    structlog.configure(
        processors=[
            *([] if debug else [_drop_reported_events]),
            redact_secrets,  # masks DSN passwords, keys and tokens, in tracebacks too
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.dev.ConsoleRenderer(
                colors=False, exception_formatter=structlog.dev.plain_traceback
            ),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=target),
        cache_logger_on_first_use=False,
    )
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)  # not closed: the caller may still own it
    handler = logging.StreamHandler(target)
    handler.setFormatter(RedactingFormatter("%(asctime)s [%(levelname)s] %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(level)
