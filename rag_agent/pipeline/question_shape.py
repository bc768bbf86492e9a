"""The shape of a question: its identifier-like literals (uuids, e-mail addresses) as typed slots.

"show lead 3f2a…" and "show lead 9c8b…" are one question asked of two rows: the rules read both
the same way, and only the condition value differs. :func:`question_shape` finds the slots of a
text; the pipeline keeps the plan of a shape (:mod:`rag_agent.pipeline.plan_memo`) made from the
shape's *probe* literals, and :class:`ShapedPlan` puts a new question's own literals in it.

What makes a reused plan equal to what the rules would read, checked here rather than assumed
(the rule parser changes independently of this module):

* a slot is a literal the rules' own patterns (:data:`~rag_agent.understanding.rules.EMAIL_RE`,
  :data:`~rag_agent.understanding.rules.UUID_PATTERN`) match, standing alone: whitespace or the
  text's start before it, whitespace, the text's end or one closing punctuation mark after; in
  lower case (case may steer a rule); no slot overlaps another;
* a literal holds no *reserved* word (:func:`is_inert`): a word of requests, table names, the
  rules' keywords, or a word of the database's vocabulary (its tables, columns, synonyms). A
  rule that reads words could only read such a word inside, or across the edge of, a literal
  ("count@x.io", "by status@x.io"); a literal with one is planned by the full parse. A token
  with a digit in it ("hopper1", a uuid's "3f2a9c1e") is no word: rules read words at word
  boundaries;
* a shape is kept only when its plan, read from the probe literals, with the question's own
  literals substituted (:meth:`ShapedPlan.fill`), *equals* the plan the rules read from the
  question itself: each literal is then a condition value exactly as written or as the rules
  normalise it (a uuid canonical, an address lower-cased), and nothing else in the plan (the
  table, the count, an ignored part's text, the topic) depends on it. Otherwise the shape is
  not kept and every question of it is parsed in full.

Numbers are not slots: the rules read them as ids, scores, years, counts, units, so a number's
value steers more than one condition.
"""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Hashable, Iterable, Mapping
from typing import Any, NamedTuple

from persistence.search.text import FRAMING_WORDS, REQUEST_WORDS, WEAK_WORDS
from persistence.vocabulary import SchemaVocabulary
from rag_agent.pipeline.plan_memo import Plan
from rag_agent.specs import Condition
from rag_agent.understanding.request import Request
from rag_agent.understanding.rules import EMAIL_RE, UUID_PATTERN
from rag_agent.understanding.rules.lexicon import ROLE_WORDS, SYNONYMS
from rag_agent.understanding.rules.sample_vocabulary import sample_vocabulary
from rag_agent.understanding.rules.vocabulary import REFERENCE_WORDS, TABLE_WORDS

__all__ = ["MAX_SLOTS", "QuestionShape", "ShapedPlan", "is_inert", "question_shape"]

#: At most this many slots in one question: more is a list, not a look-up.
MAX_SLOTS = 4

_UUID_RE = re.compile(rf"(?<![\w-]){UUID_PATTERN}(?![\w-])")
# What may follow a slot: whitespace, the end, or one closing mark and then either.
_AFTER = re.compile(r"(?:[.,;:!?)\]]?(?:\s|$))")
_LETTERS = re.compile(r"[^\W\d_]+")
_TOKEN = re.compile(r"\w+")
_DIGIT = re.compile(r"\d")

# Words the rules read as keywords around a value (counts, groupings, owners, keys, references,
# comparisons, negations) besides those of the request-word lists; a literal holding one is
# parsed in full.
_RULE_WORD_LIST = """
    how many count counts number numbers num nr no total by per each every for group grouped
    split broken down breakdown sorted ordered ranked owner owners owned own owns rep reps
    manage manages managed manager managers handle handles handled assigned account address
    mail email emails id ids uuid key is of equals not non never except excluding other than
    outside besides apart neither nor without missing lacking with its their about regarding
    re concerning mentioning mentions containing saying subject named called titled in near
    around based located from at to before after since until between last next this today
    yesterday week month year quarter day days weeks months years above below over under more
    less min max minimum maximum top bottom and or s the a an sum average avg mean highest
    lowest distinct unique latest first oldest newest
    """
_RULE_WORDS = frozenset(_RULE_WORD_LIST.split())
_FIXED_RESERVED = (
    FRAMING_WORDS
    | REQUEST_WORDS
    | WEAK_WORDS
    | ROLE_WORDS
    | _RULE_WORDS
    | frozenset(word for phrase in TABLE_WORDS for word in re.split(r"[\s_]+", phrase))
    | frozenset(REFERENCE_WORDS)
)


class QuestionShape(NamedTuple):
    """A question with its slots taken out: ``key`` (the words around the slots and each slot's
    kind) names the shape; ``literals`` are this question's values, in order."""

    key: tuple[Hashable, ...]
    kinds: tuple[str, ...]
    literals: tuple[str, ...]

    def probes(self) -> tuple[str, ...]:
        """The shape's probe literals: one fixed, inert value per slot, told apart by index."""
        return tuple(_probe(kind, i) for i, kind in enumerate(self.kinds))

    def text(self, literals: Iterable[str]) -> str:
        """The question of this shape with ``literals`` in its slots."""
        parts = self.key[0]
        assert isinstance(parts, tuple)
        out = [parts[0]]
        for literal, part in zip(literals, parts[1:], strict=True):
            out += (literal, part)
        return "".join(out)


def _probe(kind: str, index: int) -> str:
    if kind == "uuid":
        return f"00000000-0000-4000-8000-{index:012d}"
    return f"q{index}@q.qq"


def question_shape(text: str) -> QuestionShape | None:
    """The shape of ``text``, or ``None`` when it has no slot, too many, or one that does not
    stand alone in lower case (see the module's docstring)."""
    # Cheap pre-checks: an address needs "@", a uuid its hyphens.
    found: list[tuple[int, int, str]] = []
    if "@" in text:
        found += [(m.start(), m.end(), "email") for m in EMAIL_RE.finditer(text)]
    if "-" in text:
        found += [(m.start(), m.end(), "uuid") for m in _UUID_RE.finditer(text)]
    if not found or len(found) > MAX_SLOTS or "\x00" in text:
        return None
    found.sort()
    parts: list[str] = []
    literals: list[str] = []
    kinds: list[str] = []
    position = 0
    for start, end, kind in found:
        if start < position:  # overlapping slots ("<uuid>@x.io"): no shape
            return None
        literal = text[start:end]
        if literal != literal.lower():
            return None
        if start > 0 and not text[start - 1].isspace():
            return None
        if _AFTER.match(text, end) is None:
            return None
        parts.append(text[position:start])
        literals.append(literal)
        kinds.append(kind)
        position = end
    parts.append(text[position:])
    return QuestionShape((tuple(parts), tuple(kinds)), tuple(kinds), tuple(literals))


@functools.lru_cache(maxsize=16)
def _reserved(vocabulary: SchemaVocabulary | None, synonyms: Hashable) -> frozenset[str]:
    """Every word the rules may read *around* a literal with ``vocabulary`` (hashed by
    identity: once per learned vocabulary) and the caller's ``synonyms``: the fixed lists, the
    synonyms, and the words of every table and column of it and of the sample's (the rules'
    fallback). A column's values are not among them: the rules read values only in text no
    rule has claimed, and a literal is claimed before any value is read (the property test
    generates literals made of the schemas' values to hold this)."""
    words = set(_FIXED_RESERVED)
    for key, values in (*SYNONYMS.items(), *dict(synonyms or ()).items()):  # type: ignore[call-overload]
        words.update(_LETTERS.findall(str(key).lower()))
        for value in values:
            words.update(_LETTERS.findall(str(value).lower()))
    for known in (vocabulary, sample_vocabulary()):
        if known is None:
            continue
        for table in known.tables.values():
            words.update(_LETTERS.findall(table.name.lower()))
            for column in table.columns.values():
                words.update(_LETTERS.findall(column.name.lower()))
    return frozenset(words)


#: The reserved words last asked for, with the vocabulary and synonyms they were made with.
_LAST_RESERVED: list[tuple[object, object, frozenset[str]] | None] = [None]


def is_inert(
    literals: Iterable[str],
    vocabulary: SchemaVocabulary | None,
    synonyms: Mapping[str, tuple[str, ...]] | None = None,
) -> bool:
    """Whether no word of ``literals`` is one the rules may read (see the module's docstring)."""
    last = _LAST_RESERVED[0]
    if last is not None and last[0] is vocabulary and last[1] is synonyms:
        reserved = last[2]  # the run's vocabulary and the agent's synonyms: as last time
    else:
        reserved = _reserved(vocabulary, tuple(sorted((synonyms or {}).items())))
        # One tuple swapped in whole: a thread reads the old one or the new one.
        _LAST_RESERVED[0] = (vocabulary, synonyms, reserved)
    for literal in literals:
        for token in _TOKEN.findall(literal):
            # Digits glued to letters make no word ("hopper1"): the rules read words whole.
            if not _DIGIT.search(token) and any(p in reserved for p in token.split("_")):
                return False
    return True


class ShapedPlan:
    """A shape's plan, read from its probe literals, and where each literal's value sits in it:
    :meth:`fill` makes the plan of a question of the shape from its literals. Immutable.

    A literal sits in a condition as written (lower case is required of a slot, and a uuid
    slot is already canonical, so the rules' normalised form is the same text) or, once the
    facade coerced it to a uuid column's type, as a :class:`uuid.UUID`."""

    __slots__ = ("_at", "kinds", "table", "template")

    def __init__(self, template: Plan, kinds: tuple[str, ...], probes: tuple[str, ...]) -> None:
        self.template = template
        self.kinds = kinds
        #: The table the plan reads: what the memo checks the catalog of.
        self.table = template.table
        slots: dict[Any, tuple[int, bool]] = {}
        for slot, (kind, probe) in enumerate(zip(kinds, probes, strict=True)):
            slots[probe] = (slot, False)
            if kind == "uuid":
                slots[uuid.UUID(probe)] = (slot, True)

        def places(conditions: Iterable[Condition]) -> tuple[tuple[int, int, bool], ...]:
            found = []
            for index, condition in enumerate(conditions):
                value = condition.value
                if type(value) is str or type(value) is uuid.UUID:
                    place = slots.get(value)
                    if place is not None:
                        found.append((index, *place))
            return tuple(found)

        self._at = (
            places(template.request.conditions),
            places(template.applied),
            places(c for c, _ in template.refused),
        )

    def fill(self, literals: tuple[str, ...]) -> Plan:
        """The plan of the question of this shape whose literals are ``literals`` (each of its
        slot's kind, lower case): the template with each probe's value replaced by the
        literal's, in the same form."""
        if len(literals) != len(self.kinds):
            raise ValueError(f"{len(self.kinds)} literals expected, not {len(literals)}")
        # A literal's uuid form, parsed once and only where a condition holds it.
        parsed: dict[int, uuid.UUID] = {}

        def put(conditions: tuple[Condition, ...], at: tuple[tuple[int, int, bool], ...]) -> Any:
            if not at:
                return conditions
            changed = list(conditions)
            for index, slot, as_uuid in at:
                old = changed[index]
                value: Any = literals[slot]
                if as_uuid:
                    value = parsed.get(slot)
                    if value is None:
                        value = parsed[slot] = uuid.UUID(literals[slot])
                changed[index] = Condition(old.column, old.op, value, old.source)
            return tuple(changed)

        plan = self.template
        in_request, in_applied, in_refused = self._at
        request = plan.request
        if in_request:
            # Built whole rather than by dataclasses.replace (a third of a hit's cost); a field
            # added to Request and left out here makes the filled plan differ from the rules',
            # and no shape is kept.
            request = Request(
                table=request.table, conditions=put(request.conditions, in_request),
                count_only=request.count_only, ignored=request.ignored,
                group_by=request.group_by, include=request.include, metrics=request.metrics,
                topic=request.topic, through=request.through,
            )  # fmt: skip
        refused = plan.refused
        if in_refused:
            conditions = put(tuple(c for c, _ in refused), in_refused)
            refused = tuple((c, why) for c, (_, why) in zip(conditions, refused, strict=True))
        return Plan(request, plan.table, put(plan.applied, in_applied), refused)
