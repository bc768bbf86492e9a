"""Summaries of large results: per-column counts and extremes over the returned page.

When a query matches more rows than ``RAG_SUMMARY_THRESHOLD`` the envelope carries a summary.
It describes **the returned page only**, a sample of the matching rows, and says so
(``"sample": true``, ``sample_size``, ``total_count``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from rag_agent.envelope import Record

__all__ = ["TOP_VALUES", "summarize", "summarize_if_truncated"]

#: How many most frequent values are listed per column.
TOP_VALUES = 3
# Summaries read canonical (JSON-ready) values, so exact types suffice.
_HASHABLE_SCALARS = frozenset({str, int, float, bool})
_NUMBERS = frozenset({int, float})


def _extremes(present: list[Any], kinds: set[type]) -> dict[str, Any]:
    # Only values of one comparable kind (numbers, or text) have a meaningful min/max.
    if present and (kinds <= _NUMBERS or kinds == {str}):
        return {"min": min(present), "max": max(present)}
    return {}


def summarize(rows: Sequence[Mapping[str, Any]], total_count: int) -> dict[str, Any]:
    """Per-column ``distinct``, ``nulls``, ``top`` values and ``min``/``max`` over ``rows``.

    ``rows`` are canonical (JSON-ready) record fields; the result is JSON-ready too.

    >>> summarize([{"status": "new"}, {"status": None}], 900)["columns"]["status"]["top"]
    [{'value': 'new', 'count': 1}]
    """
    columns: dict[str, list[Any]] = {}
    for row in rows:
        for key, value in row.items():
            columns.setdefault(key, []).append(value)
    described: dict[str, Any] = {}
    for column, values in columns.items():
        present = [v for v in values if v is not None]
        nulls = len(rows) - len(present)  # a column missing from a row counts as null
        kinds = set(map(type, present))
        countable = (
            present
            if kinds <= _HASHABLE_SCALARS
            else [v for v in present if type(v) in _HASHABLE_SCALARS]
        )
        counts = Counter(countable)
        described[column] = {
            "distinct": len(counts),
            "nulls": nulls,
            "top": [{"value": v, "count": c} for v, c in counts.most_common(TOP_VALUES)],
            **_extremes(present, kinds),
        }
    return {
        "sample": True,
        "sample_size": len(rows),
        "total_count": total_count,
        "note": "computed over the returned page only, a sample of the matching rows",
        "columns": described,
    }


def summarize_if_truncated(
    records: Sequence[Record], total_count: int, threshold: int
) -> dict[str, Any] | None:
    """The summary of ``records`` when ``total_count`` exceeds ``threshold``, else ``None``."""
    if total_count <= threshold:
        return None
    return summarize([record.model_extra or {} for record in records], total_count)
