"""Free text → what it asks for: :func:`understand`; and a caller's four filter keys, checked.

:func:`understand` (from :mod:`rag_agent.understanding.rules`) is the rule parser: table, conditions
on any column of the reference schema, counts, and what was recognised but not applied
(``docs/understanding.md``).

:func:`normalize_filters` checks the filters a caller gives by key (``RAGAgent.run(filters=...)``,
the ``query_leads`` tool's arguments): ``id``, ``email``, ``company`` and ``client_id``, the
conditions of :data:`~rag_agent.understanding.conditions.FILTER_KEY_CONDITIONS`.

Values only ever become bound query values (``eq``, ``icontains``, or ``ieq`` for the email's
case-insensitive equality): never SQL, never a pattern.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from typing import Any

from rag_agent.understanding.conditions import FILTER_KEY_CONDITIONS
from rag_agent.understanding.rules import EMAIL_RE, MAX_TEXT_LENGTH, UUID_PATTERN, understand

__all__ = ["FILTER_KEYS", "MAX_TEXT_LENGTH", "normalize_filters", "understand"]

#: The filter keys a caller may give, in canonical order.
FILTER_KEYS = tuple(FILTER_KEY_CONDITIONS)
_MAX_COMPANY_LENGTH = 120
_MAX_INT = 2**63 - 1  # PostgreSQL bigint
_TRAILING = ".,;:!?'\"\u2019`)]}"


def _int_or_uuid(raw: str) -> int | str | None:
    if raw.isdigit():
        value = int(raw)
        return value if value <= _MAX_INT else None
    return str(uuid.UUID(raw))


def normalize_filters(filters: object) -> dict[str, Any]:
    """Validate filters from any source (a tool call, a caller): unknown keys and bad values drop.

    ``id``/``client_id`` become ``int`` (or a canonical UUID string), ``email`` is lower-cased,
    ``company`` keeps the caller's spelling without trailing punctuation; the keys come out in
    :data:`FILTER_KEYS` order. Anything unusable counts as empty, so an invalid value can never
    widen a query.
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
