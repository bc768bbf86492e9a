"""A misspelled company, matched by trigram similarity: "leads at Globx" → Globex.

When a run's company condition (``company_name icontains 'Globx'``) finds no row, the
reformulation ``similar_company`` is tried before the company is dropped: the candidate names
are the company values of the rows a keyword search ranks first for the misspelled name (the
keyword leg matches short columns by trigram similarity, which forgives typos), or, on a backend
that cannot search, the table's distinct company values (up to :data:`MAX_CANDIDATES`). Each is
scored by pg_trgm's ``word_similarity`` (:mod:`persistence.search.trigram`, the same
function the keyword leg uses); the best at or above :data:`SIMILARITY_THRESHOLD` replaces the
name. Never a guess: when another similar name (at or above the threshold too) is about as
close (less than :data:`AMBIGUITY_MARGIN` below the best), nothing is replaced. The rows a
search ranks first may all hold the best name, so a second search leaves it out
(``column neq best``) to find the closest other one. Deterministic: the same rows give the
same choice.

The other conditions stay hard constraints while candidates are sought, and the replacement is
reported (``metadata.reformulation_attempts`` and ``metadata.ignored``).
:func:`closest_name` is the same choice for any name column: :mod:`rag_agent.pipeline.company_link`
uses it for a company named on a table that only refers to companies (``inquiries``,
``messages``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from persistence import Filter, Op, PersistenceError
from persistence.search.trigram import WORD_SIMILARITY_THRESHOLD, word_similarity
from rag_agent.runtime.effects import Call, Steps
from rag_agent.specs import Condition, Ignored

__all__ = [
    "AMBIGUITY_MARGIN",
    "MAX_CANDIDATES",
    "SIMILARITY_THRESHOLD",
    "Closest",
    "closest_name",
    "similar_company",
    "swap_note",
    "with_similar_company",
]

#: pg_trgm's default ``word_similarity_threshold``: below it two names share too little to be
#: one ("Globx" in "Globex Corporation": 0.67; "Nowhere" in "Northwind": 0.25).
SIMILARITY_THRESHOLD = WORD_SIMILARITY_THRESHOLD
#: Two names whose similarities to the typed one differ by less than this are about equally
#: close: neither is chosen ("Globx": "Globex" and "Globex Europe", 0.67 both).
AMBIGUITY_MARGIN = 0.05
#: Candidate names read at most: the keyword search's first rows, or distinct values.
MAX_CANDIDATES = 100
_SEARCH_ROWS = 20


@dataclass(frozen=True, slots=True)
class Closest:
    """The existing name most similar to a typed one, its ``similarity``, and the ``rivals``
    about as close (name, similarity): when there is one, the choice would be a guess."""

    name: str
    similarity: float
    rivals: tuple[tuple[str, float], ...] = ()

    @property
    def ambiguous(self) -> bool:
        """Whether another name is about as close (nothing may then be chosen)."""
        return bool(self.rivals)


#: A name worth correcting: mostly letters, long enough for trigram similarity to mean something.
MIN_CORRECTED_LENGTH = 4
_NAME_LIKE = re.compile(r"[^\W\d_][\w&.,'\- ]*")


def name_like(value: str) -> bool:
    """Whether ``value`` reads as a name (letters, spaces and a name's punctuation; at least
    :data:`MIN_CORRECTED_LENGTH` letters), not as punctuation, code or a fragment."""
    letters = sum(ch.isalpha() for ch in value)
    return (
        letters >= MIN_CORRECTED_LENGTH
        and letters >= 0.7 * len(value.replace(" ", ""))
        and _NAME_LIKE.fullmatch(value.strip()) is not None
    )


def _company(conditions: tuple[Condition, ...], column: str | None) -> Condition | None:
    return next(
        (
            c
            for c in conditions
            if c.column == column and c.op is Op.ICONTAINS and isinstance(c.value, str)
        ),
        None,
    )


def _candidates(
    table: str, column: str, name: str, filters: Sequence[Filter]
) -> Steps[tuple[set[str], bool]]:
    # A lookup that fails only means no similar name: the reformulations go on without it (a
    # failing backend is reported by the queries around it). Also whether a search found them.
    try:
        result = yield Call(
            "search",
            (table, name),
            {"filters": list(filters), "k": _SEARCH_ROWS, "mode": "keyword"},
        )
        found = {row.get(column) for row in result.rows}
        searched = True
    except PersistenceError:  # no search here: the distinct names, bounded
        try:
            grouped = yield Call(
                "aggregate",
                (table, list(filters)),
                {"group_by": [column], "limit": MAX_CANDIDATES},
            )
        except PersistenceError:
            return set(), False
        found = {group.keys.get(column) for group in grouped.groups}
        searched = False
    return {value for value in found if isinstance(value, str) and value.strip()}, searched


def _scored(typed: str, names: Iterable[str]) -> list[tuple[float, str]]:
    folded = typed.casefold()
    scored = [(word_similarity(typed, n), n) for n in names if n.casefold() != folded]
    # Most similar first, ties by the name: the same candidates always give the same order.
    return sorted(scored, key=lambda item: (-item[0], item[1]))


def _rivals(
    best: tuple[float, str], scored: Iterable[tuple[float, str]]
) -> list[tuple[str, float]]:
    # Other similar names (a search ranks no name below the threshold, so neither does this)
    # within the margin of the best.
    similarity, name = best
    return [
        (other, value)
        for value, other in scored
        if other.casefold() != name.casefold()
        and value >= SIMILARITY_THRESHOLD
        and value > similarity - AMBIGUITY_MARGIN
    ]


def closest_name(
    table: str, column: str, typed: str, filters: Sequence[Filter] = ()
) -> Steps[Closest | None]:
    """The name of ``table.column`` most similar to ``typed`` among the rows matching
    ``filters``, at or above :data:`SIMILARITY_THRESHOLD` (``None`` when none is), with its
    rivals (pipeline steps: the lookups are yielded as :class:`~rag_agent.runtime.effects.Call`)."""
    names, searched = yield from _candidates(table, column, typed, filters)
    scored = _scored(typed, names)
    if not scored or scored[0][0] < SIMILARITY_THRESHOLD:
        return None
    best = scored[0]
    rivals = _rivals(best, scored[1:])
    if not rivals and searched:
        # The first rows of a search may all hold the best name: the closest other name is
        # sought once more without it.
        try:
            without = Filter(column, Op.NEQ, best[1])
        except PersistenceError:  # a stored name no filter may hold: no second look
            without = None
        if without is not None:
            others, _ = yield from _candidates(table, column, typed, [*filters, without])
            rivals = _rivals(best, _scored(typed, others))
    return Closest(best[1], best[0], tuple(rivals[:3]))


def similar_company(
    table: str, conditions: tuple[Condition, ...], column: str | None
) -> Steps[tuple[Condition, ...] | None]:
    """``conditions`` with the company name replaced by the most similar existing one, or
    ``None`` when there is no company condition, it was the caller's, no name is similar, or
    two are about equally close (pipeline steps: the lookups are yielded as
    :class:`~rag_agent.runtime.effects.Call`)."""
    company = _company(conditions, column)
    if company is None or column is None or company.source == "tool":
        return None
    if not name_like(company.value):
        return None  # punctuation, code, a fragment: no name to correct, never a guess
    rest = tuple(c for c in conditions if c is not company)
    filters = [c.to_filter() for c in rest]
    found = yield from closest_name(table, column, company.value, filters)
    if found is None or found.ambiguous:
        return None
    # The replaced value says where it came from: the reformulation, not the rules' reading.
    replaced = dataclasses.replace(company, value=found.name, source="reformulation")
    return tuple(replaced if c is company else c for c in conditions)


def with_similar_company(
    steps: Iterable[tuple[str, tuple[Condition, ...]]],
) -> Iterator[tuple[str, tuple[Condition, ...] | None]]:
    """``steps`` (the deterministic relaxations) with ``("similar_company", None)`` before
    ``drop_company`` (or after the last step when the company cannot be dropped): the pipeline
    looks the similar name up (:func:`similar_company`) only when it gets there."""
    tried = False
    for reason, relaxed in steps:
        if reason == "drop_company" and not tried:
            tried = True
            yield "similar_company", None
        yield reason, relaxed
    if not tried:
        yield "similar_company", None


def swap_note(
    before: tuple[Condition, ...], after: tuple[Condition, ...], column: str | None
) -> Ignored | None:
    """The ``ignored`` entry saying which company name was read as which, if one was."""
    old, new = _company(before, column), _company(after, column)
    if old is None or new is None or old.value == new.value:
        return None
    similarity = word_similarity(old.value, new.value)
    return Ignored(
        old.value,
        f"no company matches; read as the most similar name {new.value!r} "
        f"(trigram word similarity {similarity:.2f})",
    )
