"""What a checked request becomes: the backend call it leads to (:class:`BackendCall`), and the
parts of a request built from a caller's arguments (filters and names as sequences, a query
rebuilt from checked parts, the keyword options the awaited reads share with the blocking ones).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields
from typing import Any, NamedTuple, TypedDict

from persistence.aggregate import Metric
from persistence.errors import InvalidQueryError
from persistence.query import Filter, Order, Query
from persistence.relations import Include
from persistence.search import SearchMode

__all__ = [
    "ROW_CALLS",
    "AggregateOptions",
    "BackendCall",
    "ReadOptions",
    "SearchOptions",
    "check_options",
    "checked_replace",
    "filters_of",
    "names_of",
]

#: The backend calls that return rows: what redaction applies to.
ROW_CALLS = frozenset({"read", "read_related", "search"})


class BackendCall(NamedTuple):
    """The backend method a checked request leads to (``read``, ``count``, ...) and its
    arguments: what the facade calls, or awaits as its ``a``-twin."""

    method: str
    args: tuple[Any, ...]
    #: A read plan's backend reader (see persistence.facade.read_plans): ``read``/``aread`` it
    #: instead of the backend's method.
    reader: Any = None


class ReadOptions(TypedDict, total=False):
    """The keyword options of ``read`` (and ``aread``)."""

    columns: Sequence[str] | None
    order: Iterable[Order | str]
    limit: int | None
    offset: int
    include: Iterable[str | Include]
    exact_total: bool


class SearchOptions(TypedDict, total=False):
    """The keyword options of ``search`` (and ``asearch``)."""

    filters: Iterable[Filter]
    k: int
    offset: int
    mode: SearchMode | str
    exact_total: bool


class AggregateOptions(TypedDict, total=False):
    """The keyword options of ``aggregate`` (and ``aaggregate``)."""

    group_by: Iterable[str]
    metrics: Iterable[Metric | str]
    limit: int | None


def check_options(method: str, options: Mapping[str, Any], accepted: type) -> None:
    """``TypeError``, as for any keyword a method does not take, for a key of ``options`` that
    is not one of the ``accepted`` TypedDict's."""
    known = accepted.__annotations__
    for name in options:
        if name not in known:
            raise TypeError(f"{method}() got an unexpected keyword argument {name!r}")


_QUERY_FIELDS = tuple(f.name for f in fields(Query))


def checked_replace(query: Query, **changes: Any) -> Query:
    """``replace(query, **changes)`` for values checked already, without checking them again.

    Only for what a ``Query`` would accept as given: coerced ``Filter`` objects (built, so
    validated), or the policy's columns (identifiers, checked when the policy was made) as a
    tuple. ``replace`` would run every check of the query anew, a dozen identifier matches for
    a wide table, on every read.
    """
    new = object.__new__(Query)
    for name in _QUERY_FIELDS:
        object.__setattr__(new, name, changes[name] if name in changes else getattr(query, name))
    return new


def filters_of(filters: Iterable[Filter]) -> tuple[Filter, ...]:
    """A caller's ``filters`` as a tuple; a lone filter, a string or a mapping is refused."""
    if type(filters) is tuple:  # the common call: no ABC checks (a Mapping is never a tuple)
        return filters
    if isinstance(filters, Filter | str | Mapping) or not isinstance(filters, Iterable):
        raise InvalidQueryError(
            "filters must be a sequence of Filter objects, e.g. [Filter('email', Op.EQ, 'a@x.io')]",
            field="filters",
        )
    return tuple(filters)


def names_of(values: Iterable[Any], what: str) -> tuple[Any, ...]:
    """A caller's column names (``columns``, ``order``) as a tuple."""
    # tuple(5) would raise a bare TypeError, and tuple("email") would split the name into
    # letters: say what was expected instead.
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise InvalidQueryError(
            f"{what} must be a sequence of column names, not {type(values).__name__}, "
            f"e.g. {what}=['email']",
            field=what,
        )
    return tuple(values)
