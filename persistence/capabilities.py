"""What a backend can do, declared by the backend and checked by the facade before use."""

from __future__ import annotations

from dataclasses import dataclass

from persistence.query import Op

__all__ = ["Capabilities"]


@dataclass(frozen=True, slots=True)
class Capabilities:
    """A backend's declared abilities.

    ``native_offset``: the backend skips rows itself; otherwise the facade fetches
    ``offset + limit`` rows and slices. ``max_page_size``: the most rows one backend read may
    return; the facade fetches larger pages in chunks. ``count``: exact total counts.
    """

    operators: frozenset[Op] = frozenset(Op)
    native_offset: bool = True
    max_page_size: int | None = None
    count: bool = True
    aggregates: bool = False
    raw_sql: bool = False

    def supports(self, op: Op) -> bool:
        """True when ``op`` is among the declared operators."""
        return op in self.operators
