"""SQL ``LIKE``: escaping literals, and ``LIKE``/``icontains``/``ieq`` evaluated in Python, once.

The memory backend filters with these, and the Supabase backend re-checks rows with them where
PostgREST's filter is wider than the query (a literal ``*``): both must agree with PostgreSQL.

Case folding is PostgreSQL's ``lower()``, which ``ILIKE`` also applies to both sides in a UTF-8
database: one character at a time, through the C library's ``towlower``. Python's ``str.lower``
agrees with it character for character on every code point (checked against a C.UTF-8
PostgreSQL 15 database, glibc 2.36, Unicode 14) except two, which :func:`fold_case` maps first:

* ``İ`` (U+0130): Python's full mapping gives two characters, ``i`` and a combining dot;
  ``towlower`` gives ``i``.
* ``Σ`` (U+03A3): Python lowers it to final sigma (U+03C2) at the end of a word; PostgreSQL
  always to the medial one (U+03C3).

``str.casefold`` is *not* used: it folds ``ß`` to ``ss`` (and ~300 more), which ``lower()``
never does. Known divergence: a database whose ``LC_CTYPE`` is ``C`` lowers ASCII only, a
Turkish locale lowers ``I`` to a dotless one (U+0131), ICU collations and other Unicode versions
differ in rare code points; against those the memory backend keeps the C.UTF-8 rule above.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import Any

from persistence.query import Filter, Op

__all__ = ["escape_like", "fold_case", "like_regex", "text_predicate"]

# The code points where per-string ``str.lower`` differs from per-character ``towlower``.
_TOWLOWER_EXCEPTIONS = str.maketrans({"\u0130": "i", "\u03a3": "\u03c3"})


def escape_like(text: str) -> str:
    """``text`` with ``\\``, ``%`` and ``_`` escaped for ``LIKE ... ESCAPE '\\'``."""
    # ``\`` first, so the escapes added for ``%`` and ``_`` are not doubled.
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def fold_case(text: str) -> str:
    """``text`` lower-cased as PostgreSQL's ``lower()`` does it (see the module docstring).

    >>> fold_case("STRASSE ß İ") == "strasse ß i"
    True
    """
    # The two exceptions are rare: look for them (fast) before paying for ``translate`` (slow).
    if "\u0130" in text or "\u03a3" in text:
        text = text.translate(_TOWLOWER_EXCEPTIONS)
    return text.lower()


@functools.lru_cache(maxsize=512)
def like_regex(pattern: str) -> re.Pattern[str]:
    """Translate a LIKE pattern (``%``, ``_``, ``\\`` escape) into a regex for ``fullmatch``.

    Case-sensitive as given; ``ilike`` callers fold both the pattern and the text
    (:func:`fold_case`).
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
    """The row test for an ``ICONTAINS``, ``ILIKE`` or ``IEQ`` filter; a non-text value never
    matches."""
    column = flt.column
    if flt.op is Op.IEQ:
        folded = fold_case(flt.value)
        return lambda row: isinstance(v := row.get(column), str) and fold_case(v) == folded
    if flt.op is Op.ICONTAINS:
        needle = fold_case(flt.value)
        return lambda row: isinstance(v := row.get(column), str) and needle in fold_case(v)
    if flt.op is Op.ILIKE:
        regex = like_regex(fold_case(flt.value))
        return lambda row: (
            isinstance(v := row.get(column), str) and regex.fullmatch(fold_case(v)) is not None
        )
    raise ValueError(f"{flt.op.value} is not a text operator")
