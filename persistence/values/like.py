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
import operator
import re
from collections.abc import Callable
from typing import Any

from persistence.query import Filter, Op

__all__ = ["LikePattern", "compile_like", "escape_like", "fold_case", "text_predicate"]

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


class LikePattern:
    """A compiled LIKE pattern (``%``, ``_``, ``\\`` escape) whose :meth:`matches` takes time
    linear in the text for a given pattern, whatever the pattern.

    One regular expression with a ``.*`` per ``%`` backtracks exponentially on a pattern such as
    ``%a%a%a…`` against ``aaa…b`` (26 characters against 40 took over 30 s). Here the pattern is
    cut at each ``%`` into fixed-length segments (literals and ``_``), each its own regex without
    repetition: the first must match at the start, the last at the end, and each middle one is
    taken at its leftmost place after the one before, which is enough since ``%`` can absorb any
    gap. Case-sensitive as given; ``ilike`` callers fold both sides (:func:`fold_case`).

    >>> compile_like("a%b_d").matches("axxbcd"), compile_like("a%b_d").matches("abd")
    (True, False)
    """

    __slots__ = ("_first", "_last", "_middle", "_single", "_tail")

    def __init__(self, pattern: str) -> None:
        segments: list[list[str]] = [[]]
        chars = iter(pattern)
        for char in chars:
            if char == "\\":
                segments[-1].append(re.escape(next(chars, "\\")))
            elif char == "%":
                segments.append([])
            elif char == "_":
                segments[-1].append(".")
            else:
                segments[-1].append(re.escape(char))
        compiled = [re.compile("".join(parts), re.DOTALL) for parts in segments]
        self._single = compiled[0] if len(compiled) == 1 else None
        self._first, self._last = compiled[0], compiled[-1]
        self._tail = len(segments[-1])  # one character per atom: the last segment's length
        # Empty middle segments ("%%") constrain nothing.
        self._middle = tuple(regex for regex in compiled[1:-1] if regex.pattern)

    def matches(self, text: str) -> bool:
        """Whether the whole of ``text`` matches the pattern."""
        if self._single is not None:
            return self._single.fullmatch(text) is not None
        head = self._first.match(text)
        if head is None:
            return False
        # The last segment has a fixed length: it can only sit at the very end.
        end = len(text) - self._tail
        if end < head.end() or self._last.fullmatch(text, end) is None:
            return False
        position = head.end()
        for regex in self._middle:
            found = regex.search(text, position, end)
            if found is None:
                return False
            position = found.end()
        return True


@functools.lru_cache(maxsize=512)
def compile_like(pattern: str) -> LikePattern:
    """The :class:`LikePattern` of ``pattern`` (cached: patterns repeat across rows and calls)."""
    return LikePattern(pattern)


def text_predicate(flt: Filter, value: Callable[[Any], Any] | None = None) -> Callable[[Any], bool]:
    """The row test for an ``ICONTAINS``, ``ILIKE`` or ``IEQ`` filter; a non-text value never
    matches. ``value`` reads the column from a row (default: ``row.get(column)`` on a mapping;
    the memory store passes a getter of its row tuples)."""
    get = operator.methodcaller("get", flt.column) if value is None else value
    if flt.op is Op.IEQ:
        folded = fold_case(flt.value)
        return lambda row: isinstance(v := get(row), str) and fold_case(v) == folded
    if flt.op is Op.ICONTAINS:
        needle = fold_case(flt.value)
        return lambda row: isinstance(v := get(row), str) and needle in fold_case(v)
    if flt.op is Op.ILIKE:
        pattern = compile_like(fold_case(flt.value))
        return lambda row: isinstance(v := get(row), str) and pattern.matches(fold_case(v))
    raise ValueError(f"{flt.op.value} is not a text operator")
