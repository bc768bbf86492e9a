"""A misspelled company, matched by trigram similarity: "leads at Globx" → Globex.

When a run's company condition (``company_name icontains 'Globx'``) finds no row, the
reformulation ``similar_company`` is tried before the company is dropped: the candidate names
are the company values of the rows a keyword search ranks first for the misspelled name (the
keyword leg matches short columns by trigram similarity, which forgives typos), or, on a backend
that cannot search, the table's distinct company values (up to :data:`MAX_CANDIDATES`). Each is
scored by pg_trgm's ``word_similarity`` (:mod:`persistence.search.trigram`, the same
function the keyword leg uses); the best at or above :data:`SIMILARITY_THRESHOLD` replaces the
name, ties broken by the name. Deterministic: the same rows give the same choice.

The other conditions stay hard constraints while candidates are sought, and the replacement is
reported (``metadata.reformulation_attempts`` and ``metadata.ignored``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator

from persistence import Op, PersistenceError
from persistence.search.trigram import WORD_SIMILARITY_THRESHOLD, word_similarity
from rag_agent.effects import Call, Steps
from rag_agent.specs import Condition, Ignored

__all__ = [
    "MAX_CANDIDATES",
    "SIMILARITY_THRESHOLD",
    "similar_company",
    "swap_note",
    "with_similar_company",
]

#: pg_trgm's default ``word_similarity_threshold``: below it two names share too little to be
#: one ("Globx" in "Globex Corporation": 0.67; "Nowhere" in "Northwind": 0.25).
SIMILARITY_THRESHOLD = WORD_SIMILARITY_THRESHOLD
#: Candidate names read at most: the keyword search's first rows, or distinct values.
MAX_CANDIDATES = 100
_SEARCH_ROWS = 20


def _company(conditions: tuple[Condition, ...]) -> Condition | None:
    return next(
        (
            c
            for c in conditions
            if c.column == "company_name" and c.op is Op.ICONTAINS and isinstance(c.value, str)
        ),
        None,
    )


def _candidates(table: str, name: str, rest: tuple[Condition, ...]) -> Steps[set[str]]:
    # A lookup that fails only means no similar name: the reformulations go on without it (a
    # failing backend is reported by the queries around it).
    filters = [c.to_filter() for c in rest]
    try:
        result = yield Call(
            "search", (table, name), {"filters": filters, "k": _SEARCH_ROWS, "mode": "keyword"}
        )
        found = {row.get("company_name") for row in result.rows}
    except PersistenceError:  # no search here: the distinct names, bounded
        try:
            grouped = yield Call(
                "aggregate",
                (table, filters),
                {"group_by": ["company_name"], "limit": MAX_CANDIDATES},
            )
        except PersistenceError:
            return set()
        found = {group.keys.get("company_name") for group in grouped.groups}
    return {value for value in found if isinstance(value, str) and value.strip()}


def similar_company(
    table: str, conditions: tuple[Condition, ...]
) -> Steps[tuple[Condition, ...] | None]:
    """``conditions`` with the company name replaced by the most similar existing one, or
    ``None`` when there is no company condition, it was the caller's, or no name is similar
    (pipeline steps: the lookups are yielded as :class:`~rag_agent.effects.Call`)."""
    company = _company(conditions)
    if company is None or company.source == "tool":
        return None
    rest = tuple(c for c in conditions if c is not company)
    candidates = yield from _candidates(table, company.value, rest)
    scored = [
        (word_similarity(company.value, candidate), candidate)
        for candidate in candidates
        if candidate.casefold() != company.value.casefold()
    ]
    best = max(scored, key=lambda item: (item[0], _reverse(item[1])), default=None)
    if best is None or best[0] < SIMILARITY_THRESHOLD:
        return None
    replaced = dataclasses.replace(company, value=best[1])
    return tuple(replaced if c is company else c for c in conditions)


def _reverse(name: str) -> tuple[int, ...]:
    # max() with ties broken by the name ascending: the smaller name must compare larger.
    return tuple(-ord(ch) for ch in name)


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


def swap_note(before: tuple[Condition, ...], after: tuple[Condition, ...]) -> Ignored | None:
    """The ``ignored`` entry saying which company name was read as which, if one was."""
    old, new = _company(before), _company(after)
    if old is None or new is None or old.value == new.value:
        return None
    similarity = word_similarity(old.value, new.value)
    return Ignored(
        old.value,
        f"no company matches; read as the most similar name {new.value!r} "
        f"(trigram word similarity {similarity:.2f})",
    )
