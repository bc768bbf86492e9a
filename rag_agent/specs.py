"""What a request asks for, whoever understood it: conditions, and the spec tools take.

* :class:`Condition` is one understood condition (``column op value``) with its ``source``:
  ``"rules"`` (the rule parser), ``"llm"`` (schema-constrained extraction) or ``"tool"`` (a tool
  call's structured arguments). :class:`Understanding` is everything one piece of free text asked
  for: the table it names, its conditions, whether it asks only for a count, and the parts of the
  request that were recognised but cannot be applied (:class:`Ignored`). The pipeline checks every
  condition against the facade (column allowed and known, operator supported, value coercible to
  the column's type) by the same code whatever its source.
* :class:`FilterSpec` and :class:`OrderSpec` are conditions and sort keys as tools offered to a
  model take them.

Both the LangChain tools (:mod:`rag_agent.tools`) and the grounded fallback's own tools
(:mod:`rag_agent.fallback`) accept filters in this shape and turn them into persistence
:class:`~persistence.Filter` values; neither imports the other for it. Only literal-value operators
are offered (:data:`LLM_OPERATORS`): no ``ilike`` patterns, no SQL.

>>> FilterSpec(column="company_name", op="icontains", value="acme").to_filter()
Filter(column='company_name', op=<Op.ICONTAINS: 'icontains'>, value='acme')
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from persistence import Filter, InvalidQueryError, Op, Order

__all__ = [
    "LLM_OPERATORS",
    "MAX_TOOL_IN_VALUES",
    "SOURCES",
    "ColumnInfo",
    "Condition",
    "ExtractionRequest",
    "FilterSpec",
    "Ignored",
    "OrderSpec",
    "Source",
    "Through",
    "Understanding",
    "WholeNumber",
    "to_filters",
]

#: Who understood a condition.
#: ``"context"``: carried from an earlier turn of a conversation (the rows a follow-up refers to).
Source = Literal["rules", "llm", "tool", "reformulation", "context"]
SOURCES: tuple[Source, ...] = ("rules", "llm", "tool", "reformulation", "context")

#: Operators a model may use: literal values only (``ilike`` would let it write patterns).
LLM_OPERATORS: tuple[str, ...] = tuple(op.value for op in Op if op is not Op.ILIKE)
#: The longest ``in`` list a tool call (LangChain, MCP or the fallback's) may send: a caller
#: listing more keys is not looking rows up. Bounds the worst tool call on the memory backend.
MAX_TOOL_IN_VALUES = 100


def _not_a_boolean(value: object) -> object:
    # pydantic reads True as 1 for an int field: "limit": true would ask for one row.
    if isinstance(value, bool):
        raise ValueError("a boolean is not a number here")
    return value


#: An integer argument of a tool (a page size, an offset, an id): never a boolean.
WholeNumber = Annotated[int, BeforeValidator(_not_a_boolean)]


class FilterSpec(BaseModel):
    """One condition on a column with a literal value, as tools offered to a model take it."""

    model_config = ConfigDict(extra="ignore")

    column: str = Field(description="Column name, e.g. company_name.")
    op: Literal[LLM_OPERATORS] = Field(  # type: ignore[valid-type]
        default="eq", description="eq ieq neq gt gte lt lte in is_null icontains"
    )
    value: str | int | float | bool | list[str | int | float | bool] | None = Field(
        default=None, description="A literal value (a list for 'in', true/false for 'is_null')."
    )

    def to_filter(self) -> Filter:
        """This condition as a persistence ``Filter`` (a list value becomes a tuple).

        An ``in`` list longer than :data:`MAX_TOOL_IN_VALUES` is ``InvalidQueryError``.
        """
        if isinstance(self.value, list) and len(self.value) > MAX_TOOL_IN_VALUES:
            raise InvalidQueryError(
                f"in on {self.column!r} has {len(self.value)} values; a tool call may list at "
                f"most {MAX_TOOL_IN_VALUES}",
                field="value",
            )
        value = tuple(self.value) if isinstance(self.value, list) else self.value
        # Op(op) of an Op is the same Op, through the enum's lookup: asked only of another value.
        op = self.op if type(self.op) is Op else Op(self.op)
        return Filter(self.column, op, value)


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


@dataclass(frozen=True, slots=True)
class Condition:
    """One understood condition, ``column op value``, and who understood it.

    Values are plain Python (``str``, ``int``, aware ``datetime`` …); the facade coerces them to
    the column's type. ``Condition("email", Op.IEQ, "ana@x.io")``.
    """

    column: str
    op: Op
    value: Any
    source: Source = "rules"

    def to_filter(self) -> Filter:
        """This condition as a persistence ``Filter`` (validated there)."""
        value = tuple(self.value) if isinstance(self.value, list) else self.value
        # Op(op) of an Op is the same Op, through the enum's lookup: asked only of another value.
        op = self.op if type(self.op) is Op else Op(self.op)
        return Filter(self.column, op, value)


@dataclass(frozen=True, slots=True)
class Ignored:
    """A part of the request that was recognised but not applied, and why.

    ``Ignored("the logistics company", "no column of leads holds an industry")``.
    """

    text: str
    reason: str


@dataclass(frozen=True, slots=True)
class Understanding:
    """Everything one piece of free text asks for.

    ``table`` is the table the text names (``"campaigns of client 7"`` → ``"campaigns"``), or
    ``None`` when it names none. ``weak`` is true when the rules matched only on weak evidence (a
    lone capitalised word taken for a company, say): with an LLM configured, the LLM then decides.
    ``group_by`` names the columns a count per group is asked by ("leads by status" →
    ``("status",)``); empty when the text asks for rows or one count.
    ``include`` names the tables whose related rows the text asks to see with each row ("with
    its conversations" → ``("conversations",)``).
    ``metrics`` names the aggregates asked for beyond a row count, as ``facade.aggregate`` takes
    them ("average score by status" → ``("avg:score",)``); empty means the count alone.
    ``topic`` is what the text is about beyond its conditions: the words no rule read, request
    framing removed ("inquiries from customers who want to stop paying" → ``"stop paying"``);
    ``""`` when nothing is left. Rows are ranked by it (:mod:`rag_agent.pipeline.ranking`).
    ``through`` are conditions on related tables (:class:`Through`).
    """

    table: str | None = None
    conditions: tuple[Condition, ...] = ()
    count_only: bool = False
    ignored: tuple[Ignored, ...] = ()
    weak: bool = False
    group_by: tuple[str, ...] = ()
    include: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()
    topic: str = ""
    through: tuple[Through, ...] = ()


@dataclass(frozen=True, slots=True)
class Through:
    """A condition on a related table the text names ("leads of software clients" →
    ``clients.industry = 'software'``): the run reads the matching rows' keys and follows the
    foreign keys to the asked table (:mod:`rag_agent.pipeline.related_values`). ``text`` is the
    words it was read from."""

    table: str
    condition: Condition
    text: str


@dataclass(frozen=True, slots=True)
class ColumnInfo:
    """A column as an extractor may use it: its name, its kind (a ``ColumnKind`` value such as
    ``"text"``, ``"uuid"``, ``"timestamptz"``), the operators allowed on it, and the values it
    holds: an enum column's labels, or a few-valued column's values learned from the data
    (:class:`~persistence.vocabulary.SchemaVocabulary`); ``None`` for any other column."""

    name: str
    kind: str
    operators: tuple[str, ...]
    labels: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class ExtractionRequest:
    """What the LLM extraction step gets: the text, the table, the table's allowed columns (with
    kinds and operators), the readable tables, the current time for relative dates, and the
    relations whose related rows may be asked for (relation names reachable from the table,
    ``("conversations", "messages")``; empty when none is readable), and, in a conversation, the
    earlier turns as short lines (the user's questions and what each answer held; no row)."""

    text: str
    table: str
    columns: tuple[ColumnInfo, ...]
    tables: tuple[str, ...]
    now: dt.datetime
    relations: tuple[str, ...] = ()
    history: tuple[str, ...] = ()
