"""What a run asks the facade to read: :class:`ReadRequest`, the one request object of a read.

The facade builds (and checks) the ``Query`` of a read itself; a run's conditions passed its
checks already (:func:`rag_agent.understanding.request.apply_conditions`), so the pipeline hands
it the read's fields as they are, with no ``Query`` of its own to build and validate first.
"""

from __future__ import annotations

from typing import NamedTuple

from persistence import Filter, Order
from rag_agent.specs import Condition

__all__ = ["ReadRequest", "planned_read"]


class ReadRequest(NamedTuple):
    """The fields of a ``Query`` a run's read and its cache key use, with no checks of its
    own: the facade checks them when it builds the read's ``Query``."""

    table: str
    filters: tuple[Filter, ...]
    limit: int
    offset: int
    columns: tuple[str, ...] | None = None
    order: tuple[Order, ...] = ()


def planned_read(
    table: str, conditions: tuple[Condition, ...], window: tuple[int, int]
) -> ReadRequest:
    """The read of ``conditions`` on ``table`` for the page ``window`` (limit, offset).

    Built anew each time (microseconds): a memo keyed by the values would hold every value a
    caller ever sent, outside any bound.
    """
    return ReadRequest(table, tuple([c.to_filter() for c in conditions]), window[0], window[1])
