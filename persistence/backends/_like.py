"""SQL ``LIKE``: escaping literals, and ``LIKE``/``icontains`` evaluated in Python, once.

The memory backend filters with these, and the Supabase backend re-checks rows with them where
PostgREST's filter is wider than the query (a literal ``*``): both must agree with PostgreSQL.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import Any

from persistence.query import Filter, Op

__all__ = ["escape_like", "like_regex", "text_predicate"]


def escape_like(text: str) -> str:
    """``text`` with ``\\``, ``%`` and ``_`` escaped for ``LIKE ... ESCAPE '\\'``."""
    # ``\`` first, so the escapes added for ``%`` and ``_`` are not doubled.
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


@functools.lru_cache(maxsize=512)
def like_regex(pattern: str) -> re.Pattern[str]:
    """Translate a LIKE pattern (``%``, ``_``, ``\\`` escape) into a regex for ``fullmatch``.

    Case-sensitive as given; ``ilike`` callers lower-case both the pattern and the text.
    """
    parts: list[str] = []
    chars = iter(pattern)
    for char in chars:
        if char == "\\":
            parts.append(re.escape(next(chars, "\\")))
        elif char == "%":
            parts.append(".*")
        elif char == "_":
            parts.append(".")
        else:
            parts.append(re.escape(char))
    return re.compile("".join(parts), re.DOTALL)


def text_predicate(flt: Filter) -> Callable[[Mapping[str, Any]], bool]:
    """The row test for an ``ICONTAINS`` or ``ILIKE`` filter; a non-text value never matches."""
    column = flt.column
    if flt.op is Op.ICONTAINS:
        needle = flt.value.lower()
        return lambda row: isinstance(v := row.get(column), str) and needle in v.lower()
    if flt.op is Op.ILIKE:
        regex = like_regex(flt.value.lower())
        return lambda row: (
            isinstance(v := row.get(column), str) and regex.fullmatch(v.lower()) is not None
        )
    raise ValueError(f"{flt.op.value} is not a text operator")
