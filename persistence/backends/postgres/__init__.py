"""The PostgreSQL backend (any PostgreSQL, including Supabase's database by its DSN).

Read-only is enforced by the database, not only by this code: the backend's connections open
with ``default_transaction_read_only=on`` and ``statement_timeout`` as session defaults, so every
read is one statement (one execute, one round trip) in a server-side ``READ ONLY`` transaction.
Behind a transaction pooler (``transaction_pooler=True``), where session settings do not stick,
each read sends ``BEGIN READ ONLY``, ``SET LOCAL statement_timeout``, the ``SELECT`` and
``COMMIT`` as four executes in one pipeline instead. At start-up a read-only backend refuses a
superuser or ``BYPASSRLS`` role unless ``allow_privileged=True``. Writes (``PersistenceAgent``
only) run in explicit ``READ WRITE`` transactions with ``SET LOCAL statement_timeout``.

The package's face: the backend (:mod:`~persistence.backends.postgres.backend`, one class), its
factory hook (:mod:`~persistence.backends.postgres.factory`) and what ``rag-agent doctor`` reads
(:mod:`~persistence.backends.postgres.inspect`).

Example::

    facade = create_read_only_facade(kind="postgres", dsn="postgresql://reader@db/app")
    with facade:
        page = facade.read("leads", [Filter("email", Op.EQ, "a@x.io")], limit=10)
"""

from persistence.errors import ConfigurationError

try:
    import psycopg  # noqa: F401 - the driver first: without it, the hint below
    import psycopg_pool  # noqa: F401

    from persistence.backends.postgres.backend import PostgresBackend
    from persistence.backends.postgres.catalog import IndexFacts, RoleFacts
    from persistence.backends.postgres.factory import create_backend
    from persistence.backends.postgres.inspect import DatabaseFacts, data_target, inspect_database
    from persistence.backends.postgres.vectors import SearchSettings
    from persistence.backends.postgres.words import SpellingFacts
except ImportError as exc:  # pragma: no cover - exercised only without the extra installed
    raise ConfigurationError(
        "the postgres backend needs psycopg 3 and psycopg_pool: "
        'pip install "readonly-rag[postgres]"'
    ) from exc

__all__ = [
    "DatabaseFacts",
    "IndexFacts",
    "PostgresBackend",
    "RoleFacts",
    "SearchSettings",
    "SpellingFacts",
    "create_backend",
    "data_target",
    "inspect_database",
]
