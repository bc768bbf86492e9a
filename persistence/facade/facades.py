"""The two facades: ``ReadOnlyPersistenceFacade`` for agents, ``PersistenceAgent`` for trusted
writers; both read through :class:`~persistence.facade.reader._Reader`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, NoReturn

from persistence.errors import InvalidQueryError
from persistence.facade.calls import filters_of
from persistence.facade.reader import _Reader
from persistence.query import Filter, Query
from persistence.read_only import refuse_write

__all__ = ["PersistenceAgent", "ReadOnlyPersistenceFacade"]

Row = dict[str, Any]


def _refusing(
    operation: str,
    doc: str = "Always raises: the facade is read-only.",
    *,
    names_table: bool = True,
) -> Callable[..., NoReturn]:
    """A write-shaped method that refuses ``operation``, naming the table it was given unless
    ``names_table`` is false (``rpc`` and ``execute`` take a function or a statement)."""

    def refuse(self: object, table: object = None, *args: object, **kwargs: object) -> NoReturn:
        refuse_write(operation, table if names_table else None, "this facade")

    refuse.__name__ = refuse.__qualname__ = operation
    refuse.__doc__ = doc
    return refuse


class ReadOnlyPersistenceFacade(_Reader):
    """Reads allow-listed tables; every write-shaped method raises ``PersistencePermissionError``.

    Built by :func:`persistence.create_read_only_facade` with an empty write allow-list::

        facade = create_read_only_facade(kind="memory")
        page = facade.read("leads", [Filter("email", Op.EQ, "a@x.io")], limit=10)
    """

    __slots__ = ()

    write = _refusing("write")
    insert = _refusing("insert")
    upsert = _refusing("upsert")
    update = _refusing("update")
    delete = _refusing("delete")
    batch = _refusing("batch")
    rpc = _refusing(
        "rpc",
        "Always raises: no stored procedure is callable through the facade.",
        names_table=False,
    )
    execute = _refusing(
        "execute",
        "Always raises: no raw statement is executable through the facade.",
        names_table=False,
    )


class PersistenceAgent(_Reader):
    """Reads and writes within its write allow-list (business tables minus governance tables).

    For seeding data and trusted callers; never hand one to an LLM.
    """

    __slots__ = ()

    def write(self, table: str, row: Mapping[str, Any]) -> Row:
        """Insert one row; return it as stored (with its ``id``)."""
        return self.batch(table, [row])[0]

    def batch(self, table: str, rows: Iterable[Mapping[str, Any]]) -> list[Row]:
        """Insert ``rows`` atomically (all or none); return them as stored."""
        table = self.policy.check_write(table, "batch")
        checked = self._checked_rows(table, rows, "batch")
        if not checked:
            return []
        try:
            return self._backend().insert(table, checked)
        finally:
            # Even after a failure: the write may have happened before the error reached us.
            self._note_write(table)

    def upsert(
        self,
        table: str,
        rows: Mapping[str, Any] | Iterable[Mapping[str, Any]],
        *,
        on_conflict: str = "id",
    ) -> list[Row]:
        """Insert, or update the given columns where ``on_conflict`` matches an existing row."""
        table = self.policy.check_write(table, "upsert")
        items = [rows] if isinstance(rows, Mapping) else rows
        checked = self._checked_rows(table, items, "upsert")
        self.policy.check_columns(table, [on_conflict], "upsert")
        if not checked:
            return []
        try:
            return self._backend().upsert(table, checked, on_conflict)
        finally:
            self._note_write(table)

    def delete(self, table: str, filters: Iterable[Filter]) -> int:
        """Delete the rows matching ``filters`` (at least one: no table is emptied by accident)."""
        table = self.policy.check_write(table, "delete")
        query = Query(table, filters=filters_of(filters))
        if not query.filters:
            raise InvalidQueryError("delete needs at least one filter", field="filters")
        query, _ = self._checked(query, "delete")
        try:
            return self._backend().delete(table, query.filters)
        finally:
            self._note_write(table)

    def _checked_rows(
        self, table: str, rows: Iterable[Mapping[str, Any]], operation: str
    ) -> list[Row]:
        checked: list[Row] = []
        for row in rows:
            if not isinstance(row, Mapping):
                raise InvalidQueryError(
                    f"{operation} takes mappings, not {type(row).__name__}", field="rows"
                )
            self.policy.check_columns(table, row.keys(), operation)
            checked.append(dict(row))
        return checked
