"""Filter extraction by an LLM: step 2 of the pipeline, used only when the rules find nothing.

``parse_filters_with_llm(text, llm)`` asks the model for the four filter keys the pipeline knows
(``id``, ``email``, ``company``, ``client_id``) and returns a plain ``dict`` of the ones it found.
The model's answer is never trusted as is:

- it is read through structured output when the model supports it, otherwise through a tolerant
  JSON reader (code fences, prose around the JSON, a list of content blocks);
- every value is validated by the rule parser's own ``normalize_filters`` (``id``/``client_id``
  integers or UUIDs, ``email`` an address, lower-cased, ``company`` short text), and one bad
  value rejects the whole answer;
- every value must be *grounded*: it has to occur in the user's text (case-insensitively; integers
  as digits), so a model cannot invent a company or an id the user never mentioned;
- anything invalid, ungrounded, unparsable, or a model that raises, counts as **no filters**
  (``{}``): the pipeline then goes on to its fallback instead of querying on a guess.

Example::

    parse_filters_with_llm("who is the lead behind ana@example.org?", llm)
    # {"email": "ana@example.org"}
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, ConfigDict, Field

from persistence import get_logger
from rag_agent.filters import FILTER_KEYS, normalize_filters

__all__ = [
    "ExtractedFilters",
    "message_text",
    "parse_filters_with_llm",
    "read_json_object",
    "validate_filters",
]

_FENCE = re.compile(r"```[A-Za-z0-9_-]*\s*\n?(.*?)```", re.DOTALL)
_log = get_logger("rag_agent.llm_filters")

_SYSTEM_PROMPT = (
    "You extract lookup filters for a CRM 'leads' table from a user's request. "
    "Return only values that appear literally in the request: "
    "id (the lead's integer id), email (an e-mail address), company (a company name), "
    "client_id (the integer id of the client account). Leave a key null when the request does "
    "not state it. Never guess. Answer with a JSON object with exactly these keys: "
    '{"id": null, "email": null, "company": null, "client_id": null}.'
)


class ExtractedFilters(BaseModel):
    """The structured-output schema: the four filter keys, each optional."""

    model_config = ConfigDict(extra="ignore")

    id: int | str | None = Field(
        default=None, description="The lead's id (an integer or a UUID), if stated."
    )
    email: str | None = Field(default=None, description="An e-mail address, if stated.")
    company: str | None = Field(default=None, description="A company name, if stated.")
    client_id: int | str | None = Field(
        default=None, description="The id of the client account (integer or UUID), if stated."
    )


def parse_filters_with_llm(text: str, llm: BaseChatModel | None) -> dict[str, Any]:
    """Filters the ``llm`` reads in ``text``, validated and grounded in ``text``; ``{}`` if none.

    Never raises for a misbehaving model: errors and invalid answers are logged
    (``rag.filters.llm``) and count as no filters.
    """
    if llm is None or not isinstance(text, str) or not text.strip():
        return {}
    messages: list[BaseMessage] = [SystemMessage(_SYSTEM_PROMPT), HumanMessage(text)]
    try:
        raw = _ask(llm, messages)
    except Exception as exc:  # any model failure means "no filters", never a crash
        _log.warning("rag.filters.llm", outcome="model_error", error=repr(exc))
        return {}
    if raw is None:
        _log.info("rag.filters.llm", outcome="unparsable")
        return {}
    filters = validate_filters(raw, text)
    _log.info(
        "rag.filters.llm",
        outcome="filters" if filters else "rejected_or_empty",
        keys=sorted(filters),
    )
    return filters


def _ask(llm: BaseChatModel, messages: list[BaseMessage]) -> Mapping[str, Any] | None:
    try:
        structured = llm.with_structured_output(ExtractedFilters, include_raw=True)
    except NotImplementedError:
        # A model without tool calling or JSON mode: ask for JSON and read it tolerantly.
        return read_json_object(message_text(llm.invoke(messages)))
    answer = structured.invoke(messages)
    parsed = answer.get("parsed") if isinstance(answer, Mapping) else answer
    if isinstance(parsed, BaseModel):
        return parsed.model_dump(exclude_none=True)
    if isinstance(parsed, Mapping):
        return parsed
    # The model answered in prose (or with a malformed call): read JSON from its text.
    raw = answer.get("raw") if isinstance(answer, Mapping) else None
    return read_json_object(message_text(raw)) if raw is not None else None


def message_text(message: object) -> str:
    """The text of a chat message (``content`` as a string or a list of content blocks)."""
    content = getattr(message, "content", message)
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, Mapping) and isinstance(block.get("text"), str):
                parts.append(block["text"])
        return "\n".join(parts)
    return ""


def read_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text``: inside a code fence or surrounded by prose.

    Returns ``None`` when there is none. Only ``json`` parsing is involved: nothing is evaluated.

    >>> read_json_object('Sure! ```json\\n{"id": 7}\\n``` Anything else?')
    {'id': 7}
    """
    if not isinstance(text, str):
        return None
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    for candidate in candidates:
        start = candidate.find("{")
        while start != -1:
            try:
                value, _ = decoder.raw_decode(candidate, start)
            except (ValueError, RecursionError):
                value = None
            if isinstance(value, dict):
                return value
            start = candidate.find("{", start + 1)
    return None


def validate_filters(raw: Mapping[str, Any], text: str | None = None) -> dict[str, Any]:
    """``raw`` reduced to valid filter values, or ``{}`` if any value is invalid.

    Values are validated and canonicalised by the rule parser's own
    :func:`~rag_agent.filters.normalize_filters`; but where it drops a bad value and keeps the
    rest, a model's answer with *any* bad value is rejected whole (a model that got one value
    wrong is not trusted with the others). Keys other than :data:`FILTER_KEYS`, nulls and empty
    strings are ignored. With ``text``, every value must also occur in it.
    """
    if not isinstance(raw, Mapping):
        return {}
    given = {
        key: value
        for key in FILTER_KEYS
        if (value := raw.get(key)) is not None
        and not (isinstance(value, str) and not value.strip())
    }
    clean = normalize_filters(given)
    if clean.keys() != given.keys():
        return {}
    if text is not None and not all(_grounded(value, text) for value in clean.values()):
        return {}
    return clean


def _grounded(value: object, text: str) -> bool:
    if isinstance(value, int):
        return re.search(rf"(?<!\d){value}(?!\d)", text) is not None
    # Compare with whitespace collapsed, as normalize_filters collapses it in the value.
    return " ".join(str(value).split()).casefold() in " ".join(text.split()).casefold()
