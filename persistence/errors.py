"""The error tree of the persistence layer.

::

    PersistenceError
     ├── PersistencePermissionError      .table .operation    (a write; a read outside policy)
     │    ├── TableNotAllowedError        .table .operation
     │    └── ColumnNotAllowedError       .table .column .operation
     ├── InvalidQueryError (ValueError)  .field               (a malformed Filter/Order/Query)
     ├── UnsupportedOperatorError        .operator .backend
 │    └── AggregatesDisabledError                         (PostgREST: db-aggregates-enabled off)
     ├── BackendError                    .backend .operation  (a run-time failure of the store)
     │    ├── BackendUnavailableError                         (refused, lost, pool exhausted)
     │    └── QueryTimeoutError                               (statement timeout)
     └── ConfigurationError              .variable            (a developer's mistake in set-up)

Misuse (``ConfigurationError``, ``InvalidQueryError``, permission errors) is told apart from
run-time failure (``BackendError`` family). Backend exceptions are translated once, at each
backend's boundary, with ``raise ... from exc`` so the driver's error stays on ``__cause__``.
"""

from __future__ import annotations

__all__ = [
    "AggregatesDisabledError",
    "BackendError",
    "BackendUnavailableError",
    "ColumnNotAllowedError",
    "ConfigurationError",
    "InvalidQueryError",
    "PersistenceError",
    "PersistencePermissionError",
    "QueryTimeoutError",
    "TableNotAllowedError",
    "UnsupportedOperatorError",
    "brief_repr",
]

#: What an error message shows of a caller's value, at most: messages are logged, redacted and
#: sent back to a model, and each of those costs time in the length of the text.
BRIEF_REPR_WIDTH = 60


def brief_repr(value: object, width: int = BRIEF_REPR_WIDTH) -> str:
    """``repr(value)`` cut to ``width`` characters, for error messages about caller values.

    Never raises and never renders a huge value whole: a long ``str`` is described by its
    length, an ``int`` too wide to print (``repr`` raises ``ValueError`` past 4,300 digits) by
    its number of digits, and a container by its type and length.

    >>> brief_repr(10**5000)
    'an integer of about 5001 digits'
    >>> brief_repr("x" * 1000)
    'a 1000-character string'
    """
    if isinstance(value, str) and len(value) > width:
        return f"a {len(value)}-character string"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 3 * width:
        # Digits from the bit length, as printing the number would cost (or raise) to count.
        return f"an integer of about {_digits(value)} digits"
    if isinstance(value, list | tuple | set | frozenset | dict) and len(value) > 8:
        return f"a {type(value).__name__} of {len(value)} items"
    try:
        shown = repr(value)
    except Exception:  # a value whose repr fails still gets a message
        return f"a {type(value).__name__}"
    return shown if len(shown) <= width else f"{shown[: width - 3]}..."


def _digits(value: int) -> int:
    # log10(2) * bits, rounded down, plus one: exact or one more than the true count.
    return int(abs(value).bit_length() * 0.30102999566398120) + 1


class PersistenceError(Exception):
    """Base of every error this library raises on purpose."""


class PersistencePermissionError(PersistenceError):
    """An operation the access policy forbids, such as any write through the read-only facade."""

    def __init__(self, message: str, *, table: str | None = None, operation: str | None = None):
        super().__init__(message)
        self.table = table
        self.operation = operation


class TableNotAllowedError(PersistencePermissionError):
    """A table name that is malformed or not in the allow-list (matched exactly)."""


class ColumnNotAllowedError(PersistencePermissionError):
    """A column name that is malformed, unknown to the table, or outside the column policy."""

    def __init__(
        self,
        message: str,
        *,
        table: str | None = None,
        column: str | None = None,
        operation: str | None = None,
    ):
        super().__init__(message, table=table, operation=operation)
        self.column = column


class InvalidQueryError(PersistenceError, ValueError):
    """A query value object built with values it cannot hold (a bad identifier, limit, ...)."""

    def __init__(self, message: str, *, field: str | None = None):
        super().__init__(message)
        self.field = field


class UnsupportedOperatorError(PersistenceError):
    """The backend does not declare the operator in its ``Capabilities``."""

    def __init__(self, message: str, *, operator: str, backend: str):
        super().__init__(message)
        self.operator = operator
        self.backend = backend


class AggregatesDisabledError(UnsupportedOperatorError):
    """The server refuses aggregate functions: PostgREST's ``db-aggregates-enabled`` setting
    (``pgrst.db_aggregates_enabled``) is off, as it is by default. The message says how to turn
    it on; nothing is computed by reading rows instead."""

    #: The PostgREST setting that enables aggregates.
    setting = "db-aggregates-enabled"


class BackendError(PersistenceError):
    """The store failed at run time; ``__cause__`` holds the driver's exception."""

    def __init__(self, message: str, *, backend: str | None = None, operation: str | None = None):
        super().__init__(message)
        self.backend = backend
        self.operation = operation


class BackendUnavailableError(BackendError):
    """The store could not be reached: connection refused or lost, pool exhausted, HTTP 5xx."""


class QueryTimeoutError(BackendError):
    """The store cancelled the statement because it ran past its timeout."""


class ConfigurationError(PersistenceError):
    """A bad option or environment variable; the message names the variable and the argument."""

    def __init__(self, message: str, *, variable: str | None = None):
        super().__init__(message)
        self.variable = variable
