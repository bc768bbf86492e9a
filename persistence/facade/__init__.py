"""The facades callers hold: ``ReadOnlyPersistenceFacade`` for agents, ``PersistenceAgent`` for
trusted writers.

Every read goes through the same checks, in this order, before a backend is touched: table in the
allow-list (exactly), query well-formed, columns allowed by the policy and known to the backend,
operators declared by the backend's capabilities; then every filter value is coerced to its column's
type from the backend's catalog (:mod:`persistence.values.types`), so no backend ever sees a
``"42"`` meant for a ``bigint``. ``check_filters`` runs exactly these steps without reading. The
backend itself is private: no public attribute hands it out.

Where: the checks and the reads, with their awaited twins, are one class,
:class:`~persistence.facade.reader._Reader`; the two facades are in
:mod:`~persistence.facade.facades`; what a checked request becomes in
:mod:`~persistence.facade.calls`, the memo of checked read shapes in
:mod:`~persistence.facade.read_plans`, the write versions in :mod:`~persistence.facade.versions`.
"""

from persistence.facade.facades import PersistenceAgent, ReadOnlyPersistenceFacade

__all__ = ["PersistenceAgent", "ReadOnlyPersistenceFacade"]
