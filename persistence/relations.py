"""Related rows: relations between tables, what a read asks to include, and how children are
attached to their parents the same way on every backend.

A :class:`Relation` says that ``child_table.child_column`` refers to
``parent_table.parent_column`` (a foreign key); its ``name`` (the child table's, unless declared
otherwise) is the key under which a parent row carries its children. ``facade.read(...,
include=("conversations", "conversations.messages"))`` asks for them, one level per dot.

Bounds, identical on every backend (:func:`attach` applies them to what a backend fetched):

* children of one parent are in ``id`` order, at most the include's ``limit`` of them
  (:data:`DEFAULT_RELATED_LIMIT`, at most :data:`MAX_RELATED_LIMIT`); a parent whose list was cut
  carries a :class:`RelatedRows` with ``cut`` true;
* at most :data:`RELATED_TOTAL_LIMIT` child rows in all, taken level by level, relation by
  relation (in the order asked), parents in page order; a list the total cut is ``cut`` too,
  and the page says ``related_capped``.

Backends fetch one level of one relation at a time (``fetch(plan, parents, budget)``): each
parent's first ``limit + 1`` children matching the include's filters, in parent order; a backend
may leave out any row past the first ``budget + 1`` except each parent's first (which is all
:func:`attach` needs to flag the lists the total cut). One statement per level on PostgreSQL,
never one per parent.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from persistence.errors import ConfigurationError, InvalidQueryError, brief_repr
from persistence.query import Filter, Page, Query, is_identifier
from persistence.steps import Steps, drive

__all__ = [
    "DEFAULT_RELATED_LIMIT",
    "MAX_RELATED_LIMIT",
    "RELATED_TOTAL_LIMIT",
    "FetchRequest",
    "Include",
    "RelatedPlan",
    "RelatedRows",
    "Relation",
    "attach",
    "attach_steps",
    "check_relations",
    "fetch_columns",
    "foreign_key_relations",
    "parent_keys",
    "plan_includes",
    "read_with_related",
]

#: Children per parent when an include names no limit.
DEFAULT_RELATED_LIMIT = 20
#: The largest per-parent limit an include may ask for.
MAX_RELATED_LIMIT = 100
#: Child rows of one read, all relations and levels together.
RELATED_TOTAL_LIMIT = 1000

Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Relation:
    """``child_table.child_column`` refers to ``parent_table.parent_column``; a parent row
    carries its children under ``name`` (the child table's name unless given).

    >>> Relation("leads", "id", "conversations", "lead_id").name
    'conversations'
    """

    parent_table: str
    parent_column: str
    child_table: str
    child_column: str
    name: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", self.child_table)
        for what in ("parent_table", "parent_column", "child_table", "child_column", "name"):
            if not is_identifier(getattr(self, what)):
                raise ConfigurationError(
                    f"Relation.{what} {getattr(self, what)!r} is not a valid identifier"
                )


def foreign_key_relations(
    keys: Iterable[tuple[str, str, str, str]], readable: Collection[str] | None = None
) -> tuple[Relation, ...]:
    """Relations from foreign keys ``(parent, parent column, child, child column)``, between
    ``readable`` tables (all when ``None``), in sorted order, named after the child table; when
    one child refers to the same parent twice, each is named ``<child>_<column>``. Keys whose
    names are not identifiers the facade accepts are left out (no read could name them)."""
    kept = sorted(
        key for key in keys if readable is None or (key[0] in readable and key[2] in readable)
    )
    pairs = Counter((parent, child) for parent, _, child, _ in kept)
    relations = []
    for parent, parent_column, child, child_column in kept:
        name = child if pairs[(parent, child)] == 1 else f"{child}_{child_column}"
        try:
            relations.append(Relation(parent, parent_column, child, child_column, name))
        except ConfigurationError:
            continue
    return tuple(relations)


def check_relations(relations: Iterable[Relation]) -> tuple[Relation, ...]:
    """``relations`` as a tuple, once each is a :class:`Relation` and no parent table has two
    of the same name."""
    if isinstance(relations, Relation | str) or not isinstance(relations, Iterable):
        raise ConfigurationError("relations= must be a sequence of Relation objects")
    checked = tuple(relations)
    seen: set[tuple[str, str]] = set()
    for relation in checked:
        if not isinstance(relation, Relation):
            raise ConfigurationError(
                f"relations= takes Relation objects, not {type(relation).__name__}"
            )
        key = (relation.parent_table, relation.name)
        if key in seen:
            raise ConfigurationError(
                f"two relations of {relation.parent_table!r} are named {relation.name!r}"
            )
        seen.add(key)
    return checked


@dataclass(frozen=True, slots=True)
class Include:
    """One relation to include: a ``path`` of relation names separated by dots (each level
    from the previous one's child table), the children's ``filters`` (values coerced to the
    child columns' types like any filter) and at most ``limit`` children per parent.

    ``"conversations.messages"`` includes the messages of each included conversation (and the
    conversations, with the default limit, when not asked for on their own).
    """

    path: str
    filters: tuple[Filter, ...] = ()
    limit: int = DEFAULT_RELATED_LIMIT

    def __post_init__(self) -> None:
        if type(self.path) is not str or not all(
            is_identifier(part) for part in self.path.split(".")
        ):
            raise InvalidQueryError(
                f"include {brief_repr(self.path)} is not a relation name (lower-case identifiers "
                "separated by dots, e.g. 'conversations.messages')",
                field="include",
            )
        if isinstance(self.filters, Filter) or not isinstance(self.filters, Iterable):
            raise InvalidQueryError("Include.filters must be a sequence of Filter", field="include")
        filters = tuple(self.filters)
        if not all(isinstance(f, Filter) for f in filters):
            raise InvalidQueryError("Include.filters must be a sequence of Filter", field="include")
        object.__setattr__(self, "filters", filters)
        if type(self.limit) is not int or not 1 <= self.limit <= MAX_RELATED_LIMIT:
            raise InvalidQueryError(
                f"include limit must be an integer from 1 to {MAX_RELATED_LIMIT}, "
                f"not {brief_repr(self.limit)}",
                field="include",
            )

    @classmethod
    def of(cls, item: Include | str) -> Include:
        """``item`` as an :class:`Include` (a string is a path with the defaults)."""
        if isinstance(item, Include):
            return item
        if isinstance(item, str):
            return cls(item)
        raise InvalidQueryError(
            f"include takes relation names or Include objects, not {type(item).__name__}",
            field="include",
        )


@dataclass(frozen=True, slots=True)
class RelatedPlan:
    """One checked level of an include, as the facade hands it to a backend: the relation,
    the child columns to return, the coerced filters, the per-parent limit and the next
    levels."""

    relation: Relation
    columns: tuple[str, ...]
    filters: tuple[Filter, ...] = ()
    limit: int = DEFAULT_RELATED_LIMIT
    children: tuple[RelatedPlan, ...] = field(default=())

    @property
    def name(self) -> str:
        """The key the children sit under in each parent row."""
        return self.relation.name


class RelatedRows(list[Row]):
    """The children of one parent under one relation: a list of rows of ``table``, with
    ``cut`` true when more children match than it holds (the per-parent limit or the total cut
    it). Being this type is what tells a related list from a column's own list value."""

    __slots__ = ("cut", "table")

    def __init__(self, rows: Iterable[Row] = (), *, table: str = "", cut: bool = False) -> None:
        super().__init__(rows)
        self.table = table
        self.cut = cut

    def __repr__(self) -> str:
        return f"RelatedRows({list.__repr__(self)}, table={self.table!r}, cut={self.cut})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_related_rows, (list(self), self.table, self.cut))


def _related_rows(rows: list[Row], table: str, cut: bool) -> RelatedRows:
    return RelatedRows(rows, table=table, cut=cut)


#: ``check(relation, filters)``: the child's filters checked and coerced, and its columns to
#: return, as the facade's policy and the backend's catalog allow (raising as a read would).
CheckChild = Callable[[Relation, tuple[Filter, ...]], tuple[tuple[Filter, ...], tuple[str, ...]]]


def plan_includes(
    table: str,
    include: Iterable[Include | str],
    shown: frozenset[str] | None,
    relations: Sequence[Relation],
    check: CheckChild,
) -> tuple[RelatedPlan, ...]:
    """``include`` resolved against ``relations`` from ``table`` (whose rows show ``shown``
    columns): one plan per relation of each level; a path's missing prefixes are included
    with the defaults. ``InvalidQueryError`` for a name that is no relation of its table, or a
    parent key not among the columns read."""
    if isinstance(include, str | Include) or not isinstance(include, Iterable):
        raise InvalidQueryError(
            "include must be a sequence of relation names, e.g. include=['conversations']",
            field="include",
        )
    tree: dict[str, Include] = {}
    for item in map(Include.of, include):
        parts = item.path.split(".")
        for depth in range(1, len(parts)):
            tree.setdefault(".".join(parts[:depth]), Include(".".join(parts[:depth])))
        tree[item.path] = item
    return _level(table, "", tree, shown, relations, check) if tree else ()


def _level(
    table: str,
    prefix: str,
    tree: Mapping[str, Include],
    shown: frozenset[str] | None,
    relations: Sequence[Relation],
    check: CheckChild,
) -> tuple[RelatedPlan, ...]:
    by_name = {r.name: r for r in relations if r.parent_table == table}
    plans = []
    for path, item in tree.items():
        parent_path, _, name = path.rpartition(".")
        if parent_path != prefix:
            continue
        relation = by_name.get(name)
        if relation is None:
            raise InvalidQueryError(
                f"table {table!r} has no relation {name!r} to include; it has {sorted(by_name)}",
                field="include",
            )
        if shown is None or relation.parent_column not in shown or name in shown:
            raise InvalidQueryError(
                f"including {name!r} needs column {relation.parent_column!r} of {table!r} "
                f"among the columns read, and no column named {name!r}",
                field="include",
            )
        filters, columns = check(relation, item.filters)
        children = _level(relation.child_table, path, tree, frozenset(columns), relations, check)
        plans.append(RelatedPlan(relation, columns, filters, item.limit, children))
    return tuple(plans)


def fetch_columns(plan: RelatedPlan) -> tuple[str, ...]:
    """The child columns a backend must fetch for ``plan``: the returned ones, the join column
    and the next levels' parent columns."""
    extra = [plan.relation.child_column, *(c.relation.parent_column for c in plan.children)]
    return tuple(dict.fromkeys([*plan.columns, *extra]))


def parent_keys(parents: Sequence[Row], column: str) -> list[Any]:
    """The distinct non-NULL values of ``column`` in ``parents``, in order."""
    return list(dict.fromkeys(row[column] for row in parents if row.get(column) is not None))


class _Budget:
    __slots__ = ("capped", "remaining")

    def __init__(self, total: int) -> None:
        self.remaining = total
        self.capped = False


#: ``fetch(plan, parents, budget)``: the children of ``parents`` under ``plan`` (see the module
#: docstring for what a backend must return).
Fetch = Callable[[RelatedPlan, Sequence[Row], int], Sequence[Row]]


def read_with_related(
    read: Callable[[Query], Page], query: Query, plans: Sequence[RelatedPlan], fetch: Fetch
) -> Page:
    """The page ``read`` answers for ``query``, with each row's related rows fetched by
    ``fetch`` (a backend's one query per relation and level) and attached as :func:`attach`
    does."""
    page = read(query)
    capped = attach(page.rows, plans, fetch)
    return replace(page, related_capped=capped)


def attach(
    parents: list[Row],
    plans: Sequence[RelatedPlan],
    fetch: Fetch,
    total: int | None = None,
) -> bool:
    """Put each parent's children under each plan's name (level by level), bounded as the
    module docstring says (``total``: :data:`RELATED_TOTAL_LIMIT` unless given); return
    whether the total cut any list."""
    return drive(attach_steps(parents, plans, total), lambda asked: fetch(*asked))


#: What :func:`attach_steps` asks for: ``fetch``'s arguments; it is sent the children.
FetchRequest = tuple[RelatedPlan, Sequence[Row], int]


def attach_steps(
    parents: list[Row], plans: Sequence[RelatedPlan], total: int | None = None
) -> Steps[FetchRequest, bool]:
    """:func:`attach` as steps (see :mod:`persistence.steps`): each fetch is yielded, so a
    backend fetches the children blocking or awaited with one implementation of the bounds."""
    budget = _Budget(RELATED_TOTAL_LIMIT if total is None else total)
    yield from _attach(parents, plans, budget)
    return budget.capped


def _attach(
    parents: list[Row], plans: Sequence[RelatedPlan], budget: _Budget
) -> Steps[FetchRequest, None]:
    for plan in plans:
        relation = plan.relation
        fetched = (yield (plan, parents, budget.remaining)) if parents else ()
        groups: dict[Any, list[Row]] = {}
        for child in fetched:
            groups.setdefault(child[relation.child_column], []).append(child)
        kept: list[Row] = []
        for parent in parents:
            key = parent.get(relation.parent_column)
            group = groups.get(key, []) if key is not None else []
            cut = len(group) > plan.limit
            group = group[: plan.limit]
            if len(group) > budget.remaining:
                group = group[: budget.remaining]
                cut = budget.capped = True
            budget.remaining -= len(group)
            children = RelatedRows((dict(c) for c in group), table=relation.child_table, cut=cut)
            parent[plan.name] = children
            kept.extend(children)
        yield from _attach(kept, plan.children, budget)
        shown = {*plan.columns, *(c.name for c in plan.children)}
        for child in kept:
            for column in [c for c in child if c not in shown]:
                del child[column]
