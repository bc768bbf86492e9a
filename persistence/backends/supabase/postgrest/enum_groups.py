"""Groups keyed by enum columns over PostgREST, in the order every other backend gives.

PostgREST orders an enum by its declaration (``order=status.asc``), the other backends by the
label's text in code-point order, and it cannot order by a cast. When every grouped column is an
enum, the groups are few and known in advance (at most the product of the label counts, NULL
included), so all of them are asked for, ordered here, and cut to the caller's limit: the same
groups, in the same order, ``capped`` and ``total_groups`` as on PostgreSQL and memory.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from persistence.aggregate import AggregateResult, Group
from persistence.values.column_kinds import ColumnType

__all__ = ["MAX_ENUM_GROUPS", "all_enum_groups", "ordered_and_capped"]

#: The most groups asked for at once to order enum keys here (beyond, the server orders them).
MAX_ENUM_GROUPS = 1000


def all_enum_groups(group_by: tuple[str, ...], types: Mapping[str, ColumnType]) -> int | None:
    """How many groups an all-enum grouping can have at most, or ``None`` when a grouped column
    is not an enum or the product exceeds :data:`MAX_ENUM_GROUPS`."""
    if not group_by:
        return None
    sizes = []
    for column in group_by:
        ctype = types.get(column)
        if ctype is None or ctype.labels is None:
            return None
        sizes.append(len(ctype.labels) + 1)  # NULL is a group too
    bound = math.prod(sizes)
    return bound if bound <= MAX_ENUM_GROUPS else None


def _sort_key(group: Group, group_by: tuple[str, ...]) -> tuple[Any, ...]:
    # Ascending, NULL last, labels in code-point order (str comparison is by code point).
    return tuple((group.keys[c] is None, group.keys[c] or "") for c in group_by)


def ordered_and_capped(result: AggregateResult, limit: int) -> AggregateResult:
    """``result`` (every group) in key order, cut to ``limit`` groups."""
    groups = sorted(result.groups, key=lambda g: _sort_key(g, result.group_by))
    return AggregateResult(
        group_by=result.group_by,
        metrics=result.metrics,
        groups=tuple(groups[:limit]),
        capped=len(groups) > limit,
        matched=result.matched,
        total_groups=len(groups),
    )
