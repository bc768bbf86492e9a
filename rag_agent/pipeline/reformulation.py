"""Deterministic reformulations tried, in order, when a query finds no rows.

Each step relaxes the filters of the step before it, and only where it applies:

1. ``drop_email``: forget the email (addresses are often mistyped or stale);
2. ``shorten_company_suffix``: ``"Acme Inc."`` → ``"Acme"`` (legal suffixes vary by source);
3. ``drop_company``: forget the company.

A step is skipped when it would drop a condition that the caller gave explicitly, or leave no
identifying condition (id, e-mail, company, client): a relaxed query never answers a broader
question than the one asked ("qualified leads at Nowhere Ltd" never becomes "qualified leads"),
and an unfiltered table is never returned.

:func:`relaxations` yields them over the pipeline's conditions, with the table's :class:`Roles`
(its company, e-mail and key columns, learned from the database's vocabulary): the e-mail is the
e-mail columns' conditions, the company the ``icontains`` condition on the company column.

>>> asked = (Condition("email", Op.IEQ, "a@x.io"),
...          Condition("company_name", Op.ICONTAINS, "Acme Inc."))
>>> [reason for reason, _ in relaxations(asked)]
['drop_email', 'shorten_company_suffix']
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator

from persistence import Op
from rag_agent.specs import Condition

__all__ = ["relaxations", "shorten_company_suffix"]

_SUFFIX_RE = re.compile(
    r"(?:[\s,]+(?:inc|incorporated|corp|corporation|co|company|ltd|limited|llc|l\.l\.c|llp|lp|"
    r"plc|gmbh|ag|sa|s\.a|sas|sarl|srl|s\.r\.l|bv|b\.v|nv|n\.v|oy|ab|as|pty|pte|kk|spa|s\.p\.a)"
    r"\.?)+\s*$",
    re.IGNORECASE,
)


def shorten_company_suffix(company: str) -> str | None:
    """``company`` without its trailing legal suffixes, or ``None`` when there is none to drop.

    >>> shorten_company_suffix("Acme, Inc.")
    'Acme'
    """
    match = _SUFFIX_RE.search(company)
    if match is None or match.start() == 0:
        return None  # no suffix, or the whole name is a "suffix" (a company called "Co")
    shortened = company[: match.start()].rstrip(" ,")
    return shortened or None


@dataclasses.dataclass(frozen=True, slots=True)
class Roles:
    """Which columns of the asked table are its company, its e-mails and its keys (the row's
    own ``id`` and its references): learned from the database's vocabulary by the pipeline;
    the defaults are the reference schema's ``leads`` columns."""

    company: str | None = "company_name"
    emails: tuple[str, ...] = ("email",)
    keys: tuple[str, ...] = ("id", "client_id")


#: The roles when the vocabulary cannot be learned: the reference schema's ``leads`` columns.
DEFAULT_ROLES = Roles()


def relaxations(
    conditions: tuple[Condition, ...], roles: Roles = DEFAULT_ROLES
) -> Iterator[tuple[str, tuple[Condition, ...]]]:
    """Yield ``(reason, relaxed_conditions)`` in the order above (``drop_email``,
    ``shorten_company_suffix``, ``drop_company``), each relaxing the last.

    A condition is only dropped when another identifying one (id, e-mail, company, a reference)
    remains, so "qualified leads at Nowhere Ltd" never becomes "qualified leads"; and a condition
    a caller gave explicitly (``source="tool"``) is never dropped: it is what was asked.
    """

    def is_company(condition: Condition) -> bool:
        return condition.column == roles.company and condition.op is Op.ICONTAINS

    def identifies(condition: Condition) -> bool:
        # The conditions that name a row or an account: a relaxed query must keep one, or it
        # answers a much broader question than the one asked.
        op = Op(condition.op)
        return (
            (condition.column in roles.keys and op in (Op.EQ, Op.IN))
            or (condition.column in roles.emails and op in (Op.IEQ, Op.EQ))
            or is_company(condition)
        )

    current = conditions

    def droppable(victim: Condition) -> bool:
        rest = [c for c in current if c is not victim]
        return victim.source != "tool" and any(identifies(c) for c in rest)

    emails = [c for c in current if c.column in roles.emails]
    if emails and all(droppable(c) for c in emails):
        current = tuple(c for c in current if c.column not in roles.emails)
        yield "drop_email", current
    company = next((c for c in current if is_company(c)), None)
    if company is not None and isinstance(company.value, str):
        shortened = shorten_company_suffix(company.value)
        if shortened is not None:
            company_now = dataclasses.replace(company, value=shortened)
            current = tuple(company_now if c is company else c for c in current)
            company = company_now
            yield "shorten_company_suffix", current
    if company is not None and droppable(company):
        current = tuple(c for c in current if c is not company)
        yield "drop_company", current
