"""The one refusal of a write by something read-only: the facade, or a backend built read-only."""

from __future__ import annotations

from typing import NoReturn

from persistence.errors import PersistencePermissionError

__all__ = ["refuse_write"]


def refuse_write(operation: str, table: object, holder: str) -> NoReturn:
    """Raise ``PersistencePermissionError`` for ``operation`` on ``table`` (``None`` when the
    call named no table); ``holder`` says who refuses, e.g. ``"this facade"``."""
    name = table if isinstance(table, str) else None
    raise PersistencePermissionError(
        f"{operation} on {name or 'any table'!r} refused: {holder} is read-only",
        table=name,
        operation=operation,
    )
