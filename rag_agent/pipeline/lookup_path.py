"""The plain lookup: a question whose plan is one equality read, answered by the read alone.

"show lead <uuid>" and "find the lead with email <address>" are the first questions a user asks,
and the most frequent. Once their plan is made (usually taken from the plan memo by the
question's shape, :mod:`rag_agent.pipeline.plan_memo`), every general step of a run after the
plan has nothing to do for them: no conversation to read against, no company to link through a
related table, no related table's condition to read through its keys, no related rows to
resolve, no topic to rank by, no count or aggregate. :func:`is_plain_lookup` says when that is
so, from the plan alone; the pipeline (:meth:`~rag_agent.pipeline.pipeline.Pipeline.run_steps`)
then goes from the plan straight to the cached read, its reformulations when it finds no row,
the fallback when they find none either, and the envelope: the same steps, in the same order, as
the general path takes for such a plan, with the steps skipped that provably add nothing.

Why each requirement, i.e. which general step it makes a no-op:

* the run is a standalone question (no conversation), with no caller's filters and no
  ``include``: nothing is carried over, merged, or checked as the caller's own;
* the request counts nothing, groups nothing and aggregates nothing: it reads rows;
* it ignored no part of the text (the company link reads ignored parts), names no related
  table's condition (``through``), asks for no related rows (``include``) and has no topic;
* the facade refused none of its conditions (a refused caller's condition fails the run), and
  applied at least one (an unfiltered table is never read);
* every applied condition is an equality (``eq``, ``ieq``): no substring condition on the
  table's text column, which the general path turns into ranking words.

A plain lookup is usually on an indexed key, but the index is no requirement: the answer does
not depend on it, only the read's speed does.
"""

from __future__ import annotations

from persistence import Op
from rag_agent.pipeline.plan_memo import Plan

__all__ = ["LOOKUP_OPS", "is_plain_lookup"]

#: The operators of a plain lookup's conditions: equalities, none read as ranking words.
LOOKUP_OPS = frozenset({Op.EQ, Op.IEQ})


def is_plain_lookup(plan: Plan) -> bool:
    """Whether ``plan`` (of a standalone question with no caller's filters or ``include``) is a
    plain lookup: rows read by equalities alone, nothing else asked (see the module's
    docstring)."""
    request = plan.request
    return (
        not request.count_only
        and not request.ignored
        and not request.group_by
        and not request.include
        and not request.metrics
        and not request.topic
        and not request.through
        and not plan.refused
        and bool(plan.applied)
        and all(condition.op in LOOKUP_OPS for condition in plan.applied)
    )
