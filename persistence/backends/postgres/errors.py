"""The one place where psycopg's exceptions become ours (always ``raise ... from exc``)."""

from __future__ import annotations

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import PoolTimeout

from persistence.errors import BackendError, BackendUnavailableError, QueryTimeoutError

__all__ = ["is_connection_lost", "translate"]

# Server shutting down or terminating our session: the connection is gone, not the query wrong.
_LOST_SQLSTATES = frozenset({"57P01", "57P02", "57P03"})


def is_connection_lost(exc: BaseException) -> bool:
    """True when ``exc`` means the connection was refused or lost (worth one retry of a read)."""
    if isinstance(exc, pg_errors.QueryCanceled):
        return False
    if isinstance(exc, psycopg.InterfaceError):  # "the connection is closed"
        return True
    if isinstance(exc, psycopg.OperationalError):
        state = exc.sqlstate
        return state is None or state.startswith("08") or state in _LOST_SQLSTATES
    return False


def translate(exc: Exception, operation: str) -> BackendError:
    """Our error for ``exc``; the caller raises it ``from exc``."""
    if isinstance(exc, PoolTimeout):
        return BackendUnavailableError(
            f"postgres {operation}: no connection available in time ({exc})",
            backend="postgres",
            operation=operation,
        )
    if isinstance(exc, pg_errors.QueryCanceled):
        return QueryTimeoutError(
            f"postgres {operation}: statement cancelled after its timeout",
            backend="postgres",
            operation=operation,
        )
    if is_connection_lost(exc):
        return BackendUnavailableError(
            f"postgres {operation}: connection refused or lost: {_first_line(exc)}",
            backend="postgres",
            operation=operation,
        )
    state = getattr(exc, "sqlstate", None)
    detail = f" [{state}]" if state else ""
    return BackendError(
        f"postgres {operation} failed{detail}: {_first_line(exc)}",
        backend="postgres",
        operation=operation,
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
