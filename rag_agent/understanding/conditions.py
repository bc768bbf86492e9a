"""Conditions in the shapes callers see: the ``query_filters`` view and the four filter keys.

The pipeline works on :class:`~rag_agent.specs.Condition` values. Envelopes show a run's filters
as ``query_filters``, a mapping where the keys ``id``, ``email``, ``company`` and ``client_id``
stand for their conditions and any other condition is shown as ``{column: {op: value}}``:

>>> from persistence import Op
>>> query_filters_view([Condition("company_name", Op.ICONTAINS, "Acme"),
...                     Condition("score", Op.GT, 80)])
{'company': 'Acme', 'score': {'gt': 80}}

:func:`key_conditions` goes the other way, for callers (the ``query_leads`` tool's arguments,
``RAGAgent.run(filters={...})``) that pass the four keys.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from persistence import Op
from rag_agent.specs import Condition, Source

__all__ = ["FILTER_KEY_CONDITIONS", "key_conditions", "query_filters_view"]

#: The four filter keys (of ``query_filters``, ``run(filters={...})`` and ``query_leads``), with
#: the condition each stands for.
FILTER_KEY_CONDITIONS: Mapping[str, tuple[str, Op]] = {
    "id": ("id", Op.EQ),
    "email": ("email", Op.IEQ),
    "company": ("company_name", Op.ICONTAINS),
    "client_id": ("client_id", Op.EQ),
}
_KEY_OF = {condition: key for key, condition in FILTER_KEY_CONDITIONS.items()}


def key_conditions(filters: Mapping[str, Any], source: Source) -> tuple[Condition, ...]:
    """The conditions of canonical filter keys (as ``normalize_filters`` returns them)."""
    return tuple(
        Condition(column, op, filters[key], source)
        for key, (column, op) in FILTER_KEY_CONDITIONS.items()
        if key in filters
    )


def query_filters_view(conditions: Iterable[Condition]) -> dict[str, Any]:
    """``query_filters`` of ``conditions``: the filter keys where they apply, else
    ``{column: {op: value}}`` (a list for ``in``)."""
    view: dict[str, Any] = {}
    for condition in conditions:
        # Op(op) of an Op is the same Op, through the enum's lookup: asked only of another value.
        op = condition.op if type(condition.op) is Op else Op(condition.op)
        key = _KEY_OF.get((condition.column, op))
        value = list(condition.value) if isinstance(condition.value, tuple) else condition.value
        if key is not None and key not in view:
            view[key] = value
            continue
        shown = view.setdefault(condition.column, {})
        if not isinstance(shown, dict):
            continue
        name = op.value
        if name == Op.NEQ.value and name in shown:  # "neither new nor contacted": both excluded
            before = shown[name]
            shown[name] = [*(before if isinstance(before, list) else [before]), value]
        else:
            shown[name] = value
    return view
