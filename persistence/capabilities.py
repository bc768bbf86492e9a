"""What a backend can do, declared by the backend and checked by the facade before use."""

from __future__ import annotations

from dataclasses import dataclass

from persistence.aggregate import FUNCTIONS
from persistence.query import Op

__all__ = ["Capabilities"]


@dataclass(frozen=True, slots=True)
class Capabilities:
    """A backend's declared abilities: the filter operators and the aggregate metric functions
    it serves (``aggregates``, a subset of :data:`persistence.aggregate.FUNCTIONS`; empty when the
    backend cannot aggregate at all).

    The facade refuses a filter whose operator is not declared with
    ``UnsupportedOperatorError`` before the backend is asked anything. A backend serves any
    ``limit`` and ``offset`` it is given (refilling pages its server caps, as the Supabase one
    does) and counts exactly what it can; the facade neither slices nor chunks for it.

    >>> Capabilities(operators=frozenset({Op.EQ, Op.IN})).supports(Op.ICONTAINS)
    False
    """

    operators: frozenset[Op] = frozenset(Op)
    aggregates: frozenset[str] = frozenset(FUNCTIONS)

    def supports(self, op: Op) -> bool:
        """True when ``op`` is among the declared operators."""
        return op in self.operators

    def aggregates_with(self, function: str) -> bool:
        """True when the metric ``function`` (``"sum"``, ``"count_distinct"``...) is declared."""
        return function in self.aggregates
