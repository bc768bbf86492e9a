"""Hybrid search on PostgreSQL: the legs, their fusion and the page, in one read-only transaction.

Legs, each ranking :data:`~persistence.search.model.LEG_DEPTH` rows where that many match the
filters, on every page, so the pages of one search are windows of one fused order (filters are
hard constraints inside every leg):

* ``keyword``: full text over the allowed text columns, ``ts_rank(document, query, 1)`` over a
  bounded candidate set (:mod:`persistence.backends.postgres.search_sql`), each candidate's
  document read from the documents table ``rag-agent index`` writes while the row's text is
  unchanged (:mod:`persistence.backends.postgres.documents`), computed otherwise;
* ``trigram``: pg_trgm's ``word_similarity`` over short text columns
  (:func:`persistence.search.text.is_short_text_column`), threshold 0.6; skipped, and said so,
  without pg_trgm;
* ``semantic``: cosine distance over stored vectors (pgvector: the side table written by
  ``rag-agent index``, or a ``vector(n)`` column declared with ``vector_columns=``), with one
  round of pseudo-relevance feedback. Selective filters take the exact path (every filtered row
  measured); others the HNSW index with ``hnsw.iterative_scan = relaxed_order`` and
  ``hnsw.ef_search`` set in the transaction, and the exact path again should the index return
  too few rows. Without a filter, the feedback step and the leg share one scan: the query's
  :data:`~persistence.backends.postgres.vectors.POOL_ROWS` nearest rows, ranked again on the
  server by the moved query (:func:`~persistence.backends.postgres.search_sql.build_pooled`);
  with one, that pool would cost the iterative scan ten times the rows at a 10 % filter, and
  the feedback step's 5 rows and the leg's own scan go apart. Without pgvector or stored
  vectors, at most ``rerank_rows`` filtered rows are embedded in process (cached by text) and
  ranked there, and ``degraded`` says so.

The filters' rows are counted, by default, only up to a bound past every decision the count
takes (:meth:`PostgresSearch._count_bound`): the semantic leg's path, the in-process leg's rows
and the page's fill decide alike, and ``SearchResult.total_exact`` says when the total is a lower
bound; ``SearchRequest.exact_total`` counts every match.

The fusion is :func:`persistence.search.fusion.fuse` itself, over the legs' id lists, so the
order and scores are those of every other backend's fusion.

Thread-safety: a :class:`PostgresSearch` is safe to share; its state (the in-process vector cache,
:class:`~persistence.backends.postgres.vectors.RowVectors`, and whether a GIN index serves a table's
keyword document, the words the words tables were seen to hold) is guarded by locks.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import psycopg
from psycopg import sql

from persistence.backends.postgres import search_sql as q
from persistence.backends.postgres.catalog import Table
from persistence.backends.postgres.documents import documents_table, usable
from persistence.backends.postgres.known_words import KnownWords
from persistence.backends.postgres.pool import Connections
from persistence.backends.postgres.search_facts import SearchFacts
from persistence.backends.postgres.search_run import SearchRun
from persistence.backends.postgres.sql import build_count, filter_params
from persistence.backends.postgres.vectors import (
    POOL_ROWS,
    RowVectors,
    SearchSettings,
    at_least,
    by_cosine,
    ef_search,
    embeddings_table,
    leg_ef_search,
    parse_vector,
    row_text,
    vector_literal,
)
from persistence.backends.postgres.words import (
    correct_in,
    read_vocabulary,
    send_words_probe,
    words_to_look_up,
)
from persistence.errors import ConfigurationError, InvalidQueryError
from persistence.logs import get_logger
from persistence.query import Filter, Query
from persistence.search import SearchHit, SearchMode, SearchRequest, SearchResult
from persistence.search.embedder import Embedder, Vector
from persistence.search.feedback import FEEDBACK_ROWS, refine, takes_feedback
from persistence.search.fusion import Fused, fuse_tiers, weights_for
from persistence.search.model import LEG_DEPTH, TIER_DEPTH
from persistence.search.spelling import Correction
from persistence.search.text import is_short_text_column, keyword_terms, topical_text

__all__ = ["PostgresSearch", "SearchSettings"]

log = get_logger("persistence.postgres")

#: pg_trgm's ``word_similarity`` a short column's word must reach.
TRIGRAM_THRESHOLD = 0.6
_LEG_ORDER = ("keyword", "trigram", "semantic")
_INDEX_RECHECK_SECONDS = 60.0


class PostgresSearch:
    """The search of one :class:`~persistence.backends.postgres.PostgresBackend`."""

    def __init__(self, connections: Connections, schema: str, settings: SearchSettings) -> None:
        self._connections = connections
        self._schema = schema
        self.settings = settings
        self._vectors = RowVectors()
        self._lock = threading.Lock()
        self._keyword_indexes: dict[tuple[str, tuple[str, ...]], tuple[bool, float]] = {}
        #: Words the words tables held: a text of such words needs no spelling pass.
        self._known_words = KnownWords()

    def search(
        self,
        entry: Table,
        query: Query,
        filters: tuple[Filter, ...],
        request: SearchRequest,
        text_columns: tuple[str, ...],
        embedder: Embedder | None,
    ) -> SearchResult:
        table = query.table
        if "id" not in entry.column_set:
            raise InvalidQueryError(f"table {table!r} has no id column to rank rows by")
        entry.require(table, text_columns, "search")
        columns = entry.names if query.columns is None else query.columns
        mode, why = request.runnable_mode(embedder is not None)
        notes = [] if why is None else [why]
        spelling_key = (self._schema, table, text_columns)
        spelling = words_to_look_up(
            request.text, notes, filtered=bool(filters), known=self._known_words, key=spelling_key
        )
        corrected = Correction(request.text)
        vectored = embedder is not None and mode is not SearchMode.KEYWORD
        if spelling and vectored:
            # The text is embedded as corrected, and a model call holds no connection: the
            # words table is asked first, in a short transaction of its own.
            corrected = self._connections.run(
                lambda conn: self._correct(
                    conn, table, request.text, spelling, text_columns, notes
                ),
                "search",
                read=True,
            )
            spelling = []
        # Else the words table is asked inside the search's own transaction (its first round
        # trip and one more), and the legs rank the corrected text in the same snapshot.
        vector = (
            embedder.embed_query(topical_text(corrected.text, table))
            if embedder is not None and vectored
            else None
        )

        def work(conn: psycopg.Connection[Any]) -> SearchResult:
            cursor = conn.cursor()
            # Legs are cut at the tiers' fixed depths, never at offset + k: the fused order, and
            # so each page, must not depend on which page is asked.
            run = SearchRun(
                cursor, sql.Identifier(self._schema, table), filters, TIER_DEPTH, 0, notes
            )
            run.unique_ids = "id" in entry.unique
            # The count decides the semantic leg's path (exact under ``exact_rows``), the
            # in-process leg's rows (under ``rerank_rows``), and whether the legs ranked enough
            # for a page; a bound above all three changes none of them, and spares reading every
            # match (the search's costliest statement on a large table) unless asked.
            bound = None if request.exact_total else self._count_bound()
            count = build_count(table, self._schema, filters, bounded=bound is not None)
            count_params = filter_params(filters) + ([] if bound is None else [bound])
            # One snapshot for the count, every leg and the page; the statements that need no
            # answer of another go out together (one round trip).
            with conn.pipeline():
                cursor.execute(b"BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                cursor.execute(self._connections.set_timeout)
                counted = conn.cursor()
                counted.execute(count.as_bytes(None), count_params)
                words = send_words_probe(cursor, self._schema, table) if spelling else None
                facts = self._probe(cursor, table)
                run.total = int(counted.fetchall()[0][0])
            spelled = corrected
            if words is not None:
                spelled = self._corrected(words, cursor, table, request.text, spelling,
                                          text_columns, notes)  # fmt: skip
            text = spelled.text
            topical = topical_text(text, table)
            weights = weights_for(text, table)
            run.feedback = takes_feedback(weights)

            def legs_at(depth: int) -> dict[str, list[Any]]:
                run.depth = depth
                return self._legs(run, facts, mode, text, table, text_columns, vector, embedder)

            def deeper() -> dict[str, list[Any]]:
                said = list(notes)  # the first tier said it already
                run.path["tiers"] = 2
                try:
                    return legs_at(LEG_DEPTH)
                finally:
                    notes[:] = said

            legs = legs_at(TIER_DEPTH)
            run.path["tiers"] = 1
            fused = fuse_tiers(_ordered(legs), lambda: _ordered(deeper()), weights, request.depth)
            hits = self._page(run, fused, tuple(_ordered(legs)), columns, request)
            log.debug("postgres.search", table=table, legs=list(legs), **run.path)
            return SearchResult(
                hits=hits,
                mode=mode,
                legs=tuple(legs),
                query=topical,
                total_count=run.total,
                degraded="; ".join(notes) if notes else None,
                corrections=spelled.changes,
                total_exact=bound is None or run.total < bound,
            )

        result: SearchResult = self._connections.run(work, "search", read=True)
        return result

    def _correct(
        self,
        conn: psycopg.Connection[Any],
        table: str,
        text: str,
        words: list[str],
        text_columns: tuple[str, ...],
        notes: list[str],
    ) -> Correction:
        """``text`` corrected against the words table, in a read-only transaction of its own."""
        cursor = conn.cursor()
        with conn.pipeline():  # one round trip for the three
            cursor.execute(b"BEGIN READ ONLY")
            cursor.execute(self._connections.set_timeout)
            probe = send_words_probe(cursor, self._schema, table)
        found = self._corrected(probe, cursor, table, text, words, text_columns, notes)
        cursor.execute(b"COMMIT")
        return found

    def _corrected(
        self,
        probe: psycopg.Cursor[Any],
        cursor: psycopg.Cursor[Any],
        table: str,
        text: str,
        words: list[str],
        text_columns: tuple[str, ...],
        notes: list[str],
    ) -> Correction:
        """``text`` corrected by the words table the ``probe`` found (as typed, with a note,
        when there is none this search may use), inside ``cursor``'s transaction."""
        vocabulary, unread = read_vocabulary(probe, cursor, self._schema, table, text_columns)
        if unread is not None:
            notes.append(unread)
        if vocabulary is None:
            return Correction(text)
        key = (self._schema, table, text_columns)
        return correct_in(vocabulary, text, words, self._known_words, key)

    def _count_bound(self) -> int:
        """How far a search counts the matches when no exact total is asked: one row past the
        deepest depth any decision on the total compares with (see :meth:`search`)."""
        settings = self.settings
        return max(settings.exact_rows, settings.rerank_rows, LEG_DEPTH) + 1

    def _legs(
        self,
        run: SearchRun,
        facts: SearchFacts,
        mode: SearchMode,
        text: str,
        table: str,
        text_columns: tuple[str, ...],
        vector: Vector | None,
        embedder: Embedder | None,
    ) -> dict[str, list[Any]]:
        """Each leg's ids, best first, cut at ``run.depth`` (``text``: the corrected text).

        The settings, the keyword and trigram legs and the semantic leg's feedback scan go out
        in one pipeline (one round trip); the semantic leg's own scan follows, with the query
        the feedback moved (:func:`~persistence.search.feedback.refine`, in Python, as every
        backend refines). Without a filter on the HNSW path, the pooled scan (:meth:`_pooled`)
        is the leg itself, in the same pipeline."""
        notes = run.notes
        conn = run.cursor.connection
        keyword: tuple[str, ...] = ()
        short: tuple[str, ...] = ()
        trgm: str | None = None
        if mode in (SearchMode.HYBRID, SearchMode.KEYWORD):
            keyword = tuple(keyword_terms(text, table))
            if not keyword:
                notes.append("the text has no words to match, so the keyword leg ranked nothing")
            short = tuple(c for c in text_columns if is_short_text_column(c))
            if short and facts.trgm_schema is None:
                notes.append("pg_trgm is not installed: no trigram leg for short text columns")
            trgm = facts.trgm_schema if short else None
        semantic = vector is not None and embedder is not None
        source: q.VectorSource | None = None
        if semantic:
            assert embedder is not None
            source = self._vector_source(facts, table, text_columns, embedder, run.notes)
        stored = semantic and source is not None and facts.vector_schema is not None
        hnsw = stored and facts.has_hnsw and run.total > self.settings.exact_rows
        if stored and run.refined is None and not run.feedback:
            run.refined = vector  # no feedback step for this text: the query is its own
        cursors: dict[str, psycopg.Cursor[Any]] = {}
        started = time.perf_counter()
        if run.total:
            with conn.pipeline():
                feedback = stored and run.refined is None
                self._settings(run, facts, hnsw=hnsw, trigram=trgm is not None, feedback=feedback)
                if trgm is not None:
                    cursors["trigram"] = self._trigram(run, short, topical_text(text, table), trgm)
                if keyword:
                    cursors["keyword"] = self._keyword(run, facts, table, text_columns, keyword)
                if feedback and hnsw and not run.filters:
                    assert source is not None and vector is not None and embedder is not None
                    cursors["pooled"] = self._pooled(run, source, facts, vector, embedder)
                elif feedback:
                    assert source is not None and vector is not None and embedder is not None
                    cursors["feedback"] = self._nearest(
                        run, source, facts, vector, embedder, FEEDBACK_ROWS, True, hnsw=hnsw
                    )
                fetched = {name: cur.fetchall() for name, cur in cursors.items()}
        else:
            fetched = {}
        legs: dict[str, list[Any]] = {}
        if keyword:
            legs["keyword"] = [r[0] for r in fetched.get("keyword", [])]
        if trgm is not None:
            legs["trigram"] = [r[0] for r in fetched.get("trigram", [])]
        run.path["legs_ms"] = round((time.perf_counter() - started) * 1000, 2)
        pooled = fetched.get("pooled")
        if pooled is not None and len(pooled) >= min(run.depth, run.total):
            legs["semantic"] = [r[0] for r in pooled]
        elif semantic:
            if pooled is not None:
                # The scan found too few although enough rows match: the exact path's two
                # steps measure every filtered row.
                hnsw = False
                run.path["fallback"] = True
            assert vector is not None and embedder is not None
            legs["semantic"] = _timed(
                run,
                "semantic",
                self._semantic,
                run,
                facts,
                source,
                text_columns,
                vector,
                embedder,
                legs,
                fetched.get("feedback"),
                hnsw,
            )
        return legs

    def _settings(
        self, run: SearchRun, facts: SearchFacts, *, hnsw: bool, trigram: bool, feedback: bool
    ) -> None:
        """The transaction's settings for this tier's legs, in one statement: the HNSW scan's
        ``ef_search`` (the feedback step's when it runs in this tier, else the leg's own) and
        iterative scan, the trigram threshold, sequential scans off for the trigram leg
        (restored after it), and plans made with each call's values under a filter (a generic
        plan's guess of a filter's share can pick the wrong join)."""
        columns: list[sql.Composable] = []
        params: list[Any] = []
        if hnsw:
            scan = "relaxed_order" if facts.iterative else None
            run.ef = ef_search(run.depth) if feedback else leg_ef_search(run.depth)
            columns.append(sql.SQL("pg_catalog.set_config('hnsw.ef_search', %s, true)"))
            params.append(str(run.ef))
            if scan is not None:
                columns.append(sql.SQL("pg_catalog.set_config('hnsw.iterative_scan', %s, true)"))
                params.append(scan)
            run.path.update(path="hnsw", ef_search=str(run.ef),
                            iterative_scan=scan or "unavailable")  # fmt: skip
        if trigram:
            columns.append(
                sql.SQL("pg_catalog.set_config('pg_trgm.word_similarity_threshold', %s, true)")
            )
            params.append(str(TRIGRAM_THRESHOLD))
        if run.filters:
            columns.append(
                sql.SQL("pg_catalog.set_config('plan_cache_mode', 'force_custom_plan', true)")
            )
        if columns:
            statement = sql.SQL("SELECT ") + sql.SQL(", ").join(columns)
            run.cursor.execute(statement.as_bytes(None), params)

    # --- facts -----------------------------------------------------------------------------------

    def _probe(self, cursor: psycopg.Cursor[Any], table: str) -> SearchFacts:
        side = sql.Identifier(self._schema, embeddings_table(table)).as_string(None)
        base = sql.Identifier(self._schema, table).as_string(None)
        docs = sql.Identifier(self._schema, documents_table(table)).as_string(None)
        column = self.settings.vector_columns.get(table, ("", ""))[0]
        row = cursor.execute(q.probe_statement(), [column, side, base, docs]).fetchall()[0]
        meta: dict[str, Any] | None = None
        if row[3]:
            try:
                parsed = json.loads(row[3])
                meta = parsed if isinstance(parsed, dict) else None
            except ValueError:
                meta = None
        return SearchFacts(
            row[0], row[1], row[2], meta, bool(row[4]), row[5], at_least(row[6], 0, 8), row[7]
        )

    # --- legs ------------------------------------------------------------------------------------

    def _keyword(
        self,
        run: SearchRun,
        facts: SearchFacts,
        table: str,
        columns: Sequence[str],
        terms: Sequence[str],
    ) -> psycopg.Cursor[Any]:
        config = self.settings.text_search_config
        indexed = self._indexed(run, columns)
        # The stored documents serve only a search over the very columns, in the same order,
        # with the same configuration: another document would rank differently.
        stored = (
            sql.Identifier(self._schema, documents_table(table))
            if usable(facts.documents, columns, config)
            else None
        )
        statement = q.build_keyword(
            run.table,
            run.filters,
            columns,
            config,
            len(terms),
            indexed=indexed,
            stored=stored,
            by_address=run.unique_ids,
        )
        candidates = max(self.settings.keyword_candidates, run.depth)
        params = q.keyword_params(run.filters, terms, candidates, run.depth, indexed=indexed)
        run.path["keyword_index"] = indexed
        run.path["stored_documents"] = stored is not None
        return run.cursor.connection.cursor().execute(statement, params)

    def _indexed(self, run: SearchRun, columns: Sequence[str]) -> bool:
        """Whether the planner serves the keyword document by an index (asked once a minute
        per table and column set: an index created later is noticed)."""
        key = (run.table.as_string(None), tuple(columns))
        now = time.monotonic()
        with self._lock:
            known = self._keyword_indexes.get(key)
        if known is not None and now - known[1] < _INDEX_RECHECK_SECONDS:
            return known[0]
        statement = q.build_keyword_probe(run.table, columns, self.settings.text_search_config)
        probe = run.cursor.connection.cursor().execute(statement, ["probe"])
        plan = json.dumps(probe.fetchall()[0][0])
        indexed = '"Bitmap Index Scan"' in plan or '"Index Scan"' in plan
        with self._lock:
            self._keyword_indexes[key] = (indexed, now)
        return indexed

    def _trigram(
        self, run: SearchRun, columns: Sequence[str], text: str, schema: str
    ) -> psycopg.Cursor[Any]:
        # The planner overestimates what a trigram index returns for a text of several words and
        # scans the table instead, computing word_similarity on every row (100 ms at 10k rows
        # where the index answers in 0.2 ms): sequential scans are discouraged for this one
        # statement, then the transaction's setting is restored (the threshold: ``_settings``,
        # in the same pipeline).
        run.cursor.execute(
            b"SELECT pg_catalog.set_config('persistence.enable_seqscan', "
            b"pg_catalog.current_setting('enable_seqscan'), true), "
            b"pg_catalog.set_config('enable_seqscan', 'off', true)"
        )
        statement = q.build_trigram(run.table, run.filters, columns, schema)
        # The text appears once per column in the rank, then once per column in the condition.
        texts = [text] * len(columns)
        params = [*texts, *filter_params(run.filters), *texts, run.depth]
        found = run.cursor.connection.cursor().execute(statement, params)
        run.cursor.execute(
            b"SELECT pg_catalog.set_config('enable_seqscan', "
            b"pg_catalog.current_setting('persistence.enable_seqscan'), true)"
        )
        return found

    def _semantic(
        self,
        run: SearchRun,
        facts: SearchFacts,
        source: q.VectorSource | None,
        text_columns: tuple[str, ...],
        vector: Vector,
        embedder: Embedder,
        legs: Mapping[str, Sequence[Any]],
        feedback: list[Any] | None,
        hnsw: bool,
    ) -> list[Any]:
        if not run.total:
            return []  # no row matches the filters: nothing to rank (the source was checked)
        if source is None or facts.vector_schema is None:
            return self._rerank(run, text_columns, vector, embedder, legs)
        if run.refined is None:
            if feedback is None:  # the pooled scan fell short: measure every filtered row
                feedback = self._nearest(
                    run, source, facts, vector, embedder, FEEDBACK_ROWS, True, hnsw=False
                ).fetchall()
            if hnsw and len(feedback) < min(FEEDBACK_ROWS, run.total):
                # Fewer than asked although enough rows match: measure every filtered row.
                run.path["fallback"] = True
                feedback = self._nearest(
                    run, source, facts, vector, embedder, FEEDBACK_ROWS, True, hnsw=False
                ).fetchall()
            run.refined = refine(vector, [parse_vector(row[2]) for row in feedback])
        conn = run.cursor.connection
        with conn.pipeline():
            if hnsw and leg_ef_search(run.depth) != run.ef:
                # The tier's setting served the feedback step's 5 rows, which need the deeper
                # search; the leg's own scan needs only its depth (same round trip).
                run.ef = leg_ef_search(run.depth)
                run.cursor.execute(
                    b"SELECT pg_catalog.set_config('hnsw.ef_search', %s, true)", [str(run.ef)]
                )
                run.path["leg_ef_search"] = str(run.ef)
            found = self._nearest(
                run, source, facts, run.refined, embedder, run.depth, False, hnsw=hnsw
            )
            nearest = found.fetchall()
        if hnsw and len(nearest) < min(run.depth, run.total):
            run.path["fallback"] = True
            nearest = self._nearest(
                run, source, facts, run.refined, embedder, run.depth, False, hnsw=False
            ).fetchall()
        return [r[0] for r in nearest]

    def _pooled(
        self,
        run: SearchRun,
        source: q.VectorSource,
        facts: SearchFacts,
        vector: Vector,
        embedder: Embedder,
    ) -> psycopg.Cursor[Any]:
        """The semantic leg and its feedback in one HNSW scan (:func:`search_sql.build_pooled`);
        a cursor whose rows are yet to be fetched."""
        assert facts.vector_schema is not None
        pool = max(POOL_ROWS, run.depth)
        literal = vector_literal(vector)
        params = q.nearest_params(source, run.filters, literal, embedder.model_id, pool)
        params += [literal, run.depth]
        statement = q.build_pooled(run.table, run.filters, source, facts.vector_schema)
        run.path["pool"] = pool
        return run.cursor.connection.cursor().execute(statement, params)

    def _vector_source(
        self,
        facts: SearchFacts,
        table: str,
        text_columns: tuple[str, ...],
        embedder: Embedder,
        notes: list[str],
    ) -> q.VectorSource | None:
        """Where ``table``'s stored vectors are, checked against ``embedder``; ``None`` (with a
        note) when there are none the search may use."""
        if facts.vector_schema is None:
            notes.append(
                "pgvector is not installed on the server: the semantic leg ranked at most "
                f"{self.settings.rerank_rows} filtered rows embedded in process"
            )
            return None
        declared = self.settings.vector_columns.get(table)
        if declared is not None:
            column, model_id = declared
            if facts.column_dimension is None or facts.column_dimension <= 0:
                raise ConfigurationError(
                    f"vector_columns names {table}.{column}, which is not a vector(n) column"
                )
            embedder.check_stored(model_id=model_id, dimension=facts.column_dimension)
            relation = sql.Identifier(self._schema, table)
            return q.VectorSource(relation, "id", column, facts.column_dimension, None)
        meta = facts.side_meta
        if facts.side_dimension is None or meta is None:
            notes.append(
                f"no stored vectors of {table!r} this role may read (run `rag-agent index "
                f"{table}` and grant SELECT on {embeddings_table(table)}): the semantic leg "
                f"ranked at most {self.settings.rerank_rows} filtered rows embedded in process"
            )
            return None
        indexed = meta.get("columns")
        if not isinstance(indexed, list) or not set(indexed) <= set(text_columns):
            notes.append(
                f"the stored vectors of {table!r} embed columns this search may not read: the "
                f"semantic leg ranked at most {self.settings.rerank_rows} filtered rows embedded "
                "in process"
            )
            return None
        embedder.check_stored(model_id=str(meta.get("model_id")), dimension=facts.side_dimension)
        relation = sql.Identifier(self._schema, embeddings_table(table))
        return q.VectorSource(relation, "row_id", "embedding", facts.side_dimension, "model_id")

    def _nearest(
        self,
        run: SearchRun,
        source: q.VectorSource,
        facts: SearchFacts,
        vector: Vector,
        embedder: Embedder,
        limit: int,
        with_vectors: bool,
        *,
        hnsw: bool,
    ) -> psycopg.Cursor[Any]:
        """The nearest ``limit`` filtered rows to ``vector`` (the HNSW path's settings are the
        tier's: :meth:`_settings`); a cursor whose rows are yet to be fetched."""
        assert facts.vector_schema is not None
        literal = vector_literal(vector)
        params = q.nearest_params(source, run.filters, literal, embedder.model_id, limit)
        if not hnsw:
            run.path.setdefault("path", "exact")
        statement = q.build_nearest(
            run.table,
            run.filters,
            source,
            facts.vector_schema,
            exact=not hnsw,
            with_vectors=with_vectors,
        )
        return run.cursor.connection.cursor().execute(statement, params)

    def _rerank(
        self,
        run: SearchRun,
        columns: tuple[str, ...],
        vector: Vector,
        embedder: Embedder,
        legs: Mapping[str, Sequence[Any]],
    ) -> list[Any]:
        """The semantic leg in process over at most ``rerank_rows`` filtered rows: all of them
        when that many match, else the keyword legs' rows and then the first rows in id order."""
        budget = self.settings.rerank_rows
        rows: dict[Any, str] = {}
        if run.total > budget:
            keyed = list(dict.fromkeys(k for leg in legs.values() for k in leg))[:budget]
            if keyed:
                statement = q.build_texts(run.table, run.filters, columns, by_id=True)
                for row in run.cursor.execute(statement, [*filter_params(run.filters), keyed]):
                    rows[row[0]] = row_text(row[1:])
        if len(rows) < budget:
            statement = q.build_texts(run.table, run.filters, columns, by_id=False)
            params = [*filter_params(run.filters), budget]
            for row in run.cursor.execute(statement, params):
                if len(rows) >= budget:
                    break
                rows.setdefault(row[0], row_text(row[1:]))
        vectors = self._vectors.vectors(rows, columns, embedder)
        ranked = by_cosine(vector, vectors)
        refined = (
            refine(vector, [vectors[k] for k in ranked[:FEEDBACK_ROWS]]) if run.feedback else vector
        )
        run.path["path"] = "in-process"
        return by_cosine(refined, vectors)[: run.depth]

    # --- the page --------------------------------------------------------------------------------

    def _page(
        self,
        run: SearchRun,
        fused: list[Fused],
        legs: tuple[str, ...],
        columns: Sequence[str],
        request: SearchRequest,
    ) -> tuple[SearchHit, ...]:
        depth = request.depth
        if len(fused) < min(depth, run.total):
            # The legs ranked too few for the page: the other matching rows follow, in id
            # order, unranked (as on every backend).
            known = [key for key, _, _ in fused]
            statement = q.build_fill(run.table, run.filters, exclude=bool(known))
            params = [*filter_params(run.filters), *([known] if known else []), depth - len(fused)]
            blank = dict.fromkeys(legs)
            fused = fused + [
                (r[0], 0.0, dict(blank)) for r in run.cursor.execute(statement, params)
            ]
        page = fused[request.offset : depth]
        if not page:
            run.cursor.execute(b"COMMIT")
            return ()
        statement = q.build_rows(run.table, columns)
        with run.cursor.connection.pipeline():
            rows = run.cursor.connection.cursor().execute(statement, [[k for k, _, _ in page]])
            run.cursor.execute(b"COMMIT")
            found = {r[0]: r[1:] for r in rows.fetchall()}
        return tuple(
            SearchHit(
                row=dict(zip(columns, found[key], strict=True)),
                score=score,
                ranks=MappingProxyType(ranks),
            )
            for key, score, ranks in page
            if key in found
        )


def _ordered(legs: Mapping[str, list[Any]]) -> dict[str, list[Any]]:
    """``legs`` in fusion order (keyword, trigram, semantic), as every backend fuses."""
    return {name: legs[name] for name in _LEG_ORDER if name in legs}


def _timed(run: SearchRun, name: str, leg: Callable[..., list[Any]], *args: Any) -> list[Any]:
    """``leg(*args)``, its milliseconds recorded for the debug log."""
    started = time.perf_counter()
    try:
        return leg(*args)
    finally:
        run.path[f"{name}_ms"] = round((time.perf_counter() - started) * 1000, 2)
