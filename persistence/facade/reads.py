"""The facade's reads: columns and types, ``read`` with relations, ``count``, ``aggregate``, and
their awaited twins."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from persistence.aggregate import AggregateResult, Metric, check_aggregate, check_kinds
from persistence.errors import UnsupportedOperatorError
from persistence.facade.core import (
    _BackendCall,
    _checked_replace,
    _filters,
    _names,
    _ReaderCore,
)
from persistence.facade.read_plans import ReadPlan, read_shape, statement_key
from persistence.query import Filter, Order, Page, Query, _check_count, _new_query
from persistence.relations import Include, RelatedPlan, Relation, plan_includes
from persistence.values.types import ColumnType, coerce_filters


class _Reads(_ReaderCore):
    """``read``, ``count``, ``aggregate`` (and their ``a``-twins), checked by the core."""

    __slots__ = ()

    def columns(self, table: str) -> tuple[str, ...]:
        """The readable columns of ``table``, sorted (empty when the backend cannot tell)."""
        table = self.policy.check_read(table, "columns")
        known = self._known(table)[0] or frozenset()
        allowed = self.policy.allowed_columns(table)
        return tuple(sorted(known if allowed is None else known & allowed))

    def column_types(self, table: str) -> Mapping[str, ColumnType]:
        """The readable columns of ``table`` and their types, in table order.

        Only columns the policy allows and the backend knows; an empty mapping when the backend
        cannot tell (a Supabase project that hides its API description). Filter values on these
        columns are coerced to these types (see :mod:`persistence.values.types`).

        >>> facade.column_types("leads")["created_at"].kind
        <ColumnKind.TIMESTAMPTZ: 'timestamptz'>
        """
        table = self.policy.check_read(table, "column_types")
        types = self._backend().column_types(table) or {}
        allowed = self.policy.allowed_columns(table)
        return MappingProxyType({c: t for c, t in types.items() if allowed is None or c in allowed})

    def check_filters(self, table: str, filters: Iterable[Filter]) -> tuple[Filter, ...]:
        """``filters`` as a read of ``table`` would send them: checked, values coerced.

        The same checks, in the same order, and the same errors as :meth:`read`: the table is
        allowed, every column is allowed by the policy and known to the backend, every operator
        is declared by the backend's capabilities, and every value is coerced to its column's
        type (``InvalidQueryError`` naming the column and type when it cannot be). No row is
        read: only the backend's cached catalog is consulted, so it is cheap enough to call once
        per condition, and its answer depends only on its arguments and the catalog.

        >>> facade.check_filters("leads", [Filter("id", Op.EQ, "42")])
        (Filter(column='id', op=<Op.EQ: 'eq'>, value=42),)
        """
        table = self.policy.check_read(table, "read")
        return self._checked(Query(table, filters=_filters(filters)), "read")[0].filters

    def read(
        self,
        table: str,
        filters: Iterable[Filter] = (),
        *,
        columns: Sequence[str] | None = None,
        order: Iterable[Order | str] = (),
        limit: int | None = None,
        offset: int = 0,
        include: Iterable[str | Include] = (),
    ) -> Page:
        """One page of ``table`` matching all ``filters``, with the total number of matches.

        Filter values are coerced to their columns' types first (see :meth:`check_filters`).
        ``include`` names relations (:meth:`relations`) whose rows each parent row carries under
        the relation's name, e.g. ``("conversations", "conversations.messages")`` or
        :class:`~persistence.relations.Include` objects with child filters and a per-parent
        limit; bounded per parent and in total (see :mod:`persistence.relations`). The child
        table must be allowed too, its column policy applies, and its filter values are coerced
        like any other.

        >>> facade.read("leads", [Filter("company_name", Op.ICONTAINS, "acme")], limit=20)
        >>> facade.read("leads", [Filter("id", Op.EQ, 7)], include=["conversations"]).rows[0][
        ...     "conversations"]
        """
        page: Page = self._perform(
            self._read_call(table, filters, columns, order, limit, offset, include)
        )
        return page

    async def aread(
        self,
        table: str,
        filters: Iterable[Filter] = (),
        *,
        columns: Sequence[str] | None = None,
        order: Iterable[Order | str] = (),
        limit: int | None = None,
        offset: int = 0,
        include: Iterable[str | Include] = (),
    ) -> Page:
        """:meth:`read`, awaited: the same checks, the backend's I/O on the running loop."""
        await self.aprepare()
        page: Page = await self._perform_async(
            self._read_call(table, filters, columns, order, limit, offset, include)
        )
        return page

    def _read_call(
        self,
        table: str,
        filters: Iterable[Filter],
        columns: Sequence[str] | None,
        order: Iterable[Order | str],
        limit: int | None,
        offset: int,
        include: Iterable[str | Include],
    ) -> _BackendCall:
        """The checks of :meth:`read` and the backend call they lead to."""
        table = self.policy.check_read(table, "read")
        filters = _filters(filters)
        if include == ():
            shape = read_shape(table, filters, columns, order)
            if shape is not None:
                query, reader = self._planned(shape, table, filters, columns, order, limit, offset)
                return _BackendCall("read", (query,), reader)
        query, known, _ = self._checked_read(table, filters, columns, order, limit, offset)
        # The default: no relation to resolve (nor the backend's relations to list).
        plans = () if include == () else self._plans_of(table, include, query.columns, known)
        if not plans:
            return _BackendCall("read", (query,))
        if not callable(getattr(self._backend(), "read_related", None)):
            raise UnsupportedOperatorError(
                f"backend {self._backend().name!r} cannot read related rows",
                operator="include",
                backend=self._backend().name,
            )
        return _BackendCall("read_related", (query, plans))

    def _checked_read(
        self,
        table: str,
        filters: tuple[Filter, ...],
        columns: Sequence[str] | None,
        order: Iterable[Order | str],
        limit: int | None,
        offset: int,
        facts: tuple[frozenset[str] | None, Mapping[str, ColumnType]] | None = None,
    ) -> tuple[Query, frozenset[str] | None, Mapping[str, ColumnType]]:
        """Every check of a read of the allowed ``table``: the query as the backend gets it,
        and the catalog facts it was checked on (``facts``, when the caller asked already)."""
        query = Query(
            table,
            filters=filters,
            columns=None if columns is None else _names(columns, "columns"),
            order=_names(order, "order"),  # Query turns names into Order
            limit=limit,
            offset=offset,
        )
        query, known, types = self._checked_facts(query, "read", facts)
        if columns is None:
            # The policy's columns the backend knows: allowed and known by construction.
            readable = self._policy_columns(table, known)
            if readable is not None:
                query = _checked_replace(query, columns=readable)
        return query, known, types

    def _planned(
        self,
        shape: Hashable,
        table: str,
        filters: tuple[Filter, ...],
        columns: Sequence[str] | None,
        order: Iterable[Order | str],
        limit: int | None,
        offset: int,
    ) -> tuple[Query, Any]:
        """:meth:`_checked_read` by the shape's plan: the shape's decisions made once, the
        values checked and coerced on every call (see :mod:`persistence.facade.read_plans`); with
        the
        backend's reader of the shape, if it has one."""
        plan = self._plans.get(shape)
        facts = None
        if plan is not None:
            # The policy accepted this shape already: the backend may be asked first.
            facts = self._known(table)
            if plan.current(*facts):
                # Query's own checks of the values, in its order: limit, offset, the filters'.
                _check_count(limit, "limit", optional=True)
                _check_count(offset, "offset", optional=False)
                coerced = coerce_filters(plan.table, filters, facts[1])
                query = _new_query(plan.table, coerced, plan.columns, plan.order, limit, offset)
                reader = plan.reader
                if reader is not None and statement_key(coerced) != plan.reader_key:
                    reader = None  # another statement: the backend's read plans it
                return query, reader
        query, known, types = self._checked_read(
            table, filters, columns, order, limit, offset, facts
        )
        prepare = getattr(self._backend(), "read_statement", None)
        # The first read of a shape goes through the backend's own read (and its checks).
        reader = prepare(query) if callable(prepare) else None
        plan = ReadPlan(
            query.table,
            query.columns,
            query.order,
            known,
            types,
            reader,
            statement_key(query.filters),
        )
        self._plans.put(shape, plan)
        return query, None

    def relations(self, table: str) -> tuple[Relation, ...]:
        """The relations ``include`` may follow from ``table``: the backend's (foreign keys of
        the catalog, or declared ones) whose child table is allowed and whose join columns the
        policies allow on both sides."""
        table = self.policy.check_read(table, "relations")
        return tuple(r for r in self._relations() if r.parent_table == table and self._open(r))

    def _relations(self) -> tuple[Relation, ...]:
        own = getattr(self._backend(), "relations", None)
        return tuple(own()) if callable(own) else ()

    def _open(self, relation: Relation) -> bool:
        policy = self.policy
        if relation.child_table not in policy.read_tables:
            return False
        parent = policy.allowed_columns(relation.parent_table)
        child = policy.allowed_columns(relation.child_table)
        return (parent is None or relation.parent_column in parent) and (
            child is None or relation.child_column in child
        )

    def _plans_of(
        self,
        table: str,
        include: Iterable[str | Include],
        columns: Sequence[str] | None,
        known: frozenset[str] | None,
    ) -> tuple[RelatedPlan, ...]:
        """``include`` checked and resolved into plans, one per relation of each level."""
        shown = frozenset(columns) if columns is not None else known
        # Relations to a table outside the allow-list are not offered (nor named in errors).
        readable = [r for r in self._relations() if r.child_table in self.policy.read_tables]
        return plan_includes(table, include, shown, readable, self._child)

    def _child(
        self, relation: Relation, filters: tuple[Filter, ...]
    ) -> tuple[tuple[Filter, ...], tuple[str, ...]]:
        """The child table of ``relation`` checked like a read of it (allowed, join column
        and filter columns allowed and known, values coerced): the filters and the columns."""
        child = self.policy.check_read(relation.child_table, "read")
        probe = Query(child, filters=filters, columns=(relation.child_column,))
        checked, known = self._checked(probe, "read")
        types = self._backend().column_types(child)
        return checked.filters, self._policy_columns(child, known) or tuple(
            types or sorted(known or ())
        )

    def count(self, table: str, filters: Iterable[Filter] = ()) -> int:
        """How many rows of ``table`` match all ``filters`` (values coerced as by :meth:`read`)."""
        count: int = self._perform(self._count_call(table, filters))
        return count

    async def acount(self, table: str, filters: Iterable[Filter] = ()) -> int:
        """:meth:`count`, awaited."""
        await self.aprepare()
        count: int = await self._perform_async(self._count_call(table, filters))
        return count

    def _count_call(self, table: str, filters: Iterable[Filter]) -> _BackendCall:
        table = self.policy.check_read(table, "count")
        query, _ = self._checked(Query(table, filters=_filters(filters)), "count")
        return _BackendCall("count", (table, query.filters))

    def aggregate(
        self,
        table: str,
        filters: Iterable[Filter] = (),
        *,
        group_by: Iterable[str] = (),
        metrics: Iterable[Metric | str] = ("count",),
        limit: int | None = None,
    ) -> AggregateResult:
        """``metrics`` per group of the rows of ``table`` matching all ``filters``.

        Metrics are ``"count"`` or ``"<function>:<column>"`` (``count_distinct``, ``sum``,
        ``avg``, ``min``, ``max``) or :class:`~persistence.aggregate.Metric` objects; at most
        three ``group_by`` columns; groups in key order, at most ``limit`` of them (100 by
        default, at most 1000), ``capped`` when more existed. Grouped and aggregated columns
        pass the same policy and catalog checks as read columns, filters the same checks and
        coercion as :meth:`read`; a metric the column's type cannot take (``sum`` of text) is an
        ``InvalidQueryError``, one the backend does not serve an ``UnsupportedOperatorError``.
        Result types and NULL handling: :mod:`persistence.aggregate`.

        >>> facade.aggregate("leads", group_by=["status"], metrics=["count", "avg:score"])
        """
        result: AggregateResult = self._perform(
            self._aggregate_call(table, filters, group_by, metrics, limit)
        )
        return result

    async def aaggregate(
        self,
        table: str,
        filters: Iterable[Filter] = (),
        *,
        group_by: Iterable[str] = (),
        metrics: Iterable[Metric | str] = ("count",),
        limit: int | None = None,
    ) -> AggregateResult:
        """:meth:`aggregate`, awaited."""
        await self.aprepare()
        result: AggregateResult = await self._perform_async(
            self._aggregate_call(table, filters, group_by, metrics, limit)
        )
        return result

    def _aggregate_call(
        self,
        table: str,
        filters: Iterable[Filter],
        group_by: Iterable[str],
        metrics: Iterable[Metric | str],
        limit: int | None,
    ) -> _BackendCall:
        table = self.policy.check_read(table, "aggregate")
        names, parsed, cap = check_aggregate(group_by, metrics, limit)
        measured = [m.column for m in parsed if m.column is not None]
        columns = tuple(dict.fromkeys((*names, *measured)))
        query = Query(table, filters=_filters(filters), columns=columns or None)
        query, _ = self._checked(query, "aggregate")
        if self.redaction is not None:
            self.redaction.check_aggregate(
                table, names, [(m.function, m.column) for m in parsed if m.column is not None]
            )
        check_kinds(table, names, parsed, self._known(table)[1])
        capabilities = self._backend().capabilities
        for metric in parsed:
            if not capabilities.aggregates_with(metric.function):
                raise UnsupportedOperatorError(
                    f"backend {self._backend().name!r} cannot compute {metric.function!r}",
                    operator=metric.function,
                    backend=self._backend().name,
                )
        return _BackendCall("aggregate", (replace(query, columns=None), names, parsed, cap))
