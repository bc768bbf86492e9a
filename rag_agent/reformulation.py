"""Deterministic reformulations tried, in order, when a query finds no rows.

Each step relaxes the filters of the step before it, and only where it applies:

1. ``drop_email``: forget the email (addresses are often mistyped or stale);
2. ``shorten_company_suffix``: ``"Acme Inc."`` → ``"Acme"`` (legal suffixes vary by source);
3. ``drop_company``: forget the company.

A step that would leave no filter at all is skipped: an unfiltered table is never returned.

>>> [reason for reason, _ in reformulations({"email": "a@x.io", "company": "Acme Inc."})]
['drop_email', 'shorten_company_suffix']
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["REFORMULATION_ORDER", "reformulations", "shorten_company_suffix"]

#: The reformulations, in the order they are tried.
REFORMULATION_ORDER = ("drop_email", "shorten_company_suffix", "drop_company")

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


def reformulations(filters: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield ``(reason, relaxed_filters)`` in :data:`REFORMULATION_ORDER`, each relaxing the last.

    Never yields an empty filter set. The caller bounds the number of attempts.
    """
    current = dict(filters)
    if "email" in current and len(current) > 1:
        current = {k: v for k, v in current.items() if k != "email"}
        yield "drop_email", dict(current)
    company = current.get("company")
    if isinstance(company, str):
        shortened = shorten_company_suffix(company)
        if shortened is not None:
            current = {**current, "company": shortened}
            yield "shorten_company_suffix", dict(current)
    if "company" in current and len(current) > 1:
        current = {k: v for k, v in current.items() if k != "company"}
        yield "drop_company", dict(current)
