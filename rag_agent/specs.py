"""Conditions and sort keys as tools offered to a model take them: ``FilterSpec``, ``OrderSpec``.

Both the LangChain tools (:mod:`rag_agent.tools`) and the grounded fallback's own tools
(:mod:`rag_agent.fallback`) accept filters in this shape and turn them into persistence
:class:`~persistence.Filter` values; neither imports the other for it. Only literal-value operators
are offered (:data:`LLM_OPERATORS`): no ``ilike`` patterns, no SQL.

>>> FilterSpec(column="company_name", op="icontains", value="acme").to_filter()
Filter(column='company_name', op=<Op.ICONTAINS: 'icontains'>, value='acme')
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from persistence import Filter, Op, Order

__all__ = ["LLM_OPERATORS", "FilterSpec", "OrderSpec", "to_filters"]

#: Operators a model may use: literal values only (``ilike`` would let it write patterns).
LLM_OPERATORS: tuple[str, ...] = tuple(op.value for op in Op if op is not Op.ILIKE)


class FilterSpec(BaseModel):
    """One condition on a column with a literal value, as tools offered to a model take it."""

    model_config = ConfigDict(extra="ignore")

    column: str = Field(description="Column name, e.g. company_name.")
    op: Literal[LLM_OPERATORS] = Field(  # type: ignore[valid-type]
        default="eq", description="eq neq gt gte lt lte in is_null icontains"
    )
    value: str | int | float | bool | list[str | int | float | bool] | None = Field(
        default=None, description="A literal value (a list for 'in', true/false for 'is_null')."
    )

    def to_filter(self) -> Filter:
        """This condition as a persistence ``Filter`` (a list value becomes a tuple)."""
        value = tuple(self.value) if isinstance(self.value, list) else self.value
        return Filter(self.column, Op(self.op), value)


class OrderSpec(BaseModel):
    """A sort key."""

    model_config = ConfigDict(extra="ignore")

    column: str
    descending: bool = False

    def to_order(self) -> Order:
        """This sort key as a persistence ``Order``."""
        return Order(self.column, self.descending)


def to_filters(specs: Iterable[FilterSpec] | None) -> list[Filter]:
    """The persistence filters of ``specs`` (none for ``None``), in order."""
    return [spec.to_filter() for spec in specs or ()]
