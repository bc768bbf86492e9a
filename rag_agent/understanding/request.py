"""Steps 1 and 2 of a run: what the request asks for, and which of it the facade can apply.

:func:`understand_request` turns free text (and a tool's explicit conditions) into a
:class:`Request`: the rules first, then, when they find nothing or only weak evidence and an
extractor is configured, the schema-constrained LLM extraction. :func:`apply_conditions` then puts
every condition, whatever its source, through the facade's own checks (table and column allowed,
column known, operator supported, value coercible to the column's type): a condition that passes
is applied with its coerced value; one that fails is *ignored*, with the reason, so neither a person
nor a calling model is misled about what the answer is an answer to.

Thread-safety: pure functions over the facade and the extractor, both thread-safe.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from persistence import (
    EXACT_OPERATORS,
    BackendError,
    InvalidQueryError,
    Op,
    PersistenceError,
    ReadOnlyPersistenceFacade,
    brief_repr,
)
from persistence.vocabulary import SchemaVocabulary
from rag_agent.specs import (
    ColumnInfo,
    Condition,
    ExtractionRequest,
    Ignored,
    Through,
    Understanding,
)
from rag_agent.understanding.conditions import key_conditions
from rag_agent.understanding.filters import normalize_filters, understand
from rag_agent.understanding.rules.vocabulary import DEFAULT_TABLE

__all__ = [
    "DEFAULT_TABLE",
    "OPERATORS_BY_KIND",
    "ConditionExtractor",
    "Request",
    "apply_conditions",
    "column_infos",
    "describe",
    "explicit_conditions",
    "named_table",
    "understand_request",
]


# Words that ask for an aggregate unambiguously ("latest" or "first" usually order rows).
_AGGREGATE_WORDS = re.compile(
    r"\b(?:average|avg|mean|sum|total|minimum|maximum|highest|lowest|distinct|unique)\b",
    re.IGNORECASE,
)

#: Step 2's hook: an extraction request → what the model understood (``source="llm"``).
ConditionExtractor = Callable[[ExtractionRequest], Understanding]

_ORDERED = ("eq", "neq", "gt", "gte", "lt", "lte", "in", "is_null")
_TEXT = ("eq", "ieq", "neq", "in", "icontains", "is_null")
_EQUALITY = ("eq", "neq", "in", "is_null")
#: The operators offered on a column of each kind (``ColumnKind`` values).
OPERATORS_BY_KIND: Mapping[str, tuple[str, ...]] = {
    "text": _TEXT,
    "uuid": _EQUALITY,
    "boolean": ("eq", "neq", "is_null"),
    "json": ("is_null",),
    "other": _EQUALITY,
}


@dataclass(frozen=True, slots=True)
class Request:
    """What one run asks for, once understood: the table, the conditions, count or rows, the
    parts of the request not applied so far, the columns it counts per group by, the tables
    whose related rows it asks for, the aggregates it asks for besides the count, and the topic
    rows are ranked by (``""``: none)."""

    table: str
    conditions: tuple[Condition, ...]
    count_only: bool = False
    ignored: tuple[Ignored, ...] = ()
    group_by: tuple[str, ...] = ()
    include: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()
    topic: str = ""
    through: tuple[Through, ...] = ()


def explicit_conditions(filters: object) -> tuple[Condition, ...]:
    """A caller's explicit filters as conditions: the filter keys (``id``, ``email``,
    ``company``, ``client_id``) of a mapping, or a sequence of :class:`Condition`."""
    if isinstance(filters, Mapping):
        return key_conditions(normalize_filters(filters), "tool")
    if isinstance(filters, Sequence) and not isinstance(filters, str | bytes):
        conditions = tuple(filters)
        if all(isinstance(c, Condition) for c in conditions):
            # Whatever source they were built with, the caller gave them: they are the tool's.
            return tuple(dataclasses.replace(c, source="tool") for c in conditions)
    raise InvalidQueryError(
        "filters must be a mapping of id/email/company/client_id or a sequence of Condition, "
        f"not {type(filters).__name__}",
        field="filters",
    )


def understand_request(
    text: str,
    *,
    table: str | None,
    explicit: tuple[Condition, ...] | None,
    count_only: bool | None,
    now: dt.datetime,
    extract: Callable[[str, str], Understanding] | None,
    vocabulary: SchemaVocabulary | None = None,
    synonyms: Mapping[str, tuple[str, ...]] | None = None,
) -> Request:
    """The request in ``text`` (and ``explicit`` conditions, which win over the text's).

    ``extract(text, table)`` runs the LLM step when no explicit conditions were given and the
    rules find nothing, only weak evidence, or a text asking for an aggregate (which the rules
    do not read); its conditions replace the rules' only when the rules found none (or only
    weak evidence); its grouping and related rows fill in what the rules did not read.
    """
    extra = tuple(sorted((synonyms or {}).items()))
    today = now.astimezone(dt.UTC).date()
    found = _rules(text, table, today, vocabulary, extra) if text.strip() else Understanding()
    if explicit is not None:
        # The caller's conditions win on every column they name: "score above 80" in the text
        # and score_min=50 from the arguments is the argument's question, said so in ignored.
        named = {c.column for c in explicit}
        kept = tuple(c for c in found.conditions if c.column not in named)
        overridden = tuple(
            Ignored(describe(c), f"the caller's own filter on {c.column} applies instead")
            for c in found.conditions
            if c.column in named
        )
        found = dataclasses.replace(
            found, conditions=kept + explicit, ignored=found.ignored + overridden, weak=False
        )
    elif extract is not None and text.strip() and _asks_model(found, text):
        found = _merged(found, extract(text, table or found.table or DEFAULT_TABLE))
    return Request(
        table=table or found.table or DEFAULT_TABLE,
        conditions=found.conditions,
        count_only=found.count_only if count_only is None else count_only,
        ignored=found.ignored,
        group_by=found.group_by,
        include=found.include,
        metrics=found.metrics,
        topic=found.topic,
        through=found.through if explicit is None else (),
    )


def named_table(
    text: str,
    now: dt.datetime,
    vocabulary: SchemaVocabulary | None = None,
    synonyms: Mapping[str, tuple[str, ...]] | None = None,
) -> str | None:
    """The table ``text`` names, as the rules read it ("their conversations" →
    ``"conversations"``), or ``None`` when it names none."""
    if not text.strip():
        return None
    extra = tuple(sorted((synonyms or {}).items()))
    return _rules(text, None, now.astimezone(dt.UTC).date(), vocabulary, extra).table


def _asks_model(found: Understanding, text: str) -> bool:
    # The rules read no aggregate function: a text asking for one ("average score by status")
    # goes to the model even when the rules read all its conditions.
    return not found.conditions or found.weak or _AGGREGATE_WORDS.search(text) is not None


def _merged(rules: Understanding, model: Understanding) -> Understanding:
    """The rules' reading completed by the model's: the model's conditions replace the rules'
    only when the rules found none (or only weak evidence); its grouping and related rows fill
    in what the rules did not read; its metrics are its own (the rules read none)."""
    if model.conditions and (not rules.conditions or rules.weak):
        # The rules' topic goes too: the model read the words' meaning, not which words it used
        # (its "about …" substrings still rank, see rag_agent.pipeline.ranking.text_conditions).
        base = Understanding(
            model.table or rules.table, model.conditions, model.count_only, model.ignored
        )
    else:
        base = dataclasses.replace(rules, ignored=rules.ignored + model.ignored)
    same_table = model.table is None or model.table == (base.table or rules.table)
    if not same_table:  # the model read another table: its shape is for that table's columns
        return dataclasses.replace(base, group_by=rules.group_by, include=rules.include)
    return dataclasses.replace(
        base,
        group_by=rules.group_by or model.group_by,
        include=rules.include or model.include,
        metrics=model.metrics,
        weak=False,
    )


@functools.lru_cache(maxsize=1024)
def _rules(
    text: str,
    table: str | None,
    today: dt.date,
    vocabulary: SchemaVocabulary | None,
    synonyms: tuple[tuple[str, tuple[str, ...]], ...],
) -> Understanding:
    # The rules are pure and read the clock to the day (every date rule is day-granular, which
    # a test holds them to), so a question asked again the same UTC day is not parsed again.
    # The Understanding is frozen: sharing it is safe. A vocabulary is hashed by identity, so a
    # newly learned one reads the question again.
    noon = dt.datetime.combine(today, dt.time(12), dt.UTC)
    return understand(
        text, table=table, now=noon, vocabulary=vocabulary, synonyms=dict(synonyms) or None
    )


def apply_conditions(
    facade: ReadOnlyPersistenceFacade, table: str, conditions: Sequence[Condition]
) -> tuple[tuple[Condition, ...], tuple[tuple[Condition, Ignored], ...]]:
    """Split ``conditions`` into those the facade applies (values coerced to the columns'
    types) and those it cannot, each paired with the facade's reason.

    A second condition with the same column and operator is ignored: the query could apply
    both, but the answer could not show which one a reader meant. Several ``neq`` are kept:
    each excludes a value ("neither new nor contacted").
    """
    applied: list[Condition] = []
    refused: list[tuple[Condition, Ignored]] = []
    seen: set[tuple[str, Op]] = set()
    for condition in conditions:
        try:
            op = Op(condition.op)
            if (condition.column, op) in seen and op is not Op.NEQ:  # several neq: "neither"
                raise InvalidQueryError(
                    f"a second {op.value!r} condition on {condition.column!r}", field="filters"
                )
            [checked] = facade.check_filters(table, [condition.to_filter()])
        except BackendError:
            raise  # a backend that fails says nothing about the condition: the run reports it
        except (PersistenceError, ValueError) as exc:
            refused.append((condition, Ignored(describe(condition), str(exc))))
            continue
        seen.add((condition.column, op))
        applied.append(Condition(checked.column, checked.op, checked.value, condition.source))
    return tuple(applied), tuple(refused)


def describe(condition: Condition) -> str:
    """A condition as a short phrase: ``"score gt 80"``."""
    op = condition.op.value if isinstance(condition.op, Op) else str(condition.op)
    return f"{condition.column} {op} {brief_repr(condition.value)}"


_EXACT = frozenset(op.value for op in EXACT_OPERATORS)


def redacted_columns(facade: Any, table: str) -> Mapping[str, str]:
    """The redacted columns of ``table`` and how (empty for a facade without redaction)."""
    own = getattr(facade, "redacted_columns", None)
    return own(table) if callable(own) else {}


def _answers_lookups(facade: Any, table: str, column: str) -> bool:
    # A mask or drop column answers no filter by default (it would be an oracle for its value).
    policy = getattr(facade, "redaction", None)
    allows = getattr(policy, "allows_lookups", None)
    return bool(allows(table, column)) if callable(allows) else True


def column_infos(facade: ReadOnlyPersistenceFacade, table: str) -> tuple[ColumnInfo, ...]:
    """The allowed columns of ``table`` with their kinds and the operators offered on each."""
    supported = {op.value for op in Op if facade.capabilities.supports(op)}
    redacted = redacted_columns(facade, table)
    learned = _learned(facade, table)
    infos = []
    for name, ctype in sorted(facade.column_types(table).items()):
        kind = ctype.kind.value
        operators = OPERATORS_BY_KIND.get(kind, _ORDERED)
        if name in redacted:  # exact look-ups at most (persistence.redaction)
            exact = _answers_lookups(facade, table, name)
            operators = tuple(op for op in operators if op in _EXACT) if exact else ()
        offered = tuple(op for op in operators if op in supported)
        infos.append(ColumnInfo(name, kind, offered, ctype.labels or learned.get(name)))
    return tuple(infos)


def _learned(facade: ReadOnlyPersistenceFacade, table: str) -> dict[str, tuple[str, ...]]:
    """The values learned for ``table``'s few-valued text columns (so a model picks real
    values), from the database's vocabulary; empty when it cannot be learned."""
    try:
        words = facade.vocabulary().table(table)
    except PersistenceError:
        return {}
    learned = words.learned_values() if words is not None else {}
    return {column: tuple(str(v) for v in values) for column, values in learned.items()}
