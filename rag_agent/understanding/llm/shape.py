"""The shape of an answer a model may ask for: counts per group, aggregates, related rows.

Beside its conditions (:mod:`rag_agent.understanding.llm.schema`), the schema-constrained extraction
lets a model say *how* the request wants its answer, in three parts, each bounded to names the
request offers:

.. code-block:: text

    "group_by": [<groupable column>, ...]            (at most 3)  "leads by status"
    "metrics":  [{"function": f, "column": c}, ...]  (at most 4)  "average score per campaign"
    "include":  [<relation name>, ...]               (at most 3)  "with its conversations"

:func:`shape_properties` gives the JSON Schema of these parts (each column or relation an ``enum``
of the request's own names, each metric one ``anyOf`` variant per function, so a decoder that
follows the schema cannot ask for ``sum`` of a text column), and :func:`understand_shape` checks a
model's answer again, because a model without strict decoding may ignore the schema. A part is kept
only when it is **grounded** in the words of the request:

* a grouping needs a grouping word in the text ("by", "per", "each", "breakdown", …);
* a metric needs its function's word ("average", "total", "highest", "distinct", …) and a mention
  of its column (:func:`column_mentioned`);
* a relation needs a mention of its name ("conversations", "messages").

Everything else goes to ``ignored`` with a reason. A part never changes which rows match: a wrong
grouping still answers numbers per group, labelled with the column, never invented rows.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from rag_agent.specs import ColumnInfo, ExtractionRequest, Ignored

__all__ = [
    "GROUP_CUE",
    "MAX_GROUP_BY",
    "MAX_INCLUDE",
    "MAX_METRICS",
    "METRIC_CUES",
    "METRIC_KINDS",
    "Shape",
    "column_mentioned",
    "group_columns",
    "metric_columns",
    "shape_prompt",
    "shape_properties",
    "understand_shape",
]

#: Bounds the schema states and :func:`understand_shape` enforces (the facade's own group limit).
MAX_GROUP_BY = 3
MAX_METRICS = 4
MAX_INCLUDE = 3

_ORDERED = frozenset(
    {"integer", "numeric", "float", "text", "date", "timestamp", "timestamptz", "time"}
)
_GROUPABLE = _ORDERED | {"uuid", "boolean"}
_NUMERIC = frozenset({"integer", "numeric", "float"})
#: The column kinds each metric function takes (``persistence.aggregate``'s rules).
METRIC_KINDS: Mapping[str, frozenset[str]] = {
    "count_distinct": _GROUPABLE,
    "sum": _NUMERIC,
    "avg": _NUMERIC,
    "min": _ORDERED,
    "max": _ORDERED,
}
#: Words that ask for a count per group.
GROUP_CUE = re.compile(
    r"\b(?:by|per|each|every|breakdown|broken|split|group(?:ed|s)?|across|distribution)\b",
    re.IGNORECASE,
)
#: The words that ask for each metric function.
METRIC_CUES: Mapping[str, re.Pattern[str]] = {
    name: re.compile(pattern, re.IGNORECASE)
    for name, pattern in {
        "count_distinct": r"\b(?:distinct|unique|different)\b",
        "sum": r"\b(?:sum|total|combined|overall)\b",
        "avg": r"\b(?:average|avg|mean)\b",
        "min": r"\b(?:min|minimum|lowest|smallest|least|earliest|oldest|first)\b",
        "max": r"\b(?:max|maximum|highest|largest|biggest|greatest|latest|newest|most recent)\b",
    }.items()
}
# Column-name parts that say nothing about what the text mentions.
_GENERIC_PARTS = frozenset({"is", "has", "at", "on", "id", "the", "of", "by", "to", "in", "date"})
_SHOWN = 120


def column_mentioned(column: str, text: str) -> bool:
    """True when a word of ``text`` starts like a telling part of the ``column`` name.

    ``unsubscribed`` is mentioned by "unsubscribed leads", ``replied_at`` by "who never replied"
    or "no reply"; parts such as ``is``, ``has``, ``at`` and ``id`` do not count.
    """
    words = re.findall(r"\w+", text.casefold())
    for part in column.casefold().split("_"):
        if len(part) < 3 or part in _GENERIC_PARTS:
            continue
        stem = part[:4]
        if any(word.startswith(stem) for word in words):
            return True
    return False


def _unique(columns: tuple[ColumnInfo, ...]) -> dict[str, str]:
    kinds: dict[str, str] = {}
    for column in columns:
        kinds.setdefault(column.name, column.kind)
    return kinds


def group_columns(request: ExtractionRequest) -> tuple[str, ...]:
    """The request's columns a count may be grouped by (scalars, not JSON), sorted."""
    return tuple(sorted(n for n, k in _unique(request.columns).items() if k in _GROUPABLE))


def metric_columns(request: ExtractionRequest, function: str) -> tuple[str, ...]:
    """The request's columns ``function`` may aggregate, sorted."""
    kinds = METRIC_KINDS[function]
    return tuple(sorted(n for n, k in _unique(request.columns).items() if k in kinds))


def _strict(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def shape_properties(request: ExtractionRequest) -> dict[str, Any]:
    """The schema properties ``group_by``, ``metrics`` and ``include`` for ``request``; a part
    the request offers nothing for is left out (strict mode refuses an empty ``enum``)."""
    properties: dict[str, Any] = {}
    groupable = group_columns(request)
    if groupable:
        properties["group_by"] = {
            "type": "array",
            "items": {"type": "string", "enum": list(groupable)},
            "maxItems": MAX_GROUP_BY,
            "description": "Columns to count rows per group by ('by status'); else empty.",
        }
    variants = [
        _strict(
            {
                "function": {"type": "string", "enum": [function]},
                "column": {"type": "string", "enum": list(columns)},
            }
        )
        for function in METRIC_KINDS
        if (columns := metric_columns(request, function))
    ]
    if variants:
        properties["metrics"] = {
            "type": "array",
            "items": {"anyOf": variants},
            "maxItems": MAX_METRICS,
            "description": "Aggregates asked for beyond the row count ('average score'); "
            "else empty.",
        }
    relations = sorted(set(request.relations))
    if relations:
        properties["include"] = {
            "type": "array",
            "items": {"type": "string", "enum": relations},
            "maxItems": MAX_INCLUDE,
            "description": "Related rows to show with each row ('with its conversations'); "
            "else empty.",
        }
    return properties


def shape_prompt(request: ExtractionRequest) -> str:
    """The prompt's rules for the parts :func:`shape_properties` offers ('' when none)."""
    lines: list[str] = []
    if group_columns(request):
        lines.append(
            "- group_by: the columns the request counts rows per group by ('leads by status', "
            "'per campaign'); empty when it asks for rows or one count."
        )
    if any(metric_columns(request, f) for f in METRIC_KINDS):
        lines.append(
            "- metrics: aggregates the request asks for besides the count: avg (average), sum "
            "(total), min (lowest), max (highest), count_distinct (how many different values), "
            "each over one column it names; empty otherwise."
        )
    if request.relations:
        lines.append(
            "- include: the related rows the request asks to see with each row ('with its "
            f"conversations'), among: {', '.join(sorted(set(request.relations)))}."
        )
    return "" if not lines else "\nHow the answer is shaped:\n" + "\n".join(lines) + "\n"


class Shape:
    """A checked shape: group-by columns, metric strings (``"avg:score"``), relation names, and
    the parts dropped with their reasons."""

    __slots__ = ("group_by", "ignored", "include", "metrics")

    def __init__(self) -> None:
        self.group_by: list[str] = []
        self.metrics: list[str] = []
        self.include: list[str] = []
        self.ignored: list[Ignored] = []


def _shown(value: object) -> str:
    shown = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return shown if len(shown) <= _SHOWN else shown[: _SHOWN - 1] + "…"


def _items(raw: Mapping[str, Any], key: str) -> list[object]:
    value = raw.get(key)
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def understand_shape(raw: Mapping[str, Any], request: ExtractionRequest) -> Shape:
    """The valid, grounded parts of ``raw``'s ``group_by``, ``metrics`` and ``include``."""
    shape = Shape()
    text = request.text
    groupable = set(group_columns(request))
    for item in _items(raw, "group_by"):
        shown = f"group by {_shown(item)}"
        if not isinstance(item, str) or item not in groupable:
            shape.ignored.append(Ignored(shown, f"{request.table} cannot be grouped by it"))
        elif not GROUP_CUE.search(text):
            shape.ignored.append(Ignored(shown, "the request asks for no count per group"))
        elif item not in shape.group_by:
            if len(shape.group_by) >= MAX_GROUP_BY:
                shape.ignored.append(Ignored(shown, f"more than {MAX_GROUP_BY} groupings"))
            else:
                shape.group_by.append(item)
    for item in _items(raw, "metrics"):
        function = item.get("function") if isinstance(item, Mapping) else None
        column = item.get("column") if isinstance(item, Mapping) else None
        shown = f"{_shown(function)} of {_shown(column)}"
        if not isinstance(function, str) or function not in METRIC_KINDS:
            shape.ignored.append(Ignored(shown, "not an aggregate function"))
        elif not isinstance(column, str) or column not in metric_columns(request, function):
            shape.ignored.append(Ignored(shown, f"{function} cannot be taken of this column"))
        elif not METRIC_CUES[function].search(text) or not column_mentioned(column, text):
            shape.ignored.append(Ignored(shown, "the request does not ask for it"))
        elif (metric := f"{function}:{column}") not in shape.metrics:
            if len(shape.metrics) >= MAX_METRICS:
                shape.ignored.append(Ignored(shown, f"more than {MAX_METRICS} aggregates"))
            else:
                shape.metrics.append(metric)
    relations = set(request.relations)
    for item in _items(raw, "include"):
        shown = f"with {_shown(item)}"
        if not isinstance(item, str) or item not in relations:
            shape.ignored.append(Ignored(shown, f"{request.table} has no such related rows"))
        elif not column_mentioned(item, text):
            shape.ignored.append(Ignored(shown, "the request does not ask for them"))
        elif item not in shape.include:
            if len(shape.include) >= MAX_INCLUDE:
                shape.ignored.append(Ignored(shown, f"more than {MAX_INCLUDE} relations"))
            else:
                shape.include.append(item)
    return shape
