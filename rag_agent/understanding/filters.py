"""Free text → what it asks for: :func:`understand`, and the four-key compatibility view.

:func:`understand` (from :mod:`rag_agent.understanding.rules`) is the rule parser: table, conditions
on any column of the reference schema, counts, and what was recognised but not applied
(``docs/understanding.md``).

The **compatibility view** keeps the original four keys for code written against them:
``parse_filters_from_text(text)`` is ``understand(text, table="leads")`` reduced to ``id``
(``id eq``), ``email`` (``email ieq``), ``company`` (``company_name icontains``) and
``client_id`` (``client_id eq``); every other condition, and a company read on weak evidence
only, is left out of it.

>>> parse_filters_from_text("leads from Acme Inc. with email BOB@ACME.COM")
{'email': 'bob@acme.com', 'company': 'Acme Inc'}
>>> parse_filters_from_text("client_id=7, lead #42")
{'id': 42, 'client_id': 7}

Values only ever become bound query values (``eq``, ``icontains``, or ``ieq`` for the email's
case-insensitive equality): never SQL, never a pattern.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from collections.abc import Mapping
from typing import Any

from persistence.query import Filter
from rag_agent.understanding.conditions import LEGACY_KEYS, legacy_conditions
from rag_agent.understanding.rules import EMAIL_RE, MAX_TEXT_LENGTH, UUID_PATTERN, understand

__all__ = [
    "FILTER_KEYS",
    "MAX_TEXT_LENGTH",
    "filters_to_query",
    "normalize_filters",
    "parse_filters_from_text",
    "understand",
]

#: The filters of the compatibility view, in canonical order.
FILTER_KEYS = ("id", "email", "company", "client_id")
_MAX_COMPANY_LENGTH = 120
_MAX_INT = 2**63 - 1  # PostgreSQL bigint
_TRAILING = ".,;:!?'\"\u2019`)]}"
# (column, operator) of a condition → its key in the compatibility view.
_VIEW = {condition: key for key, condition in LEGACY_KEYS.items()}


def _int_or_uuid(raw: str) -> int | str | None:
    if raw.isdigit():
        value = int(raw)
        return value if value <= _MAX_INT else None
    return str(uuid.UUID(raw))


def parse_filters_from_text(text: str) -> dict[str, Any]:
    """Extract ``id``, ``email``, ``company`` and ``client_id`` from free text (compatibility view).

    ``id``/``client_id`` are ``int`` (or a canonical UUID string), ``email`` is lower-cased,
    ``company`` keeps the user's spelling without trailing punctuation. Keys appear only when
    found; anything that is not a ``str`` yields ``{}``. Dates only matter to conditions this
    view leaves out, so the clock read here changes nothing in its answer.
    """
    if not isinstance(text, str):
        return {}
    found: dict[str, Any] = {}
    understood = understand(text, table="leads", now=dt.datetime.now(dt.UTC))
    for condition in understood.conditions:
        key = _VIEW.get((condition.column, condition.op))
        if key == "company" and understood.weak:
            continue  # weak evidence is for an LLM to confirm, which this view predates
        if key is not None and key not in found:
            found[key] = condition.value
    return {key: found[key] for key in FILTER_KEYS if key in found}


def normalize_filters(filters: object) -> dict[str, Any]:
    """Validate filters from any source (an LLM, a tool call): unknown keys and bad values drop.

    Returns the canonical form ``parse_filters_from_text`` produces; anything unusable counts as
    empty, so an invalid LLM answer can never widen a query.
    """
    if not isinstance(filters, Mapping):
        return {}
    clean: dict[str, Any] = {}
    for key in ("id", "client_id"):
        value = filters.get(key)
        if type(value) is int and 0 <= value <= _MAX_INT:
            clean[key] = value
        elif isinstance(value, str) and value.strip():
            raw = value.strip().lstrip("#")
            if (raw.isascii() and raw.isdigit()) or re.fullmatch(UUID_PATTERN, raw):
                parsed = _int_or_uuid(raw)
                if parsed is not None:
                    clean[key] = parsed
    email = filters.get("email")
    if isinstance(email, str):
        match = EMAIL_RE.fullmatch(email.strip())
        if match is not None:
            clean["email"] = match.group().lower()
    company = filters.get("company")
    if isinstance(company, str) and "\x00" not in company:
        value = " ".join(company.split()).strip(_TRAILING + " ")
        if value and len(value) <= _MAX_COMPANY_LENGTH:
            clean["company"] = value
    return {key: clean[key] for key in FILTER_KEYS if key in clean}


def filters_to_query(filters: Mapping[str, Any]) -> tuple[Filter, ...]:
    """Translate canonical filters into query ``Filter`` objects, in canonical order.

    ``company`` → ``company_name icontains``; ``email`` → ``ieq`` (case-insensitive equality,
    which a ``lower(email)`` index serves); ``id``/``client_id`` → ``eq``.
    """
    return tuple(condition.to_filter() for condition in legacy_conditions(filters, "rules"))
