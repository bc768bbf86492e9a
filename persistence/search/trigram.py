"""pg_trgm's ``word_similarity`` in Python, so the memory backend's trigram leg ranks exactly as
PostgreSQL's does (checked against a real server by a property test).

``word_similarity(needle, haystack)`` is the greatest similarity between the trigram set of
``needle`` and the trigram set of any contiguous extent of ``haystack``'s trigrams: how well the
needle matches *part* of the haystack, which is what a typed name against a longer field wants
("Globx" against "Globex Industries").

Rules replicated from ``contrib/pg_trgm/trgm_op.c`` (``generate_trgm_only``,
``calc_word_similarity``, ``iterate_word_similarity``):

* words are runs of alphanumeric characters (anything else separates words); each word is
  lower-cased and padded with two spaces in front and one behind, then cut into trigrams;
* the needle's trigrams are a set; the haystack's keep their positions, duplicates included;
* similarity is ``count / (len1 + len2 - count)`` in single precision (``float4``), where
  ``len1`` is the needle's distinct trigrams, ``len2`` the extent's, ``count`` those shared;
* the extent's upper bound moves over every haystack trigram the needle has; its lower bound is
  the one that maximises the similarity so far, exactly as PostgreSQL's greedy scan does (it is
  not a full search over all extents, and replicating it is the point).

A multi-byte trigram is compared by its characters here and by a 24-bit CRC there; two
different trigrams sharing a CRC would differ, which is vanishingly rare and only raises
PostgreSQL's figure.
"""

from __future__ import annotations

import functools
import re
import struct
import sys

__all__ = [
    "WORD_SIMILARITY_THRESHOLD",
    "TrigramNeedle",
    "similarity",
    "trigrams",
    "word_similarity",
]

#: pg_trgm's default ``pg_trgm.word_similarity_threshold`` (a ``float4`` 0.6): a value matches
#: when its word similarity is at least this.
WORD_SIMILARITY_THRESHOLD = struct.unpack("f", struct.pack("f", 0.6))[0]

_WORD = re.compile(r"[^\W_]+")
# Haystacks up to this long (names, e-mails, titles: the short text columns the trigram leg
# reads) have their trigrams cached: a search compares the needle with every row's values, and
# recomputing each value's trigrams per search cost 100 ms on 3,000 rows. The trigram strings
# are interned, so an entry holds pointers (a few hundred bytes): 16,384 entries stay in the
# low megabytes.
_CACHED_HAYSTACK = 256
_HAYSTACK_ENTRIES = 16_384


def _float4(value: float) -> float:
    # A quotient of small integers rounded to double then to single precision equals the single
    # precision quotient (double rounding is harmless for division when 53 >= 2 * 24 + 2).
    result: float = struct.unpack("f", struct.pack("f", value))[0]
    return result


def _similarity(count: int, len1: int, len2: int) -> float:
    return _float4(count / (len1 + len2 - count))


def trigrams(text: str) -> list[str]:
    """``text``'s trigrams in order, duplicates kept (pg_trgm's ``generate_trgm_only``)."""
    found: list[str] = []
    for word in _WORD.findall(text):
        padded = f"  {word.lower()} "
        found.extend(padded[i : i + 3] for i in range(len(padded) - 2))
    return found


def similarity(a: str, b: str) -> float:
    """pg_trgm's ``similarity(a, b)``: shared distinct trigrams over all distinct trigrams, a
    ``float4`` value from 0 to 1 (0 when neither has a trigram)."""
    first, second = set(trigrams(a)), set(trigrams(b))
    if not first or not second:
        return 0.0
    shared = len(first & second)
    return _similarity(shared, len(first), len(second))


def word_similarity(needle: str, haystack: str) -> float:
    """pg_trgm's ``word_similarity(needle, haystack)``, a ``float4`` value from 0 to 1."""
    return TrigramNeedle(needle).similarity(haystack)


class TrigramNeedle:
    """One needle's trigrams, computed once, matched against many haystacks.

    ``similarity(haystack, at_least)`` is :func:`word_similarity`, or ``0.0`` when the value is
    certainly below ``at_least``: the similarity of any extent is at most the share of the
    needle's trigrams the whole haystack holds, which is cheap to count, while the exact scan
    is quadratic in the haystack's length.
    """

    __slots__ = ("required",)

    def __init__(self, needle: str) -> None:
        self.required = frozenset(trigrams(needle))

    def similarity(self, haystack: str, at_least: float = 0.0) -> float:
        required = self.required
        if not required:
            return 0.0
        if len(haystack) <= _CACHED_HAYSTACK:
            found_trigrams, distinct = _haystack(haystack)
            shared = len(required & distinct)
        else:
            found_trigrams = tuple(trigrams(haystack))
            shared = len(required.intersection(found_trigrams))
        if shared == 0 or _float4(shared / len(required)) < at_least:
            return 0.0
        classes: dict[str, int] = {}
        positions = [classes.setdefault(t, len(classes)) for t in found_trigrams]
        found = [t in required for t in classes]
        return _iterate(positions, found, len(required))


@functools.lru_cache(maxsize=_HAYSTACK_ENTRIES)
def _haystack(text: str) -> tuple[tuple[str, ...], frozenset[str]]:
    """``text``'s trigrams in order and as a set, cached (thread-safe: ``lru_cache``)."""
    found = tuple(sys.intern(t) for t in trigrams(text))
    return found, frozenset(found)


def _iterate(positions: list[int], found: list[bool], ulen1: int) -> float:
    """``iterate_word_similarity`` without its strict and check-only variants."""
    lastpos = [-1] * len(found)
    memo: dict[tuple[int, int], float] = {}

    def similarity(count: int, ulen2: int) -> float:
        value = memo.get((count, ulen2))
        if value is None:
            value = memo[(count, ulen2)] = _similarity(count, ulen1, ulen2)
        return value

    ulen2 = count = 0
    lower = -1
    best = 0.0
    for i, index in enumerate(positions):
        if lower >= 0 or found[index]:
            if lastpos[index] < 0:
                ulen2 += 1
                if found[index]:
                    count += 1
            lastpos[index] = i
        if not found[index]:
            continue
        upper = i
        if lower == -1:
            lower = i
            ulen2 = 1
        current = similarity(count, ulen2)
        # Try every later lower bound: dropping trigrams before it may raise the similarity.
        tmp_count, tmp_ulen2, previous_lower = count, ulen2, lower
        for tmp_lower in range(lower, upper + 1):
            # No later lower bound can beat ``current``: a candidate is at most
            # tmp_count / ulen1, and tmp_count only falls. (pg_trgm scans on; same result.)
            if _float4(tmp_count / ulen1) <= current:
                break
            candidate = similarity(tmp_count, tmp_ulen2)
            if candidate > current:
                current, ulen2, lower, count = candidate, tmp_ulen2, tmp_lower, tmp_count
            tmp_index = positions[tmp_lower]
            if lastpos[tmp_index] == tmp_lower:
                tmp_ulen2 -= 1
                if found[tmp_index]:
                    tmp_count -= 1
        best = max(best, current)
        for tmp_lower in range(previous_lower, lower):
            tmp_index = positions[tmp_lower]
            if lastpos[tmp_index] == tmp_lower:
                lastpos[tmp_index] = -1
    return best
