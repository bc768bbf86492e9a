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
``GRANT SELECT ON T_embeddings TO reader`` (``grant_to=`` does it). Each run also brings
``T_documents``, the keyword leg's stored documents, up to date
(:mod:`persistence.backends.postgres.documents`; the reader needs SELECT on it too), for
``keyword_columns``: the embedded columns unless named apart, since the keyword leg ranks by
every text column the reader may read, which need not be the embedded ones.
pgvector must be installed by the database owner (``CREATE EXTENSION vector``): this step
never creates an extension.

Without pgvector (or with ``embeddings=None``) it builds what it can: the words table of
spelling correction, which needs only pg_trgm; the report's ``vectors`` is then false and its
``note`` says why and how to get pgvector (:data:`PGVECTOR_HOWTO`). With neither extension
there is nothing to build, and it refuses, saying how to get both.

Example::

    report = index_table("postgresql://writer@db/app", "inquiries", ["subject", "body"],
                         embeddings, grant_to=["reader"])
"""

from __future__ import annotations

import contextlib
import json
import struct
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from persistence.errors import ConfigurationError

try:
    import psycopg
    from psycopg import sql
    from psycopg.adapt import Dumper
    from psycopg.pq import Format

    from persistence.backends.postgres.documents import documents_table, write_documents
    from persistence.backends.postgres.errors import translate
    from persistence.backends.postgres.vectors import embeddings_table, row_text, text_hash
    from persistence.backends.postgres.words import trgm_installed, words_table, write_words
except ImportError as exc:  # pragma: no cover - exercised only without the extra installed
    raise ConfigurationError(
        'indexing needs psycopg 3: pip install "readonly-rag[postgres]"'
    ) from exc
from persistence.search.bm25 import tokens
from persistence.search.embedder import Embedder, Vector
from persistence.search.extensions import PG_TRGM_HOWTO, PGVECTOR_HOWTO
from persistence.search.spelling import is_vocabulary_word

__all__ = [
    "PGVECTOR_HOWTO",
    "PG_TRGM_HOWTO",
    "PHASES",
    "IndexReport",
    "embeddings_table",
    "index_table",
]


Progress = Callable[[int, int, int], None]
#: The most ``maintenance_work_mem`` a run raises its session to for the HNSW build (bytes).
HNSW_MEMORY_CAP = 2 * 1024**3
#: Bytes of pgvector's in-memory HNSW graph per vector beside the vector itself (the element
#: and its neighbour lists at the default m = 16), a generous estimate.
_HNSW_NODE_BYTES = 1024
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
ORDER BY a.attnum
"""
# The id column's type and pgvector's vector type (in the schema given by name).
_BINARY_TYPES_SQL = b"""
SELECT (SELECT a.atttypid FROM pg_catalog.pg_attribute a
        WHERE a.attrelid = pg_catalog.to_regclass(%s) AND a.attname = 'id'),
       (SELECT t.oid FROM pg_catalog.pg_type t
        JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
        WHERE t.typname = 'vector' AND n.nspname = %s)
"""
#: Built-in oids of bytea and text (``pg_type.dat``).
BYTEA_OID = 17
TEXT_OID = 25
_SIDE_SQL = b"""
SELECT a.atttypmod, pg_catalog.obj_description(a.attrelid, 'pg_class')
FROM pg_catalog.pg_attribute a
WHERE a.attrelid = pg_catalog.to_regclass(%s) AND a.attname = 'embedding' AND NOT a.attisdropped
"""


#: The phases of a run, in the order :attr:`IndexReport.phases` lists them: reading the rows
#: and comparing their text hashes with the stored ones; embedding the new or changed rows;
#: writing their vectors (and removing the side rows of deleted or emptied rows); building the
#: HNSW index; counting the words and writing the words table; bringing the documents table
#: (the keyword leg's stored documents) up to date; ``other``: the rest (catalog checks, grants,
#: ``ANALYZE``).
PHASES = ("rows read", "embedding", "rows written", "HNSW", "words", "documents", "other")


@dataclass(frozen=True, slots=True)
class IndexReport:
    """What a run did: rows read, rows embedded (new or changed), rows unchanged, side rows
    removed, the side table (``None`` when none was written), the model, the dimension and
    the seconds it took; ``words``: the
    words written to the words table (spelling correction's vocabulary), ``None`` when pg_trgm
    is not installed and no words table was written; ``vectors``: whether row vectors were
    stored (false without pgvector: ``note`` says why and how to get it); ``phases``: the
    seconds of each of :data:`PHASES`, in that order, summing to ``seconds`` (a phase the run
    did not take, as ``embedding`` without pgvector, is 0)."""

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
    phases: Mapping[str, float] = field(default_factory=dict)

    @property
    def rows_per_second(self) -> float:
        """Rows read per second of the whole run."""
        return self.rows / self.seconds if self.seconds > 0 else 0.0


class _Clock:
    """Seconds spent in each phase; what no phase claims is ``other``."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.seconds = dict.fromkeys(PHASES, 0.0)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.seconds[name] += time.monotonic() - t0

    def report(self) -> tuple[float, dict[str, float]]:
        """The run's seconds and each phase's, ``other`` what the named phases leave."""
        total = time.monotonic() - self.started
        named = sum(v for k, v in self.seconds.items() if k != "other")
        self.seconds["other"] = max(0.0, total - named)
        return total, dict(self.seconds)


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
    text_search_config: str = "english",
    keyword_columns: Sequence[str] | None = None,
) -> IndexReport:
    """Store the vectors of ``table``'s rows (the text of ``columns``) in its side table and
    build the HNSW index; see the module docstring. ``progress(done, total, embedded)`` is
    called after each batch. Without pgvector, or with ``embeddings=None``, only the words
    table is built (it needs pg_trgm). The documents table (the keyword leg's stored documents,
    :mod:`persistence.backends.postgres.documents`) is written in either case, parsed with
    ``text_search_config`` (the search's own, ``english`` by default), for ``keyword_columns``
    (default: ``columns``); the search reads it only when these are its own text columns, in
    table order. Errors:
    ``ConfigurationError`` for a missing table or column, or when neither extension is
    installed; the ``BackendError`` family for what the server refuses."""
    if not columns:
        raise ConfigurationError("index: name at least one text column to embed")
    if keyword_columns is not None and not keyword_columns:
        raise ConfigurationError("index: keyword_columns, when given, names at least one column")
    if type(batch_size) is not int or batch_size <= 0:
        raise ConfigurationError(f"batch_size must be a positive int, not {batch_size!r}")
    parts = text_search_config.split(".")
    if not (1 <= len(parts) <= 2 and all(p.isidentifier() for p in parts)):
        raise ConfigurationError(
            f"index: text_search_config must be a configuration name such as 'english', "
            f"not {text_search_config!r}"
        )
    side = embeddings_table(table)
    for extra in (side, words_table(table), documents_table(table)):
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
            indexer = _Indexer(conn, schema, table, side, tuple(columns), embedder)
            indexer.config = text_search_config
            indexer.keyword_columns = tuple(columns if keyword_columns is None else keyword_columns)
            return indexer.run(batch_size, grant_to, progress, started)
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
        self.clock = _Clock(time.monotonic())
        #: The oids of a binary COPY into the side table, ``None`` to COPY as text.
        self.binary_types: tuple[int, int, int, int] | None = None
        #: The text search configuration the stored documents are parsed with.
        self.config = "english"
        #: The columns whose text the stored documents hold (the keyword leg's columns).
        self.keyword_columns = columns
        #: The id column's type (``format_type``), known once the table is checked.
        self.id_type = ""

    def run(
        self, batch_size: int, grant_to: Sequence[str], progress: Progress | None, started: float
    ) -> IndexReport:
        conn = self.conn
        self.clock = clock = _Clock(started)
        row = conn.execute(_EXTENSION_SQL).fetchone()
        id_type = self.id_type = self._check_table()
        embedder = self.embedder
        if row is None or embedder is None:
            return self._words_only(row is None, grant_to, progress, started)
        vs = sql.Identifier(str(row[0]))
        self._lock()
        dimension = embedder.dimension
        self._prepare(vs, id_type, dimension)
        self.binary_types = self._binary_types(str(row[0]))
        total_row = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(self.table)).fetchone()
        total = int(total_row[0]) if total_row else 0
        done = embedded = unchanged = removed = 0
        for batch in self._batches(batch_size, "rows read"):
            made, kept, dropped = self._store(batch, vs)
            done += len(batch)
            embedded += made
            unchanged += kept
            removed += dropped
            if progress is not None:
                progress(done, total, embedded)
        with clock.phase("rows written"), conn.transaction():
            cursor = conn.execute(
                sql.SQL(
                    "DELETE FROM {side} AS e WHERE NOT EXISTS "
                    "(SELECT 1 FROM {table} AS t WHERE t.id = e.row_id)"
                ).format(side=self.side, table=self.table)
            )
            removed += cursor.rowcount
        with clock.phase("HNSW"):
            self._build_hnsw(vs, done, dimension)
        for role in grant_to:
            conn.execute(
                sql.SQL("GRANT SELECT ON {} TO {}").format(self.side, sql.Identifier(role))
            )
        conn.execute(sql.SQL("ANALYZE {}").format(self.side))
        with clock.phase("words"):
            words = write_words(
                conn, self.schema, self.table_name, self.columns, self.counts, grant_to
            )
        self._documents(grant_to)
        seconds, phases = clock.report()
        return IndexReport(
            table=self.table_name,
            side_table=self.side_name,
            rows=done,
            embedded=embedded,
            unchanged=unchanged,
            removed=removed,
            model_id=embedder.model_id,
            dimension=dimension,
            seconds=seconds,
            words=words,
            phases=phases,
        )

    def _build_hnsw(self, vs: sql.Identifier, rows: int, dimension: int) -> None:
        """Build the HNSW index once the vectors are loaded (a later run finds it and inserts
        through it). The build is fast while its graph fits in ``maintenance_work_mem`` and
        far slower once it spills, so this session raises it (never lowers it) to what the
        graph of ``rows`` vectors needs, at most :data:`HNSW_MEMORY_CAP` bytes."""
        name = f"{self.side_name}_hnsw"
        conn = self.conn
        exists = conn.execute(
            b"SELECT pg_catalog.to_regclass(%s)",
            [sql.Identifier(self.schema, name).as_string(None)],
        ).fetchone()
        raised = False
        if not (exists and exists[0]):
            need = min(HNSW_MEMORY_CAP, rows * (4 * dimension + _HNSW_NODE_BYTES) * 5 // 4)
            kb_row = conn.execute(
                b"SELECT setting::bigint FROM pg_catalog.pg_settings "
                b"WHERE name = 'maintenance_work_mem'"
            ).fetchone()
            if kb_row is not None and need // 1024 > int(kb_row[0]):
                conn.execute(
                    b"SELECT pg_catalog.set_config('maintenance_work_mem', %s, false)",
                    [f"{need // (1024 * 1024) + 1}MB"],
                )
                raised = True
        try:
            conn.execute(
                sql.SQL(
                    "CREATE INDEX IF NOT EXISTS {name} ON {side} "
                    "USING hnsw (embedding {vs}.vector_cosine_ops)"
                ).format(name=sql.Identifier(name), side=self.side, vs=vs)
            )
        finally:
            if raised:
                conn.execute(b"RESET maintenance_work_mem")

    def _copy_new(
        self, cursor: psycopg.Cursor[Any], rows: Sequence[tuple[Any, bytes, Vector]]
    ) -> None:
        """COPY ``rows`` (id, text hash, vector) into the side table, none there yet."""
        model_id = self._embedding().model_id
        columns = sql.SQL("COPY {} (row_id, text_hash, model_id, embedding) FROM STDIN").format(
            self.side
        )
        if self.binary_types is None:
            with cursor.copy(columns) as copy:
                for key, digest, vector in rows:
                    copy.write_row((key, digest, model_id, _literal(vector)))
            return
        with cursor.copy(sql.SQL("{} (FORMAT BINARY)").format(columns)) as copy:
            copy.set_types(list(self.binary_types))
            for key, digest, vector in rows:
                copy.write_row((key, digest, model_id, _Packed.of(vector)))

    def _binary_types(self, vector_schema: str) -> tuple[int, int, int, int] | None:
        """The oids a binary COPY into the side table sends (id, bytea, text, vector), with a
        dumper of :class:`_Packed` registered for the vector; ``None`` (COPY as text) when
        psycopg has no binary dumper for the id's type (a domain, say)."""
        found = self.conn.execute(_BINARY_TYPES_SQL, [self.table.as_string(None), vector_schema])
        row = found.fetchone()
        if row is None or row[0] is None or row[1] is None:  # pragma: no cover - checked before
            return None
        id_oid, vector_oid = int(row[0]), int(row[1])
        try:
            self.conn.adapters.get_dumper_by_oid(id_oid, Format.BINARY)
        except psycopg.ProgrammingError:
            return None
        self.conn.adapters.register_dumper(_Packed, _packed_dumper(vector_oid))
        return (id_oid, BYTEA_OID, TEXT_OID, vector_oid)

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
        clock = self.clock = _Clock(started)
        done = 0
        for batch in self._batches(_WORDS_BATCH, "rows read"):
            self._count_words({row[0]: row_text(row[1:]) for row in batch})
            done += len(batch)
            if progress is not None:
                progress(done, done, 0)
        with clock.phase("words"):
            words = write_words(
                self.conn, self.schema, self.table_name, self.columns, self.counts, grant_to
            )
        self._documents(grant_to)
        seconds, phases = clock.report()
        return IndexReport(
            table=self.table_name,
            side_table=None,  # not created: there is no vector to store
            rows=done,
            embedded=0,
            unchanged=0,
            removed=0,
            model_id="",
            dimension=0,
            seconds=seconds,
            words=words,
            vectors=False,
            note=f"{why}; the words table of spelling correction was built{howto}",
            phases=phases,
        )

    def _documents(self, grant_to: Sequence[str]) -> None:
        """Bring the documents table up to date, on the server (the documents are PostgreSQL's
        own parse of each row's text, so no row travels)."""
        with self.clock.phase("documents"):
            write_documents(
                self.conn,
                self.schema,
                self.table_name,
                self.id_type,
                self.keyword_columns,
                self.config,
                grant_to,
            )

    def _count_words(self, texts: Mapping[Any, str]) -> None:
        with self.clock.phase("words"):
            self._count_words_now(texts)

    def _count_words_now(self, texts: Mapping[Any, str]) -> None:
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
        for column in dict.fromkeys((*self.columns, *self.keyword_columns)):
            if column not in found:
                raise ConfigurationError(
                    f"index: table {self.table_name!r} has no column {column!r}"
                )
            if found[column][1] != "S":
                raise ConfigurationError(
                    f"index: column {column!r} is {found[column][0]}, not text"
                )
        keyword = list(self.keyword_columns)
        in_order = [c for c in found if c in keyword]
        if keyword != in_order:
            # The search reads stored documents only for its own columns in table order: any
            # other list would be written, at the cost of a full pass, and never read.
            raise ConfigurationError(
                f"index: keyword columns must name each column once, in the table's order "
                f"({', '.join(in_order)}), not {', '.join(keyword)}"
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

    def _batches(self, size: int, phase: str) -> Iterator[list[tuple[Any, ...]]]:
        """The table's rows (id and text columns) in id order, ``size`` at a time; the reads
        are timed as ``phase``."""
        cols = sql.SQL(", ").join(sql.Identifier(c) for c in self.columns)
        first = sql.SQL("SELECT id, {} FROM {} ORDER BY id LIMIT %s").format(cols, self.table)
        after = sql.SQL("SELECT id, {} FROM {} WHERE id > %s ORDER BY id LIMIT %s").format(
            cols, self.table
        )
        last: Any = None
        while True:
            with self.clock.phase(phase):
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
        clock = self.clock
        with clock.phase("rows read"):
            texts = {row[0]: row_text(row[1:]) for row in batch}
        self._count_words(texts)
        with clock.phase("rows read"):
            stored = {
                key: (bytes(digest), model)
                for key, digest, model in self.conn.execute(
                    sql.SQL(
                        "SELECT row_id, text_hash, model_id FROM {} WHERE row_id = ANY(%s)"
                    ).format(self.side),
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
        with clock.phase("embedding"):
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
        model_id = self._embedding().model_id
        with (
            clock.phase("rows written"),
            self.conn.transaction(),
            self.conn.cursor() as cursor,
        ):
            kept = [
                (key, digest, vector)
                for key, (_, digest) in changed.items()
                if (vector := vectors[key]) is not None
            ]
            # A row with no side row yet is new: COPY writes those in one stream (no other
            # run writes the side table meanwhile, the advisory lock sees to it), in binary
            # when the id's type allows, sparing the vectors' text; a changed one is updated
            # in place.
            if new := [row for row in kept if row[0] not in stored]:
                self._copy_new(cursor, new)
            if again := [row for row in kept if row[0] in stored]:
                cursor.executemany(
                    upsert, [(key, digest, model_id, _literal(v)) for key, digest, v in again]
                )
            if empty:
                cursor.execute(
                    sql.SQL("DELETE FROM {} WHERE row_id = ANY(%s)").format(self.side), [empty]
                )
        return sum(v is not None for v in vectors.values()), unchanged, len(empty)


class _Packed(bytes):
    """A vector in pgvector's binary form (``vector_recv``): the dimension and a zero as
    big-endian int16, then each component as a big-endian float4."""

    __slots__ = ()

    @classmethod
    def of(cls, vector: Sequence[float]) -> _Packed:
        # float4 by round-to-nearest, as the server's strtof() rounds the text of the float.
        return cls(struct.pack(f">hh{len(vector)}f", len(vector), 0, *vector))


def _packed_dumper(vector_oid: int) -> type[Dumper]:
    """A binary dumper of :class:`_Packed` as the ``vector`` type of ``vector_oid``."""

    class PackedDumper(Dumper):
        format = Format.BINARY
        oid = vector_oid

        def dump(self, obj: Any) -> bytes:
            return bytes(obj)

    return PackedDumper


def _literal(vector: Sequence[float]) -> str:
    # The vectors are tuples of floats (``normalize``); repr is their shortest exact text.
    return "[" + ",".join(map(repr, vector)) + "]"
