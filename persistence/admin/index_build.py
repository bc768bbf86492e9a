"""The admin step that stores a table's row vectors for the semantic leg (``rag-agent index``).

It writes through its own connection as a *writer* role, never through the read-only facade,
which only reads what it wrote. The side table of ``T`` is ``T_embeddings`` in ``T``'s schema::

    CREATE TABLE T_embeddings (
        row_id      <T.id's type> PRIMARY KEY,  -- T.id
        text_hash   bytea NOT NULL,             -- SHA-256 of the embedded text and its columns
        model_id    text NOT NULL,              -- the embedder's model id
        embedding   vector(<dimension>) NOT NULL,
        embedded_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX T_embeddings_hnsw ON T_embeddings USING hnsw (embedding vector_cosine_ops);
    COMMENT ON TABLE T_embeddings IS '{"columns": [...], "model_id": "...", "dimension": n}';

The comment says which columns were embedded (the search uses the vectors only when the access
policy lets it read every one of them) and by which model (a search embedding with another model
or dimension is refused, never ranked wrongly). Runs are idempotent and incremental: a row is
embedded again only when its text hash or the model changed; rows deleted from ``T`` or left
without text are removed; a new dimension rebuilds the side table. The reader role needs
``GRANT SELECT ON T_embeddings TO reader`` (``grant_to=`` does it). pgvector must be installed by
the database owner (``CREATE EXTENSION vector``): this step never creates an extension.

Without pgvector (or with ``embeddings=None``) it builds what it can: the words table of
spelling correction, which needs only pg_trgm; the report's ``vectors`` is then false and its
``note`` says why and how to get pgvector (:data:`PGVECTOR_HOWTO`). With neither extension
there is nothing to build, and it refuses, saying how to get both.

Example::

    report = index_table("postgresql://writer@db/app", "inquiries", ["subject", "body"],
                         embeddings, grant_to=["reader"])
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from persistence.errors import ConfigurationError

try:
    import psycopg
    from psycopg import sql

    from persistence.backends.postgres.errors import translate
    from persistence.backends.postgres.vectors import embeddings_table, row_text, text_hash
    from persistence.backends.postgres.words import trgm_installed, words_table, write_words
except ImportError as exc:  # pragma: no cover - exercised only without the extra installed
    raise ConfigurationError(
        'indexing needs psycopg 3: pip install "readonly-rag[postgres]"'
    ) from exc
from persistence.search.bm25 import tokens
from persistence.search.embedder import Embedder
from persistence.search.extensions import PG_TRGM_HOWTO, PGVECTOR_HOWTO
from persistence.search.spelling import is_vocabulary_word

__all__ = ["PGVECTOR_HOWTO", "PG_TRGM_HOWTO", "IndexReport", "embeddings_table", "index_table"]


Progress = Callable[[int, int, int], None]
#: Rows read per batch when only words are counted (nothing is embedded).
_WORDS_BATCH = 2000

_EXTENSION_SQL = b"""
SELECT n.nspname FROM pg_catalog.pg_extension e
JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'
"""
_COLUMNS_SQL = b"""
SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), t.typcategory
FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
WHERE a.attrelid = pg_catalog.to_regclass(%s) AND a.attnum > 0 AND NOT a.attisdropped
"""
_SIDE_SQL = b"""
SELECT a.atttypmod, pg_catalog.obj_description(a.attrelid, 'pg_class')
FROM pg_catalog.pg_attribute a
WHERE a.attrelid = pg_catalog.to_regclass(%s) AND a.attname = 'embedding' AND NOT a.attisdropped
"""


@dataclass(frozen=True, slots=True)
class IndexReport:
    """What a run did: rows read, rows embedded (new or changed), rows unchanged, side rows
    removed, the side table (``None`` when none was written), the model, the dimension and
    the seconds it took; ``words``: the
    words written to the words table (spelling correction's vocabulary), ``None`` when pg_trgm
    is not installed and no words table was written; ``vectors``: whether row vectors were
    stored (false without pgvector: ``note`` says why and how to get it)."""

    table: str
    side_table: str | None
    rows: int
    embedded: int
    unchanged: int
    removed: int
    model_id: str
    dimension: int
    seconds: float
    words: int | None = None
    vectors: bool = True
    note: str | None = None


def index_table(
    dsn: str,
    table: str,
    columns: Sequence[str],
    embeddings: Any,
    *,
    schema: str = "public",
    model_id: str | None = None,
    batch_size: int = 256,
    grant_to: Sequence[str] = (),
    progress: Progress | None = None,
    connect_timeout: float = 10.0,
) -> IndexReport:
    """Store the vectors of ``table``'s rows (the text of ``columns``) in its side table and
    build the HNSW index; see the module docstring. ``progress(done, total, embedded)`` is
    called after each batch. Without pgvector, or with ``embeddings=None``, only the words
    table is built (it needs pg_trgm). Errors: ``ConfigurationError`` for a missing table or
    column, or when neither extension is installed; the ``BackendError`` family for what the
    server refuses."""
    if not columns:
        raise ConfigurationError("index: name at least one text column to embed")
    if type(batch_size) is not int or batch_size <= 0:
        raise ConfigurationError(f"batch_size must be a positive int, not {batch_size!r}")
    side = embeddings_table(table)
    for extra in (side, words_table(table)):
        if len(extra.encode()) > 63:
            raise ConfigurationError(f"index: table name {table!r} is too long for {extra!r}")
    embedder = (
        None
        if embeddings is None
        else embeddings
        if isinstance(embeddings, Embedder)
        else Embedder(embeddings, model_id=model_id)
    )
    started = time.monotonic()
    try:
        with psycopg.connect(dsn, connect_timeout=max(1, round(connect_timeout))) as conn:
            conn.autocommit = True
            return _Indexer(conn, schema, table, side, tuple(columns), embedder).run(
                batch_size, grant_to, progress, started
            )
    except psycopg.Error as exc:
        raise translate(exc, "index") from exc


class _Indexer:
    def __init__(
        self,
        conn: psycopg.Connection[Any],
        schema: str,
        table: str,
        side: str,
        columns: tuple[str, ...],
        embedder: Embedder | None,
    ) -> None:
        self.conn = conn
        self.schema = schema
        self.table_name = table
        self.side_name = side
        self.table = sql.Identifier(schema, table)
        self.side = sql.Identifier(schema, side)
        self.columns = columns
        self.embedder = embedder
        #: How many rows hold each word (every row is read on every run).
        self.counts: dict[str, int] = {}

    def run(
        self, batch_size: int, grant_to: Sequence[str], progress: Progress | None, started: float
    ) -> IndexReport:
        conn = self.conn
        row = conn.execute(_EXTENSION_SQL).fetchone()
        id_type = self._check_table()
        embedder = self.embedder
        if row is None or embedder is None:
            return self._words_only(row is None, grant_to, progress, started)
        vs = sql.Identifier(str(row[0]))
        self._lock()
        dimension = embedder.dimension
        self._prepare(vs, id_type, dimension)
        total_row = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(self.table)).fetchone()
        total = int(total_row[0]) if total_row else 0
        done = embedded = unchanged = removed = 0
        for batch in self._batches(batch_size):
            made, kept, dropped = self._store(batch, vs)
            done += len(batch)
            embedded += made
            unchanged += kept
            removed += dropped
            if progress is not None:
                progress(done, total, embedded)
        with conn.transaction():
            cursor = conn.execute(
                sql.SQL(
                    "DELETE FROM {side} AS e WHERE NOT EXISTS "
                    "(SELECT 1 FROM {table} AS t WHERE t.id = e.row_id)"
                ).format(side=self.side, table=self.table)
            )
            removed += cursor.rowcount
        conn.execute(
            sql.SQL(
                "CREATE INDEX IF NOT EXISTS {name} ON {side} "
                "USING hnsw (embedding {vs}.vector_cosine_ops)"
            ).format(name=sql.Identifier(f"{self.side_name}_hnsw"), side=self.side, vs=vs)
        )
        for role in grant_to:
            conn.execute(
                sql.SQL("GRANT SELECT ON {} TO {}").format(self.side, sql.Identifier(role))
            )
        conn.execute(sql.SQL("ANALYZE {}").format(self.side))
        words = write_words(conn, self.schema, self.table_name, self.columns, self.counts, grant_to)
        return IndexReport(
            table=self.table_name,
            side_table=self.side_name,
            rows=done,
            embedded=embedded,
            unchanged=unchanged,
            removed=removed,
            model_id=embedder.model_id,
            dimension=dimension,
            seconds=time.monotonic() - started,
            words=words,
        )

    def _embedding(self) -> Embedder:
        # Only the vector steps ask, and run() takes them only with an embedder.
        if self.embedder is None:  # pragma: no cover - guarded by run()
            raise ConfigurationError("index: no embeddings to store vectors with")
        return self.embedder

    def _lock(self) -> None:
        # One indexer per table at a time: a second run waits for none, it refuses.
        lock = self.conn.execute(
            b"SELECT pg_catalog.pg_try_advisory_lock(pg_catalog.hashtext(%s))",
            [f"rag-index:{self.schema}.{self.side_name}"],
        ).fetchone()
        if not (lock and lock[0]):
            raise ConfigurationError(f"index: another run is indexing {self.table_name!r}")

    def _words_only(
        self,
        no_pgvector: bool,
        grant_to: Sequence[str],
        progress: Progress | None,
        started: float,
    ) -> IndexReport:
        """Build what needs no pgvector: the words table (pg_trgm), from every row's text."""
        why = (
            "pgvector is not installed in this database, so no row vectors were stored (the "
            "semantic leg re-ranks a bounded set of filtered rows in process meanwhile)"
            if no_pgvector
            else "no embeddings were given, so no row vectors were stored"
        )
        howto = f"; {PGVECTOR_HOWTO}" if no_pgvector else ""
        if not trgm_installed(self.conn):
            raise ConfigurationError(
                f"index: nothing to build: {why}, and pg_trgm, which the words table of "
                f"spelling correction needs, is not installed either; {PG_TRGM_HOWTO}{howto}"
            )
        self._lock()
        done = 0
        for batch in self._batches(_WORDS_BATCH):
            self._count_words({row[0]: row_text(row[1:]) for row in batch})
            done += len(batch)
            if progress is not None:
                progress(done, done, 0)
        words = write_words(
            self.conn, self.schema, self.table_name, self.columns, self.counts, grant_to
        )
        return IndexReport(
            table=self.table_name,
            side_table=None,  # not created: there is no vector to store
            rows=done,
            embedded=0,
            unchanged=0,
            removed=0,
            model_id="",
            dimension=0,
            seconds=time.monotonic() - started,
            words=words,
            vectors=False,
            note=f"{why}; the words table of spelling correction was built{howto}",
        )

    def _count_words(self, texts: Mapping[Any, str]) -> None:
        for text in texts.values():
            for word in set(tokens(text)):
                if is_vocabulary_word(word):
                    self.counts[word] = self.counts.get(word, 0) + 1

    def _check_table(self) -> str:
        """The id column's type, once the table and every column exist and hold text."""
        found = {
            str(name): (str(kind), str(category))
            for name, kind, category in self.conn.execute(
                _COLUMNS_SQL, [self.table.as_string(None)]
            )
        }
        if not found:
            raise ConfigurationError(f"index: table {self.schema}.{self.table_name} does not exist")
        if "id" not in found:
            raise ConfigurationError(f"index: table {self.table_name!r} has no id column")
        for column in self.columns:
            if column not in found:
                raise ConfigurationError(
                    f"index: table {self.table_name!r} has no column {column!r}"
                )
            if found[column][1] != "S":
                raise ConfigurationError(
                    f"index: column {column!r} is {found[column][0]}, not text"
                )
        return found["id"][0]

    def _prepare(self, vs: sql.Identifier, id_type: str, dimension: int) -> None:
        """Create the side table (again, when the dimension changed) and describe it."""
        row = self.conn.execute(_SIDE_SQL, [self.side.as_string(None)]).fetchone()
        with self.conn.transaction():
            if row is not None and int(row[0]) != dimension:
                self.conn.execute(sql.SQL("DROP TABLE {}").format(self.side))
            # id_type comes from format_type() of the catalog, not from a caller.
            self.conn.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {side} (row_id {id_type} PRIMARY KEY, "
                    "text_hash bytea NOT NULL, model_id text NOT NULL, "
                    "embedding {vs}.vector({dim}) NOT NULL, "
                    "embedded_at timestamptz NOT NULL DEFAULT now())"
                ).format(
                    side=self.side,
                    id_type=sql.SQL(id_type),
                    vs=vs,
                    dim=sql.Literal(dimension),
                )
            )
            meta = {
                "columns": list(self.columns),
                "model_id": self._embedding().model_id,
                "dimension": dimension,
                "format": 1,
            }
            self.conn.execute(
                sql.SQL("COMMENT ON TABLE {} IS {}").format(
                    self.side, sql.Literal(json.dumps(meta))
                )
            )

    def _batches(self, size: int) -> Iterator[list[tuple[Any, ...]]]:
        """The table's rows (id and text columns) in id order, ``size`` at a time."""
        cols = sql.SQL(", ").join(sql.Identifier(c) for c in self.columns)
        first = sql.SQL("SELECT id, {} FROM {} ORDER BY id LIMIT %s").format(cols, self.table)
        after = sql.SQL("SELECT id, {} FROM {} WHERE id > %s ORDER BY id LIMIT %s").format(
            cols, self.table
        )
        last: Any = None
        while True:
            if last is None:
                rows = self.conn.execute(first, [size]).fetchall()
            else:
                rows = self.conn.execute(after, [last, size]).fetchall()
            if not rows:
                return
            yield rows
            last = rows[-1][0]

    def _store(self, batch: Sequence[tuple[Any, ...]], vs: sql.Identifier) -> tuple[int, int, int]:
        """Embed and upsert the batch's new or changed rows; remove those left without text."""
        texts = {row[0]: row_text(row[1:]) for row in batch}
        self._count_words(texts)
        stored = {
            key: (bytes(digest), model)
            for key, digest, model in self.conn.execute(
                sql.SQL("SELECT row_id, text_hash, model_id FROM {} WHERE row_id = ANY(%s)").format(
                    self.side
                ),
                [list(texts)],
            )
        }
        empty = [key for key, text in texts.items() if not text and key in stored]
        changed = {
            key: (text, digest)
            for key, text in texts.items()
            if text
            and stored.get(key)
            != ((digest := text_hash(self.columns, text)), self._embedding().model_id)
        }
        unchanged = sum(1 for key, text in texts.items() if text and key not in changed)
        made = self._embedding().embed_rows([text for text, _ in changed.values()])
        # A text without direction (a zero vector) is stored nowhere, as one without text.
        vectors = dict(zip(changed, made, strict=True))
        empty += [key for key, vector in vectors.items() if vector is None and key in stored]
        upsert = sql.SQL(
            "INSERT INTO {side} (row_id, text_hash, model_id, embedding) "
            "VALUES (%s, %s, %s, CAST(%s AS {vs}.vector)) ON CONFLICT (row_id) DO UPDATE SET "
            "text_hash = EXCLUDED.text_hash, model_id = EXCLUDED.model_id, "
            "embedding = EXCLUDED.embedding, embedded_at = now()"
        ).format(side=self.side, vs=vs)
        with self.conn.transaction(), self.conn.cursor() as cursor:
            if any(v is not None for v in vectors.values()):
                cursor.executemany(
                    upsert,
                    [
                        (key, digest, self._embedding().model_id, _literal(vector))
                        for key, (_, digest) in changed.items()
                        if (vector := vectors[key]) is not None
                    ],
                )
            if empty:
                cursor.execute(
                    sql.SQL("DELETE FROM {} WHERE row_id = ANY(%s)").format(self.side), [empty]
                )
        return sum(v is not None for v in vectors.values()), unchanged, len(empty)


def _literal(vector: Sequence[float]) -> str:
    return "[" + ",".join(repr(float(v)) for v in vector) + "]"
