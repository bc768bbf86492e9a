"""The database's own vocabulary: what each readable table's columns are called, what kind they
are, what they refer to, and the values of the columns that hold few of them.

Free text meets a deployment's schema here rather than a list written for one sample database:
``leads.stage`` holding ``won`` and ``lost``, ``clients.tier`` an enum, ``sequences.enabled`` a
boolean are learned from the catalog and the data, and every column and value carries its words
(``lead_score`` → "lead score", "score"; ``closed_won`` → "closed won") and their stems, by the
Snowball English stemmer PostgreSQL's ``english`` configuration uses, so "referrals", "qualify"
and "enabled" meet ``referral``, ``qualified`` and ``is_enabled`` the same way on every backend.

:meth:`SchemaVocabulary.learn` reads only through a :class:`ReadOnlyPersistenceFacade`, within
its allow-lists, and boundedly: the catalog's column types and relations (enum labels come with
the types), then for each text column its distinct values when it holds at most
:data:`MAX_VALUES` (the facade's ``distinct_values``, under the backend's statement timeout,
which on PostgreSQL gives up on a column of many values after its first rows); no row is read.
A column with more values, long values or a redaction rule is kept without values, and
:attr:`ColumnWords.skipped` says why. Nothing is learned from a column the policy hides.

>>> from persistence import MemoryStore, create_persistence_agent, create_read_only_facade
>>> store = MemoryStore()
>>> _ = create_persistence_agent(kind="memory", store=store).batch(
...     "leads", [{"email": "a@x.io", "status": "won"}, {"email": "b@x.io", "status": "lost"}])
>>> vocabulary = SchemaVocabulary.learn(create_read_only_facade(kind="memory", store=store))
>>> vocabulary.table("leads").columns["status"].values
('lost', 'won')
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

from persistence.aggregate import DistinctValues
from persistence.errors import BackendUnavailableError, PersistenceError
from persistence.relations import Relation
from persistence.values.types import ColumnKind, ColumnType

__all__ = [
    "MAX_VALUES",
    "MAX_VALUE_LENGTH",
    "ColumnWords",
    "SchemaVocabulary",
    "TableWords",
    "stem",
    "stems",
    "words_of",
]

#: At most this many distinct values are learned for a column; one with more is skipped.
MAX_VALUES = 200
#: A value longer than this is text, not a category: its column is skipped.
MAX_VALUE_LENGTH = 60


class Readable(Protocol):
    """What learning reads: the read-only facade's catalog and its columns' distinct values."""

    def tables(self) -> tuple[str, ...]: ...
    def column_types(self, table: str) -> Mapping[str, ColumnType]: ...
    def relations(self, table: str) -> tuple[Relation, ...]: ...
    def redacted_columns(self, table: str) -> Mapping[str, str]: ...
    def distinct_values(self, table: str, column: str, *, limit: int) -> DistinctValues: ...


_WORD_RE = re.compile(r"[^\W_]+", re.UNICODE)
_NUMERIC_KINDS = frozenset({ColumnKind.INTEGER, ColumnKind.NUMERIC, ColumnKind.FLOAT})
_DATE_KINDS = frozenset({ColumnKind.DATE, ColumnKind.TIMESTAMP, ColumnKind.TIMESTAMPTZ})


@functools.cache
def _stemmer() -> Any:
    import snowballstemmer  # type: ignore[import-untyped]  # no stubs

    return snowballstemmer.stemmer("english")


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """The Snowball English stem of one lower-case word (PostgreSQL's ``english_stem``)."""
    return str(_stemmer().stemWord(word.lower()))


@functools.lru_cache(maxsize=65536)
def words_of(text: str) -> tuple[str, ...]:
    """The lower-case words of a name or value: ``lead_score`` → ``("lead", "score")``."""
    return tuple(word.lower() for word in _WORD_RE.findall(text))


@functools.lru_cache(maxsize=65536)
def stems(text: str) -> tuple[str, ...]:
    """The stems of :func:`words_of`: ``closed_won`` → ``("close", "won")``."""
    return tuple(stem(word) for word in words_of(text))


@dataclass(frozen=True, slots=True)
class ColumnWords:
    """One column: its name, type, words, what it refers to, and its learned values.

    ``values`` are the column's distinct values (enum labels in declaration order, ``True`` and
    ``False`` for a boolean, else the data's, sorted), ``None`` when not learned; ``skipped``
    then says why (many values, long values, redacted, not a text column...).
    """

    name: str
    type: ColumnType
    values: tuple[Any, ...] | None = None
    values_source: str | None = None
    skipped: str | None = None
    references: str | None = None

    @property
    def kind(self) -> ColumnKind:
        return self.type.kind

    @property
    def words(self) -> tuple[str, ...]:
        return words_of(self.name)

    @property
    def stems(self) -> tuple[str, ...]:
        return stems(self.name)

    @property
    def is_numeric(self) -> bool:
        return self.kind in _NUMERIC_KINDS and not self.is_key

    @property
    def is_date(self) -> bool:
        return self.kind in _DATE_KINDS

    @property
    def is_boolean(self) -> bool:
        return self.kind is ColumnKind.BOOLEAN

    @property
    def is_key(self) -> bool:
        """The row's own ``id`` or a reference to another table's."""
        return self.name == "id" or self.references is not None or self.name.endswith("_id")

    def to_dict(self) -> dict[str, Any]:
        described: dict[str, Any] = {"name": self.name, "type": self.type.name}
        described["kind"] = str(self.kind)
        if self.references is not None:
            described["references"] = self.references
        if self.values is not None:
            described["values"] = list(self.values)
            described["values_from"] = self.values_source
        if self.skipped is not None:
            described["skipped"] = self.skipped
        return described


@dataclass(frozen=True, slots=True)
class TableWords:
    """One table: its columns in catalog order and its relations in either direction."""

    name: str
    columns: Mapping[str, ColumnWords]
    relations: tuple[Relation, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "columns", MappingProxyType(dict(self.columns)))

    def learned_values(self) -> dict[str, tuple[Any, ...]]:
        """The values learned from the data, per few-valued column that has any (not enum
        labels or a boolean's two: the catalog says those)."""
        return {
            c.name: c.values
            for c in self.columns.values()
            if c.values and c.values_source == "data"
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.name,
            "columns": [column.to_dict() for column in self.columns.values()],
            "relations": [
                {
                    "table": r.child_table if r.parent_table == self.name else r.parent_table,
                    "via": f"{r.child_table}.{r.child_column} -> "
                    f"{r.parent_table}.{r.parent_column}",
                }
                for r in self.relations
            ],
        }


@dataclass(frozen=True, eq=False)  # hashed by identity: a cache key for what was read with it
class SchemaVocabulary:
    """Every readable table's :class:`TableWords`, learned by :meth:`learn`."""

    tables: Mapping[str, TableWords] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tables", MappingProxyType(dict(self.tables)))

    def table(self, name: str) -> TableWords | None:
        return self.tables.get(name)

    def to_dict(self) -> dict[str, Any]:
        return {"tables": [table.to_dict() for table in self.tables.values()]}

    @classmethod
    def learn(
        cls,
        facade: Readable,
        *,
        tables: Iterable[str] | None = None,
        max_values: int = MAX_VALUES,
    ) -> SchemaVocabulary:
        """Learn the vocabulary of ``tables`` (every readable table by default) through
        ``facade``; a table the backend cannot describe is left out, never an error."""
        names = tuple(facade.tables() if tables is None else tables)
        relations = _relations(facade, names)
        learned: dict[str, TableWords] = {}
        for table in names:
            try:
                types = facade.column_types(table)
            except BackendUnavailableError:
                raise  # no database to learn from: the caller says so, never an empty vocabulary
            except PersistenceError:
                continue
            if not types:  # the backend cannot tell (a Supabase project hiding its description)
                continue
            references = {
                r.child_column: r.parent_table for r in relations if r.child_table == table
            }
            redacted = facade.redacted_columns(table)
            columns = {
                name: _learn_column(
                    facade, table, name, kind, references.get(name), redacted, max_values
                )
                for name, kind in types.items()
            }  # fmt: skip
            mine = tuple(r for r in relations if table in (r.parent_table, r.child_table))
            learned[table] = TableWords(table, columns, mine)
        return cls(learned)


def _relations(facade: Readable, tables: tuple[str, ...]) -> tuple[Relation, ...]:
    found: dict[tuple[str, str, str, str], Relation] = {}
    for table in tables:
        try:
            offered = facade.relations(table)
        except BackendUnavailableError:
            raise
        except PersistenceError:
            continue
        for relation in offered:
            key = (r := relation).parent_table, r.parent_column, r.child_table, r.child_column
            found.setdefault(key, relation)
    return tuple(found.values())


def _learn_column(
    facade: Readable,
    table: str,
    name: str,
    column_type: ColumnType,
    references: str | None,
    redacted: Mapping[str, str],
    max_values: int,
) -> ColumnWords:
    plain = ColumnWords(name, column_type, references=references)
    if name in redacted:
        return _skip(plain, f"redacted ({redacted[name]})")
    if column_type.labels is not None:
        return _with(plain, column_type.labels, "enum")
    if column_type.kind is ColumnKind.BOOLEAN:
        return _with(plain, (True, False), "type")
    if column_type.kind is not ColumnKind.TEXT or plain.is_key:
        return plain
    try:
        result = facade.distinct_values(table, name, limit=max_values)
    except BackendUnavailableError:
        raise
    except PersistenceError as exc:  # a timeout, aggregates disabled …: kept without values
        return _skip(plain, f"not readable: {type(exc).__name__}")
    if result.capped:
        return _skip(plain, f"more than {max_values} distinct values")
    values = result.values
    if any(not isinstance(v, str) or len(v) > MAX_VALUE_LENGTH for v in values):
        return _skip(plain, f"values longer than {MAX_VALUE_LENGTH} characters")
    return _with(plain, tuple(sorted(values)), "data")


def _with(column: ColumnWords, values: Iterable[Any], source: str) -> ColumnWords:
    return ColumnWords(
        column.name, column.type, tuple(values), source, None, column.references
    )  # fmt: skip


def _skip(column: ColumnWords, reason: str) -> ColumnWords:
    return ColumnWords(column.name, column.type, None, None, reason, column.references)
