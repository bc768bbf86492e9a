"""One table's words for the rule parser, derived from the database's
:class:`~persistence.vocabulary.SchemaVocabulary`: which column holds a company, a person's
name, an e-mail, a date, a number, a flag, a category, and the phrases that name each column and
each value. Nothing here names a column or a value of any one database: roles come from generic
English words in column names, values from the data.

A value is met by its whole phrase ("closed won"), by a word that only it holds among its
column's values ("won"), or by a word of the generic synonym layer (:data:`SYNONYMS`, extended
by the caller) whose target is one of the column's learned values ("incoming" → ``in``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from persistence.search.text import FRAMING_WORDS
from persistence.vocabulary import ColumnWords, SchemaVocabulary, TableWords, stem, stems
from rag_agent.understanding.rules.tokens import PhraseIndex, phrase_index

__all__ = [
    "ROLE_WORDS",
    "SYNONYMS",
    "Lexicon",
    "SynonymsKey",
    "ValueSense",
    "lexicon_of",
    "lexicon_with",
    "synonyms_key",
    "triggers_besides",
]

#: Generic CRM language: a word → values it may mean. Applied only where one of the targets
#: is a learned value of a column; the caller's ``synonyms`` extend it.
SYNONYMS: Mapping[str, tuple[str, ...]] = {
    "incoming": ("in", "inbound"), "inbound": ("in", "incoming"), "received": ("in", "inbound"),
    "outgoing": ("out", "outbound"), "outbound": ("out", "outgoing"),
    "won": ("closed_won", "won"), "lost": ("closed_lost", "lost"),
    "converted": ("won", "closed_won", "converted", "customer"),
    "disqualified": ("disqualified", "unqualified", "lost"),
    "live": ("running", "active", "live"), "running": ("live", "active", "running"),
    "active": ("active", "live", "running", "open"), "ongoing": ("open", "active", "running"),
    "finished": ("completed", "done", "finished", "ended", "closed"),
    "completed": ("finished", "done", "completed", "ended"), "ended": ("completed", "finished"),
    "done": ("completed", "finished", "done", "resolved"),
    "paused": ("paused", "on_hold"), "hold": ("paused", "on_hold"),
    "resolved": ("resolved", "closed", "done"), "closed": ("closed", "resolved"),
    "pending": ("waiting", "pending", "open"), "waiting": ("waiting", "pending"),
    "awaiting": ("waiting", "pending"), "draft": ("draft",), "planned": ("draft", "planned"),
    "email": ("email", "e-mail"), "mail": ("email",), "telephone": ("phone",),
    "urgent": ("urgent", "high"),
}  # fmt: skip
#: Words that mean a flag is off, a flag's column words after them meaning it is on.
OFF_WORDS = frozenset({"disabled", "inactive", "off", "deactivated", "switched", "turned"})

_COMPANY_WORDS = frozenset({"company", "organization", "organisation", "employer", "business"})
_COMPANY_TABLES = frozenset({"clients"})  # the eight tables' own meaning: a client is a company
_TEXT_WORDS = frozenset(
    {"subject", "body", "text", "content", "message", "description", "notes", "summary", "topic"}
)
#: Text columns that head a row rather than tell it: few values make them a category.
_HEADING_WORDS = frozenset({"subject", "topic"})
#: Every generic word the roles are told by (the docs list them; a test exempts them from the
#: rule that no sample column or value is written into the rules).
ROLE_WORDS = _COMPANY_WORDS | _TEXT_WORDS | {
    "first", "given", "last", "surname", "family", "full", "contact", "name", "email", "mail",
    "phone", "mobile", "telephone", "title", "role", "position",
}  # fmt: skip
_DATE_EVENT_WORDS = (
    "created", "received", "sent", "imported", "submitted", "added", "registered", "inserted",
    "opened", "started", "launched",
)  # fmt: skip
#: Column-name words that say nothing of what the column holds ("is_active", "step_count").
_FILLER = frozenset({"is", "has", "was", "can", "count", "number", "num", "nr", "at", "on", "of"})
#: Last words of a column name that the column is also called without.
_SUFFIXES = frozenset({"name", "date", "amount", "number", "count", "no", "nr", "num"})
#: Values that are everyday words ("what's new", "run"): read only next to a cue, a table noun
#: after them or the column's name, "is"/"are"/"still" before them.
NEEDS_CUE = frozenset(stem(w) for w in ("new", "open", "live", "active", "running", "ended",
                                        "pending", "old", "done", "run"))  # fmt: skip
#: A category column with more values than this is not matched word by word (names, ids...).
MAX_CATEGORY_VALUES = 60


@dataclass(frozen=True, slots=True)
class ValueSense:
    """A phrase meaning ``column = value`` (``exact`` when it is the value's own phrase)."""

    column: str
    value: Any
    exact: bool
    #: A synonym's own spelling: it is met only by words that start with it ("live", "lives";
    #: never "run" for "running", which stems alike).
    synonym: str | None = None


@dataclass
class Lexicon:
    """The words of one table (see the module docstring)."""

    table: str
    columns: Mapping[str, ColumnWords]
    words: TableWords | None
    #: stems of a phrase → what it may mean
    values: dict[tuple[str, ...], list[ValueSense]] = field(default_factory=dict)
    #: stems of a phrase → the columns it names
    names: dict[tuple[str, ...], list[str]] = field(default_factory=dict)
    longest: int = 1
    #: role → the table's columns in it (see :func:`_roles`)
    roles: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: the columns matched value by value (see :func:`_is_category`)
    categories: frozenset[str] = frozenset()
    _phrases: dict[str, tuple[tuple[str, ...], ...]] = field(default_factory=dict, repr=False)
    _indexes: dict[str, PhraseIndex] = field(default_factory=dict, repr=False, compare=False)
    _folded: dict[str, frozenset[str]] = field(default_factory=dict, repr=False, compare=False)
    _triggers: frozenset[str] | None = field(default=None, repr=False)
    _value_starts: frozenset[str] | None = field(default=None, repr=False, compare=False)
    _named_from: dict[str, tuple[ColumnWords, ...]] | None = field(
        default=None, repr=False, compare=False
    )
    _met_from: dict[str, tuple[ColumnWords, ...]] | None = field(
        default=None, repr=False, compare=False
    )
    #: the category columns in catalog order, each with the stems of its name
    category_stems: tuple[tuple[ColumnWords, tuple[str, ...]], ...] = field(
        default=(), init=False, repr=False, compare=False
    )
    #: the first stem of each category column's name (a text with none names no such column)
    category_firsts: frozenset[str] = field(
        default=frozenset(), init=False, repr=False, compare=False
    )
    _numeric: tuple[str, ...] = field(default=(), init=False, repr=False, compare=False)
    _booleans: tuple[str, ...] = field(default=(), init=False, repr=False, compare=False)
    _dates: tuple[tuple[str, frozenset[str]], ...] = field(
        default=(), init=False, repr=False, compare=False
    )
    _date_default: tuple[str | None, str | None] = field(
        default=(None, None), init=False, repr=False, compare=False
    )
    _first: dict[str, str | None] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        self.roles = _roles(self.table, self.columns)
        # The first column of each role, asked for a dozen times per request.
        self._first = {role: found[0] if found else None for role, found in self.roles.items()}
        self.categories = frozenset(
            c.name for c in self.columns.values() if _is_category(self.roles, c)
        )
        # The columns are fixed for the lexicon's life: told apart once, not per question.
        self.category_stems = tuple(
            (c, c.stems) for c in self.columns.values() if c.name in self.categories
        )
        self.category_firsts = frozenset(found[0] for _, found in self.category_stems if found)
        self._numeric = tuple(c.name for c in self.columns.values() if c.is_numeric)
        self._booleans = tuple(c.name for c in self.columns.values() if c.is_boolean)
        # The date columns with the words that name them, and the one meant when none is named.
        self._dates = tuple(
            (c.name, frozenset(c.stems) - {"at", "on", "date"})
            for c in self.columns.values()
            if c.is_date
        )
        self._date_default = self._default_date() if self._dates else (None, None)

    def has(self, column: str) -> bool:
        return column in self.columns

    def is_category(self, column: str) -> bool:
        """Whether ``column`` holds a few learned values matched word by word."""
        return column in self.categories

    def role(self, role: str) -> tuple[str, ...]:
        """The table's columns in ``role``: company, given, family, person (a full name),
        email, phone, job (a title), text, name."""
        return self.roles[role]

    def first(self, role: str) -> str | None:
        return self._first[role]

    @property
    def numeric(self) -> tuple[str, ...]:
        return self._numeric

    @property
    def booleans(self) -> tuple[str, ...]:
        return self._booleans

    def date_column(self, verbs: Iterable[str]) -> tuple[str | None, str | None]:
        """The date column ``verbs`` (stems of the text's words) name, else the table's
        created/received/sent-like one: ``(column, None)``, or ``(None, why)``."""
        if not self._dates:
            return None, "no date column"
        said = set(verbs)
        named = [name for name, words in self._dates if not words.isdisjoint(said)]
        if len(named) == 1:
            return named[0], None
        return self._date_default

    def _default_date(self) -> tuple[str | None, str | None]:
        """The date column no word names: the created/received/sent-like one, else the only one
        (see :meth:`date_column`)."""
        dates = [c for c in self.columns.values() if c.is_date]
        for word in _DATE_EVENT_WORDS:
            event = [c.name for c in dates if stem(word) in c.stems]
            if event:
                return event[0], None
        if len(dates) == 1:
            return dates[0].name, None
        return None, f"which date is meant: {', '.join(c.name for c in dates)}"

    def column_phrases(self, column: str) -> tuple[tuple[str, ...], ...]:
        """The stem phrases naming ``column``: its words, and without filler words."""
        known = self._phrases.get(column)
        if known is None:
            known = self._phrases[column] = self._column_phrases(column)
        return known

    def phrase_index(self, column: str) -> PhraseIndex:
        """:meth:`column_phrases` of ``column`` by first stem (see :func:`.tokens.phrase_at`)."""
        known = self._indexes.get(column)
        if known is None:
            known = self._indexes[column] = phrase_index(self.column_phrases(column))
        return known

    def folded_values(self, column: str) -> frozenset[str]:
        """The learned text values of ``column``, case-folded (empty when none is learned)."""
        known = self._folded.get(column)
        if known is None:
            values = self.columns[column].values
            known = frozenset(
                v.casefold() for v in values or () if isinstance(v, str)
            ) if isinstance(values, tuple) else frozenset()  # fmt: skip
            self._folded[column] = known
        return known

    def named_from(self, first: str) -> tuple[ColumnWords, ...]:
        """The columns, in catalog order, a phrase of whose name starts with the stem ``first``
        (every other column's name is not met at a word of that stem)."""
        known = self._named_from
        if known is None:
            found: dict[str, list[ColumnWords]] = {}
            for column in self.columns.values():
                for start in self.phrase_index(column.name):
                    found.setdefault(start, []).append(column)
            known = self._named_from = {start: tuple(c) for start, c in found.items()}
        return known.get(first, ())

    def met_at(self, starts: frozenset[str]) -> tuple[ColumnWords, ...]:
        """The columns, in catalog order, met at a word whose phrases may start with one of
        ``starts`` (:func:`.tokens.start_stems`): a phrase of the column's name starts with one,
        or one is a value of the column written whole (``exact``). At such a word no other
        column's name or value is read (see :func:`.columns.report_other_tables`)."""
        index = self._met_from
        if index is None:
            found: dict[str, set[str]] = {}
            for column in self.columns.values():
                for start in self.phrase_index(column.name):
                    found.setdefault(start, set()).add(column.name)
            for phrase, senses in self.values.items():
                if len(phrase) == 1:
                    for sense in senses:
                        if sense.exact:
                            found.setdefault(phrase[0], set()).add(sense.column)
            index = self._met_from = {
                start: tuple(c for c in self.columns.values() if c.name in names)
                for start, names in found.items()
            }
        if len(starts) == 1:
            for first in starts:  # the one stem (most words hold no negating prefix)
                return index.get(first, ())
        met = {c.name for first in starts for c in index.get(first, ())}
        return tuple(c for c in self.columns.values() if c.name in met) if met else ()

    @property
    def value_starts(self) -> frozenset[str]:
        """Every stem a value's phrase starts with (a word that is none starts no value)."""
        if self._value_starts is None:
            self._value_starts = frozenset(phrase[0] for phrase in self.values if phrase)
        return self._value_starts

    @property
    def triggers(self) -> frozenset[str]:
        """Every stem that may start a phrase of this table: a column's name or a value (so
        another table's rules can skip a word none of its phrases starts with)."""
        if self._triggers is None:
            found = {phrase[0] for phrase in self.values}
            for column in self.columns:
                found.update(phrase[0] for phrase in self.column_phrases(column))
            self._triggers = frozenset(found)
        return self._triggers

    def _column_phrases(self, column: str) -> tuple[tuple[str, ...], ...]:
        words = self.columns[column].stems
        meaningful = tuple(w for w in words if w not in _FILLER)
        phrases = {words, meaningful}
        if len(meaningful) > 1 and meaningful[-1] in _SUFFIXES:  # "company" for company_name
            phrases.add(meaningful[:-1])
        elif len(meaningful) > 1:  # "score" for lead_score
            phrases.add(meaningful[-1:])
        return tuple(p for p in phrases if p)


#: The stems of request framing ("show me", "the", "in"): never a value by themselves.
FRAMING_STEMS = frozenset(stem(w) for w in FRAMING_WORDS)


def _index(lexicon: Lexicon, synonyms: Mapping[str, tuple[str, ...]]) -> None:
    framing = FRAMING_STEMS
    for column in lexicon.columns.values():
        for phrase in lexicon.column_phrases(column.name):
            lexicon.names.setdefault(phrase, []).append(column.name)
        if not lexicon.is_category(column.name):
            continue
        values = [v for v in column.values or () if isinstance(v, str)]
        word_owners: dict[str, set[str]] = {}
        for value in values:
            for word in set(stems(value)):
                word_owners.setdefault(word, set()).add(value)
        for value in values:
            phrase = stems(value)
            if not phrase or all(w in framing for w in phrase):
                continue  # "in", "out": met only by a synonym or next to the column's name
            _add(lexicon, phrase, ValueSense(column.name, value, True))
            for word in phrase:
                if len(phrase) > 1 and word_owners[word] == {value} and word not in framing:
                    _add(lexicon, (word,), ValueSense(column.name, value, False))
        by_stem = {stems(v): v for v in values}
        for word, targets in synonyms.items():
            for target in targets:
                meant = by_stem.get(stems(target))
                if meant is not None:
                    sense = ValueSense(column.name, meant, False, word.lower())
                    _add(lexicon, stems(word), sense)
                    break
    lexicon.longest = max((len(p) for p in (*lexicon.values, *lexicon.names)), default=1)


def _add(lexicon: Lexicon, phrase: tuple[str, ...], sense: ValueSense) -> None:
    senses = lexicon.values.setdefault(phrase, [])
    if all((s.column, s.value, s.synonym) != (sense.column, sense.value, sense.synonym)
           for s in senses):  # fmt: skip
        senses.append(sense)


_PERSONAL = ("company", "given", "family", "person", "email", "phone", "job", "name")


def _is_category(roles: Mapping[str, tuple[str, ...]], column: ColumnWords) -> bool:
    if column.values is None or column.is_boolean or column.is_key:
        return False
    if len(column.values) > MAX_CATEGORY_VALUES:
        return False
    # A subject or topic column with few learned values ("Security questionnaire", "Invoice
    # copy") is a category too; bodies, notes and descriptions are prose, and names, e-mails,
    # phones and titles are never categories.
    prose = column.name in roles["text"] and not set(column.words) & _HEADING_WORDS
    return not prose and all(column.name not in roles[role] for role in _PERSONAL)


def _roles(table: str, columns: Mapping[str, ColumnWords]) -> dict[str, tuple[str, ...]]:
    """Each role's columns, told by generic words in the columns' names."""
    roles: dict[str, list[str]] = {role: [] for role in (*_PERSONAL, "text")}
    for column in columns.values():
        if column.kind != "text" or column.is_key:
            continue
        words = set(column.words)
        if words & _COMPANY_WORDS or (table in _COMPANY_TABLES and column.name == "name"):
            roles["company"].append(column.name)
        elif {"first", "name"} <= words or {"given", "name"} <= words:
            roles["given"].append(column.name)
        elif {"last", "name"} <= words or "surname" in words or {"family", "name"} <= words:
            roles["family"].append(column.name)
        elif {"full", "name"} <= words or {"contact", "name"} <= words:
            roles["person"].append(column.name)
        elif "email" in words or "mail" in words:
            roles["email"].append(column.name)
        elif words & {"phone", "mobile", "telephone"}:
            roles["phone"].append(column.name)
        elif words & {"title", "role", "position"} and table != "campaigns":
            roles["job"].append(column.name)
        elif words & _TEXT_WORDS:
            roles["text"].append(column.name)
        elif "name" in words:
            roles["name"].append(column.name)
    # The row's own e-mail first ("email"), an owner's after it.
    roles["email"].sort(key=lambda name: (name != "email", name))
    return {role: tuple(names) for role, names in roles.items()}


#: Caller synonyms in a hashable, canonical form (see :func:`synonyms_key`).
SynonymsKey = tuple[tuple[str, tuple[str, ...]], ...]


def synonyms_key(synonyms: Mapping[str, Iterable[str]] | None) -> SynonymsKey:
    """``synonyms`` as :func:`lexicon_with` takes them: sorted, lower-cased words."""
    if not synonyms:
        return ()  # most requests bring none
    return tuple(sorted((k.lower(), tuple(v)) for k, v in (synonyms or {}).items()))


@functools.lru_cache(maxsize=256)
def lexicon_with(vocabulary: SchemaVocabulary, table: str, synonyms: SynonymsKey) -> Lexicon:
    """The :class:`Lexicon` of ``table`` with the :func:`synonyms_key` ``synonyms`` (cached per
    vocabulary: a reading that asks for several tables' words keys its synonyms once)."""
    words = vocabulary.table(table)
    lexicon = Lexicon(table, words.columns if words is not None else {}, words)
    merged = dict(SYNONYMS)
    for word, targets in synonyms:
        merged[word] = (*targets, *merged.get(word, ()))
    _index(lexicon, merged)
    return lexicon


@functools.lru_cache(maxsize=256)
def triggers_besides(
    vocabulary: SchemaVocabulary, table: str, synonyms: SynonymsKey
) -> frozenset[str]:
    """Every stem that may start a phrase of a table of ``vocabulary`` other than ``table``
    (the union of their :attr:`Lexicon.triggers`): a text none of whose words may start one
    names nothing of another table."""
    found: set[str] = set()
    for name in vocabulary.tables:
        if name != table:
            found.update(lexicon_with(vocabulary, name, synonyms).triggers)
    return frozenset(found)


def lexicon_of(
    vocabulary: SchemaVocabulary, table: str, synonyms: Mapping[str, Iterable[str]] | None = None
) -> Lexicon:
    """The :class:`Lexicon` of ``table`` in ``vocabulary`` (cached per vocabulary)."""
    return lexicon_with(vocabulary, table, synonyms_key(synonyms))
