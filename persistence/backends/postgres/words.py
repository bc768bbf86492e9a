"""The words table of a PostgreSQL table: its vocabulary for spelling correction
(:mod:`persistence.search.spelling`), written by ``rag-agent index`` and read by the search.

The words table of ``T`` is ``T_words`` in ``T``'s schema::

    CREATE TABLE T_words (word text PRIMARY KEY, rows integer NOT NULL);
    CREATE INDEX T_words_trgm ON T_words USING gin (word gin_trgm_ops);
    COMMENT ON TABLE T_words IS '{"columns": [...], "format": 1}';

``rows`` is how many rows of ``T`` hold the word (the words of the indexed columns joined, as the
memory backend's BM25 tokenises them: runs of letters and digits, case-folded; only ASCII words
of four letters or more are kept). The index step rewrites it whole on every run (the counts
need every row) and only where pg_trgm is installed: the search's candidate lookup is pg_trgm's
``%`` served by that index, one probe per misspelled word, never a scan of ``T``.

Every word the search looks up is a bound value; the relation and pg_trgm's schema come from the
catalog.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, NamedTuple

import psycopg
from psycopg import sql

from persistence.backends.postgres.known_words import KnownWords
from persistence.search.spelling import (
    CANDIDATE_SIMILARITY,
    MIN_DOCUMENT_FREQUENCY,
    Correction,
    correct,
    has_correctable,
    looked_up,
)

__all__ = [
    "FILTERED_SEARCH",
    "WORDS_TABLE_SUFFIX",
    "PgVocabulary",
    "correct_in",
    "read_spelling_facts",
    "read_vocabulary",
    "send_words_probe",
    "words_table",
    "words_to_look_up",
    "write_words",
]

#: The words table of ``T`` is ``T_words``, in ``T``'s schema.
WORDS_TABLE_SUFFIX = "_words"

_TRGM_SQL = b"""
SELECT n.nspname FROM pg_catalog.pg_extension e
JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm'
"""
# pg_trgm's schema, and the words table's description when it exists and this role may read it.
_PROBE_SQL = b"""
SELECT
  (SELECT n.nspname FROM pg_catalog.pg_extension e
     JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm'),
  CASE WHEN w.oid IS NOT NULL AND pg_catalog.has_table_privilege(w.oid, 'SELECT')
       THEN pg_catalog.obj_description(w.oid, 'pg_class') END,
  (SELECT c.relrowsecurity FROM pg_catalog.pg_class c WHERE c.oid = pg_catalog.to_regclass(%s))
FROM (SELECT pg_catalog.to_regclass(%s) AS oid) AS w
"""
#: Why a filtered search is not corrected: the words table counts every row of the table, so a
#: correction could be a word only rows outside the filters hold.
FILTERED_SEARCH = (
    "misspelled words were not corrected: on PostgreSQL the words table counts every row, and a "
    "filtered search may only be corrected by words of rows inside its filters"
)


# The tables of a schema under row-level security, and those whose words table this role may
# read: what decides where spelling corrections run (for `rag-agent doctor`).
_SPELLING_FACTS_SQL = b"""
SELECT c.relname, c.relrowsecurity,
       pg_catalog.has_table_privilege(w.oid, 'SELECT') IS TRUE
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_catalog.pg_class w
  ON w.relnamespace = c.relnamespace AND w.relname = c.relname || '_words'
WHERE n.nspname = %s AND c.relkind IN ('r', 'p')
"""


class SpellingFacts(NamedTuple):
    """Where spelling corrections can run on PostgreSQL: tables under row-level security and
    tables with a words table the connected role may read."""

    row_security: frozenset[str] = frozenset()
    words_tables: frozenset[str] = frozenset()


def read_spelling_facts(conn: psycopg.Connection[Any], schema: str) -> SpellingFacts:
    """The :class:`SpellingFacts` of ``schema``, read from the catalog."""
    rows = conn.execute(_SPELLING_FACTS_SQL, (schema,)).fetchall()
    return SpellingFacts(
        frozenset(str(r[0]) for r in rows if r[1]),
        frozenset(str(r[0]) for r in rows if r[2]),
    )


def words_table(table: str) -> str:
    """The words table of ``table``."""
    return f"{table}{WORDS_TABLE_SUFFIX}"


def trgm_installed(conn: psycopg.Connection[Any]) -> bool:
    """Whether pg_trgm is installed in ``conn``'s database (the words table needs it)."""
    return conn.execute(_TRGM_SQL).fetchone() is not None


def write_words(
    conn: psycopg.Connection[Any],
    schema: str,
    table: str,
    columns: Sequence[str],
    counts: Mapping[str, int],
    grant_to: Sequence[str],
) -> int | None:
    """Replace ``table``'s words table with ``counts`` (word → rows holding it); the number
    of words written, or ``None`` when pg_trgm is not installed (no words table then)."""
    found = conn.execute(_TRGM_SQL).fetchone()
    if found is None:
        return None
    trgm = sql.Identifier(str(found[0]))
    name = words_table(table)
    relation = sql.Identifier(schema, name)
    with conn.transaction():
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (word text PRIMARY KEY, rows integer NOT NULL)"
            ).format(relation)
        )
        conn.execute(sql.SQL("TRUNCATE {}").format(relation))
        with conn.cursor().copy(sql.SQL("COPY {} (word, rows) FROM STDIN").format(relation)) as cp:
            for word, rows in sorted(counts.items()):
                cp.write_row((word, rows))
        conn.execute(
            sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} USING gin (word {}.gin_trgm_ops)").format(
                sql.Identifier(f"{name}_trgm"), relation, trgm
            )
        )
        meta = {"columns": list(columns), "format": 1}
        conn.execute(
            sql.SQL("COMMENT ON TABLE {} IS {}").format(relation, sql.Literal(json.dumps(meta)))
        )
        for role in grant_to:
            conn.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(relation, sql.Identifier(role)))
    conn.execute(sql.SQL("ANALYZE {}").format(relation))
    return len(counts)


def words_to_look_up(
    text: str,
    notes: list[str],
    *,
    filtered: bool,
    known: KnownWords | None = None,
    key: Hashable = None,
) -> list[str]:
    """The words of ``text`` a search must ask the words table about (:func:`correct_in`);
    none for a text without a word that could be corrected, for one whose every looked-up word
    a recent spelling pass left as typed (``known`` under ``key``: a word some row holds is
    never corrected, nor one the table offered no correction for), and for a ``filtered``
    search, which says so in ``notes``.

    A correction may only be a word of rows the reader could read with the same filters. The
    words table counts every row (the index step reads them all), so it is not consulted for a
    ``filtered`` search, nor for a table under row-level security (:func:`read_vocabulary`).
    """
    if not has_correctable(text):
        return []
    if filtered:
        notes.append(FILTERED_SEARCH)
        return []
    words = looked_up(text)
    if known is not None and known.hold(key, words):
        return []
    return words


def send_words_probe(cursor: psycopg.Cursor[Any], schema: str, table: str) -> psycopg.Cursor[Any]:
    """A cursor on which the words table's probe (pg_trgm's schema, the table's description,
    row-level security) was sent: catalog reads only, so it fails for no table, and can share
    a pipeline with the statements that need no answer of it. Read it by
    :func:`read_vocabulary`."""
    relation = sql.Identifier(schema, words_table(table))
    base = sql.Identifier(schema, table).as_string(None)
    probe = cursor.connection.cursor()
    probe.execute(_PROBE_SQL, [base, relation.as_string(None)])
    return probe


def read_vocabulary(
    probe: psycopg.Cursor[Any],
    cursor: psycopg.Cursor[Any],
    schema: str,
    table: str,
    text_columns: Sequence[str],
) -> tuple[PgVocabulary | None, str | None]:
    """``table``'s vocabulary, read on ``cursor``, when the probe sent by
    :func:`send_words_probe` says its words table exists, this role may read it, it counts
    only columns the search may read, pg_trgm is installed, and ``table`` is not under
    row-level security (whose hidden rows the words table counts too); else ``None`` and why."""
    relation = sql.Identifier(schema, words_table(table))
    row = probe.fetchall()[0]
    trgm, description, row_security = row[0], row[1], row[2]
    skipped = "misspelled words were not corrected"
    if row_security:
        return None, (
            f"row-level security is on for {table!r} and its words table counts every row, "
            f"visible or not: {skipped}"
        )
    if trgm is None:
        return None, f"pg_trgm is not installed: {skipped}"
    if description is None:
        return None, (
            f"no words table of {table!r} this role may read (run `rag-agent index {table}` "
            f"and grant SELECT on {words_table(table)}): {skipped}"
        )
    try:
        columns = json.loads(description).get("columns")
    except (ValueError, AttributeError):
        columns = None
    if not isinstance(columns, list) or not set(columns) <= set(text_columns):
        return (
            None,
            f"the words table of {table!r} counts columns this search may not read: {skipped}",
        )
    return PgVocabulary(cursor, relation, sql.Identifier(str(trgm))), None


def correct_in(
    vocabulary: PgVocabulary,
    text: str,
    words: Sequence[str],
    known: KnownWords | None = None,
    key: Hashable = None,
) -> Correction:
    """``text`` corrected by ``vocabulary`` (``words``: :func:`words_to_look_up`'s), asked in
    one round trip; the words it left as typed (held by the table, or offered no correction)
    are remembered in ``known`` under ``key``."""
    vocabulary.prefetch(words)
    corrected = correct(text, vocabulary)
    if known is not None:
        # A word is corrected by its own candidates alone (spelling.choose): one left as typed
        # now is left as typed by the next text too, while the table is the same. A natural
        # sentence usually holds such a word ("paying"), and asked the table on every call.
        changed = {typed.lower() for typed, _ in corrected.changes}
        known.add(key, [w for w in words if w not in changed])
    return corrected


class PgVocabulary:
    """A :class:`~persistence.search.spelling.Vocabulary` read from a words table inside the
    caller's transaction: one statement per call, or one for both calls after
    :meth:`prefetch`."""

    def __init__(
        self, cursor: psycopg.Cursor[Any], relation: sql.Identifier, trgm: sql.Identifier
    ) -> None:
        self._cursor = cursor
        self._relation = relation
        self._trgm = trgm
        #: Every word :meth:`known` found in the table.
        self.held: set[str] = set()
        self._fetched: dict[str, tuple[bool, list[tuple[str, int]]]] = {}

    def prefetch(self, words: Sequence[str]) -> None:
        """Ask, in one round trip, which of ``words`` the table holds and, for the others,
        what :meth:`similar` would answer: :meth:`known` and :meth:`similar` of these words
        then send nothing. The candidates' lookup is skipped for a word the table holds (a
        one-time filter per word)."""
        statement = sql.SQL(
            "SELECT q.typed, k.word IS NOT NULL, c.word, c.rows "
            "FROM pg_catalog.unnest(CAST(%s AS text[])) AS q(typed) "
            "LEFT JOIN {words} AS k ON k.word = q.typed "
            "LEFT JOIN LATERAL (SELECT w.word, w.rows FROM {words} AS w "
            "WHERE k.word IS NULL AND w.word OPERATOR({trgm}.%%) q.typed AND w.rows >= %s) AS c "
            "ON true ORDER BY q.typed, c.word"
        ).format(words=self._relation, trgm=self._trgm)
        with self._cursor.connection.pipeline():  # the threshold and the lookup, one round trip
            self._cursor.execute(
                b"SELECT pg_catalog.set_config('pg_trgm.similarity_threshold', %s, true)",
                [repr(CANDIDATE_SIMILARITY)],
            )
            rows = self._cursor.execute(statement, [list(words), MIN_DOCUMENT_FREQUENCY]).fetchall()
        for typed, held, word, count in rows:
            entry = self._fetched.setdefault(str(typed), (bool(held), []))
            if word is not None:
                entry[1].append((str(word), int(count)))

    def known(self, words: Sequence[str]) -> set[str]:
        if all(w in self._fetched for w in words):
            found = {w for w in words if self._fetched[w][0]}
        else:
            statement = sql.SQL("SELECT word FROM {} WHERE word = ANY(%s)").format(self._relation)
            found = {str(r[0]) for r in self._cursor.execute(statement, [list(words)])}
        self.held |= found
        return found

    def similar(self, words: Sequence[str]) -> dict[str, list[tuple[str, int]]]:
        if all(w in self._fetched for w in words):
            return {w: list(self._fetched[w][1]) for w in words}
        statement = sql.SQL(
            "SELECT q.typed, c.word, c.rows FROM pg_catalog.unnest(CAST(%s AS text[])) AS "
            "q(typed) CROSS JOIN LATERAL (SELECT w.word, w.rows FROM {} AS w "
            "WHERE w.word OPERATOR({}.%%) q.typed AND w.rows >= %s) AS c "
            "ORDER BY q.typed, c.word"
        ).format(self._relation, self._trgm)
        found: dict[str, list[tuple[str, int]]] = {w: [] for w in words}
        with self._cursor.connection.pipeline():  # the threshold and the lookup, one round trip
            self._cursor.execute(
                b"SELECT pg_catalog.set_config('pg_trgm.similarity_threshold', %s, true)",
                [repr(CANDIDATE_SIMILARITY)],
            )
            candidates = self._cursor.execute(
                statement, [list(words), MIN_DOCUMENT_FREQUENCY]
            ).fetchall()
        for typed, word, rows in candidates:
            found[str(typed)].append((str(word), int(rows)))
        return found
