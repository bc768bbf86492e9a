"""SQL of the PostgreSQL search legs: ``psycopg.sql`` objects and bound values only.

Every word of the search text is a bound value handed to ``plainto_tsquery`` (so no text ever
becomes tsquery syntax), every filter value a bound value, every identifier comes from the
catalog. Functions and operators of an extension are named with the extension's schema
(``OPERATOR(public.<=>)``), since the backend's sessions run with ``search_path=pg_catalog``.

The keyword leg's document is the expression a GIN index must repeat to serve it::

    to_tsvector('english'::regconfig, coalesce(subject, '') || ' ' || coalesce(body, ''))

(each column cast to ``text``, which on a text column PostgreSQL drops, and which makes an enum
column's label text rather than comparing it with ``''``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import sql

from persistence.backends.postgres.sql import _where, filter_params
from persistence.query import Filter
from persistence.search.feedback import FEEDBACK_ROWS, FEEDBACK_WEIGHT

__all__ = [
    "VectorSource",
    "build_fill",
    "build_keyword",
    "build_keyword_probe",
    "build_nearest",
    "build_pooled",
    "build_rows",
    "build_texts",
    "build_trigram",
    "document",
    "document_text",
    "keyword_params",
    "probe_statement",
]


#: Rows each word of the keyword leg may bring, as a multiple of the candidates ranked.
_PER_WORD_FACTOR = 2


def _where_and(filters: Sequence[Filter], extra: sql.Composable | None) -> sql.Composable:
    """``WHERE`` the filters and ``extra`` (the filters' placeholders come first)."""
    where = _where(filters)
    if extra is None:
        return where
    return where + (sql.SQL(" AND ") if filters else sql.SQL(" WHERE ")) + extra


def document_text(columns: Sequence[str], alias: str | None = None) -> sql.Composable:
    """The text the keyword document parses: ``columns`` joined by a space (see the module
    docstring)."""
    # Cast to text: on an enum column ``''`` is no valid label (22P02); on a text column the
    # cast is no node at all, so an index on ``coalesce(col, '')`` still serves the document.
    parts = [
        sql.SQL("COALESCE(CAST({} AS pg_catalog.text), '')").format(
            sql.Identifier(alias, c) if alias else sql.Identifier(c)
        )
        for c in columns
    ]
    return sql.SQL(" || ' ' || ").join(parts)


def document(columns: Sequence[str], config: str, alias: str | None = None) -> sql.Composable:
    """The keyword leg's ``tsvector`` over ``columns`` (see the module docstring)."""
    return sql.SQL("pg_catalog.to_tsvector(CAST({} AS pg_catalog.regconfig), {})").format(
        sql.Literal(config), document_text(columns, alias)
    )


def _ranked_document(
    columns: Sequence[str], config: str, stored: sql.Identifier | None
) -> sql.Composable:
    """The document a candidate of alias ``t`` is ranked by: with ``stored`` (a documents table
    joined as ``s``, :mod:`persistence.backends.postgres.documents`), its stored document
    while the row's text is the one it was made of, else (and without one) computed now."""
    computed = document(columns, config, "t")
    if stored is None:
        return computed
    return sql.SQL(
        "CASE WHEN s.source = pg_catalog.md5({text}) THEN s.document ELSE {computed} END"
    ).format(text=document_text(columns, "t"), computed=computed)


def _tsquery(config: str, terms: int) -> sql.Composable:
    # OR of one plainto_tsquery per word: each word is a bound value, parsed as plain text.
    one = sql.SQL("pg_catalog.plainto_tsquery(CAST({} AS pg_catalog.regconfig), %s)").format(
        sql.Literal(config)
    )
    return sql.SQL("(") + sql.SQL(" || ").join([one] * terms) + sql.SQL(")")


def build_keyword(
    table: sql.Identifier,
    filters: Sequence[Filter],
    columns: Sequence[str],
    config: str,
    terms: int,
    *,
    indexed: bool,
    stored: sql.Identifier | None = None,
    by_address: bool = False,
) -> sql.Composed:
    """The keyword leg: ids, best first, by ``ts_rank(document, query, 1)`` (length-normalised),
    then id.

    ``indexed`` (a GIN index serves the document): ranking needs each candidate's document,
    so candidates are first bounded cheaply, from the index alone: at most ``per_word`` rows per
    word (one index lookup each), the rows among them matching the most words first, then by
    id; values: :func:`keyword_params`. Otherwise
    every filtered row's document is taken once, and every match ranked; values: the
    filters', the words, the words again, the depth. ``stored``: the table's documents table,
    whose documents are read instead of computed where still current (:func:`_ranked_document`).
    ``by_address`` (``indexed`` only; the ids are unique: a unique index keys ``id`` alone): each
    candidate's row is read again by the address its word's scan found it at (``tableoid``,
    ``ctid``: one snapshot, so the very row version) instead of by a primary-key lookup, the
    same rows in the same order (a sentence's 200 candidates: 0.6 ms less at 100k rows).
    """
    ranked = _ranked_document(columns, config, stored)
    joined = (
        sql.SQL("")
        if stored is None
        else sql.SQL(" LEFT JOIN {} AS s ON s.row_id = t.id").format(stored)
    )
    if not indexed:
        # A subquery keeps the filters' column names apart from the documents table's (and
        # reads only the columns the search may read).
        return sql.SQL(
            "WITH docs AS MATERIALIZED (SELECT t.id, {doc} AS d "
            "FROM (SELECT id{columns} FROM {table}{where}) AS t{joined}) "
            "SELECT id FROM docs WHERE d @@ {query} "
            "ORDER BY pg_catalog.ts_rank(d, {query}, 1) DESC, id LIMIT %s"
        ).format(
            doc=ranked,
            columns=sql.SQL("").join(
                sql.SQL(", {}").format(sql.Identifier(c)) for c in columns if c != "id"
            ),
            table=table,
            where=_where(filters),
            joined=joined,
            query=_tsquery(config, terms),
        )
    # Each word brings at most %s rows: a word most rows contain would otherwise cost a heap
    # visit per row; rows holding several words, the rarer ones included, still come first.
    # With unique ids, a row's id and its address go together: grouping by both is grouping by
    # id, and the address reads the row back without an index descent (a TID scan).
    address = sql.SQL(", tableoid AS o, ctid AS a") if by_address else sql.SQL("")
    single = sql.SQL("(SELECT id{address} FROM {table}{where} LIMIT %s)").format(
        address=address,
        table=table,
        where=_where_and(
            filters, document(columns, config) + sql.SQL(" @@ ") + _tsquery(config, 1)
        ),
    )
    found = (
        sql.SQL("JOIN candidates AS c ON t.tableoid = c.o AND t.ctid = c.a")
        if by_address
        else sql.SQL("JOIN candidates AS c ON c.id = t.id")
    )
    return sql.SQL(
        "WITH hits AS ({hits}), candidates AS (SELECT id{address} FROM hits GROUP BY id{grouped} "
        "ORDER BY pg_catalog.count(*) DESC, id LIMIT %s) "
        "SELECT t.id FROM {table} AS t {found}{joined} "
        "ORDER BY pg_catalog.ts_rank({doc}, {query}, 1) DESC, t.id LIMIT %s"
    ).format(
        hits=sql.SQL(" UNION ALL ").join([single] * terms),
        address=sql.SQL(", o, a") if by_address else sql.SQL(""),
        grouped=sql.SQL(", o, a") if by_address else sql.SQL(""),
        table=table,
        found=found,
        joined=joined,
        doc=ranked,
        query=_tsquery(config, terms),
    )


def build_keyword_probe(table: sql.Identifier, columns: Sequence[str], config: str) -> sql.Composed:
    """``EXPLAIN`` of a one-word match: whether the planner serves the document by an index."""
    return sql.SQL("EXPLAIN (FORMAT JSON) SELECT id FROM {} WHERE {} @@ {}").format(
        table, document(columns, config), _tsquery(config, 1)
    )


def keyword_params(
    filters: Sequence[Filter], terms: Sequence[str], candidates: int, depth: int, *, indexed: bool
) -> list[Any]:
    values = filter_params(filters)
    if not indexed:
        return [*values, *terms, *terms, depth]
    params: list[Any] = []
    for term in terms:
        params.extend(values)
        params.append(term)
        params.append(candidates * _PER_WORD_FACTOR)
    return [*params, candidates, *terms, depth]


def build_trigram(
    table: sql.Identifier, filters: Sequence[Filter], columns: Sequence[str], trgm: str
) -> sql.Composed:
    """The trigram leg: ids whose short columns hold a word similar to the text (pg_trgm's
    ``<%``, the ``word_similarity_threshold`` set in the transaction), best similarity first,
    then id. Values: the text once per column (the rank), the filters', the text once per column
    (the condition), the depth.

    The rows are grouped by their short columns' values and each group's similarity computed
    once: the index's recheck already computed it for every row, and short columns repeat (a
    subject matching thousands of rows otherwise cost a second computation per row, half the
    leg's time). ``GROUP BY`` groups nulls together; ``GREATEST`` skips a null column's ``NULL``
    similarity as before."""
    operator = sql.SQL("OPERATOR({}.<%%)").format(sql.Identifier(trgm))
    similar = sql.SQL(" OR ").join(
        sql.SQL("%s {} {}").format(operator, sql.Identifier(c)) for c in columns
    )
    similarity = sql.SQL(", ").join(
        sql.SQL("{}.word_similarity(%s, {})").format(sql.Identifier(trgm), sql.Identifier(c))
        for c in columns
    )
    return sql.SQL(
        "SELECT u.id FROM (SELECT GREATEST({sim}) AS s, pg_catalog.array_agg(id) AS ids "
        "FROM {table}{where} GROUP BY {columns}) AS g "
        "CROSS JOIN LATERAL pg_catalog.unnest(g.ids) AS u(id) ORDER BY g.s DESC, u.id LIMIT %s"
    ).format(
        table=table,
        where=_where_and(filters, sql.SQL("(") + similar + sql.SQL(")")),
        sim=similarity,
        columns=sql.SQL(", ").join(sql.Identifier(c) for c in columns),
    )


class VectorSource:
    """Where a table's row vectors are: ``relation`` (the side table, or the table itself) with
    its key and vector columns, and the model the rows must carry (side table only)."""

    __slots__ = ("dimension", "key", "model_column", "relation", "vector")

    def __init__(
        self,
        relation: sql.Identifier,
        key: str,
        vector: str,
        dimension: int,
        model_column: str | None,
    ) -> None:
        self.relation = relation
        self.key = key
        self.vector = vector
        self.dimension = dimension
        self.model_column = model_column


def _nearest_parts(
    table: sql.Identifier, filters: Sequence[Filter], source: VectorSource, vector_schema: str
) -> tuple[sql.Composable, sql.Composable, sql.Composable, sql.Composable]:
    """The row key, the distance to the query (``%s``), the filtered rows (``FROM``, alias ``v``)
    and the model's condition of a nearest-rows statement."""
    vs = sql.Identifier(vector_schema)
    distance = sql.SQL("v.{vec} OPERATOR({vs}.<=>) CAST(%s AS {vs}.vector)").format(
        vec=sql.Identifier(source.vector), vs=vs
    )
    model = (
        sql.SQL(" AND v.{} = %s").format(sql.Identifier(source.model_column))
        if source.model_column
        else sql.SQL("")
    )
    key = sql.Identifier("v", source.key)
    if source.relation == table:
        # The table's own vector column: the filters apply to it directly.
        inner = sql.SQL("{table} AS v WHERE v.{vec} IS NOT NULL").format(
            table=table, vec=sql.Identifier(source.vector)
        )
        filtered = sql.SQL("{} AND v.{} IN (SELECT id FROM {}{})").format(
            inner, sql.Identifier(source.key), table, _where(filters)
        )
    else:
        # A subquery keeps the filters' column names apart from the side table's.
        filtered = sql.SQL(
            "{side} AS v JOIN (SELECT id FROM {table}{where}) AS t ON t.id = {key}"
        ).format(side=source.relation, table=table, where=_where(filters), key=key)
        filtered = sql.SQL("{} WHERE true").format(filtered)
    return key, distance, filtered, model


def build_nearest(
    table: sql.Identifier,
    filters: Sequence[Filter],
    source: VectorSource,
    vector_schema: str,
    *,
    exact: bool,
    with_vectors: bool,
) -> sql.Composed:
    """The semantic leg: ids (and, with ``with_vectors``, the vectors as text) by cosine
    distance, then id.

    ``exact`` measures every filtered row (a materialised step no index can order), then orders
    by ``(distance, id)``: the path for selective filters and small tables. Otherwise the
    ``ORDER BY distance LIMIT`` an HNSW index serves (iteratively scanned, relaxed order) runs
    first, materialised, and its rows are sorted again by ``(distance, id)``. Values: the query
    vector (text), the model (side table only), the filters', the depth.
    """
    key, distance, filtered, model = _nearest_parts(table, filters, source, vector_schema)
    vectors = (
        sql.SQL(", CAST(v.{} AS pg_catalog.text) AS vector").format(sql.Identifier(source.vector))
        if with_vectors
        else sql.SQL("")
    )
    if exact:
        # Distances computed in a materialised step, then sorted: an ``ORDER BY distance, id``
        # straight on the join is served by the HNSW index plus an incremental sort whenever the
        # planner finds that cheaper (a generic plan of a prepared statement does), and then
        # returns what ``hnsw.ef_search`` finds (40 rows by default), not every filtered row.
        scored = sql.SQL(
            "WITH scored AS MATERIALIZED (SELECT {key} AS id, {distance} AS distance "
            "FROM {filtered}{model}) "
        ).format(key=key, distance=distance, filtered=filtered, model=model)
        if not with_vectors:
            return scored + sql.SQL(
                "SELECT id, distance FROM scored ORDER BY distance, id LIMIT %s"
            )
        return scored + sql.SQL(
            "SELECT s.id, s.distance{vectors} FROM (SELECT id, distance FROM scored "
            "ORDER BY distance, id LIMIT %s) AS s JOIN {relation} AS v ON {key} = s.id "
            "ORDER BY s.distance, s.id"
        ).format(vectors=vectors, relation=source.relation, key=key)
    select = sql.SQL(
        "SELECT {key} AS id, {distance} AS distance{vectors} FROM {filtered}{model}"
    ).format(key=key, distance=distance, vectors=vectors, filtered=filtered, model=model)
    return sql.SQL(
        "WITH nearest AS MATERIALIZED ({} ORDER BY distance LIMIT %s) "
        "SELECT * FROM nearest ORDER BY distance, id"
    ).format(select)


def build_pooled(
    table: sql.Identifier, filters: Sequence[Filter], source: VectorSource, vector_schema: str
) -> sql.Composed:
    """The semantic leg with its round of feedback in one HNSW scan: the ``pool`` nearest filtered
    rows to the query (the scan of :func:`build_nearest`, their vectors kept), the query moved
    toward the mean of the first :data:`~persistence.search.feedback.FEEDBACK_ROWS` of them, and
    the pool ranked again by the moved query: ids and distances by ``(distance, id)``, cut at the
    depth.

    The moved query is :func:`~persistence.search.feedback.refine`'s, in double precision from
    the vectors' text as the library reads them, summed in its order, as the Supabase ranking
    function computes it (:mod:`persistence.admin.supabase_search_sql`): both rank a pool alike.
    Values: those of :func:`nearest_params` (the pool's size as its depth), then the query
    vector (text) again and the depth.
    """
    vs = sql.Identifier(vector_schema)
    key, distance, filtered, model = _nearest_parts(table, filters, source, vector_schema)
    # The vector kept as a vector: the second ranking stays on the server.
    inner = sql.SQL(
        "SELECT {key} AS id, {distance} AS distance, v.{vec} AS e FROM {filtered}{model}"
    ).format(
        key=key,
        distance=distance,
        vec=sql.Identifier(source.vector),
        filtered=filtered,
        model=model,
    )
    return sql.SQL(
        "WITH pool AS MATERIALIZED ({inner} ORDER BY distance LIMIT %s), "
        "top AS (SELECT CAST(p.e AS pg_catalog.text) AS v, "
        "pg_catalog.row_number() OVER (ORDER BY p.distance, p.id) AS n "
        "FROM pool AS p ORDER BY p.distance, p.id LIMIT {rows}), "
        "mean AS (SELECT c.i, pg_catalog.sum(CAST(c.x AS pg_catalog.float8) ORDER BY top.n) "
        "/ pg_catalog.count(*) AS m FROM top, pg_catalog.unnest(pg_catalog.string_to_array("
        "pg_catalog.btrim(top.v, '[]'), ',')) WITH ORDINALITY AS c(x, i) GROUP BY c.i), "
        "moved AS (SELECT q.i, CAST(q.x AS pg_catalog.float8) + "
        "CAST({weight} AS pg_catalog.float8) * mean.m AS y "
        "FROM pg_catalog.unnest(pg_catalog.string_to_array(pg_catalog.btrim(%s, '[]'), ',')) "
        "WITH ORDINALITY AS q(x, i) JOIN mean ON mean.i = q.i), "
        "refined AS (SELECT CAST(pg_catalog.array_agg(y / l.norm ORDER BY i) AS {vs}.vector) "
        "AS r FROM moved, (SELECT pg_catalog.sqrt(pg_catalog.sum(y * y ORDER BY i)) AS norm "
        "FROM moved) AS l) "
        "SELECT p.id, p.e OPERATOR({vs}.<=>) refined.r AS distance FROM pool AS p, refined "
        "ORDER BY 2, p.id LIMIT %s"
    ).format(
        inner=inner,
        vs=vs,
        rows=sql.Literal(FEEDBACK_ROWS),
        weight=sql.Literal(repr(FEEDBACK_WEIGHT)),
    )


def nearest_params(
    source: VectorSource,
    filters: Sequence[Filter],
    query_vector: str,
    model_id: str,
    depth: int,
) -> list[Any]:
    values = filter_params(filters)
    if source.model_column is None:
        return [query_vector, *values, depth]
    return [query_vector, *values, model_id, depth]


def build_fill(table: sql.Identifier, filters: Sequence[Filter], exclude: bool) -> sql.Composed:
    """Filtered ids in id order (not among ``%s`` when ``exclude``), ``LIMIT %s``."""
    extra = sql.SQL("NOT (id = ANY(%s))") if exclude else None
    return sql.SQL("SELECT id FROM {}{} ORDER BY id LIMIT %s").format(
        table, _where_and(filters, extra)
    )


def build_rows(table: sql.Identifier, columns: Sequence[str]) -> sql.Composed:
    """``id`` and ``columns`` of the rows whose id is in ``%s``."""
    return sql.SQL("SELECT id, {} FROM {} WHERE id = ANY(%s)").format(
        sql.SQL(", ").join(sql.Identifier(c) for c in columns), table
    )


def build_texts(
    table: sql.Identifier, filters: Sequence[Filter], columns: Sequence[str], by_id: bool
) -> sql.Composed:
    """``id`` and the text ``columns`` of filtered rows: those whose id is in ``%s`` when
    ``by_id``, else the first ``%s`` in id order (values: the filters', then that)."""
    cols = sql.SQL(", ").join(sql.Identifier(c) for c in columns)
    if by_id:
        return sql.SQL("SELECT id, {} FROM {}{}").format(
            cols, table, _where_and(filters, sql.SQL("id = ANY(%s)"))
        )
    return sql.SQL("SELECT id, {} FROM {}{} ORDER BY id LIMIT %s").format(
        cols, table, _where(filters)
    )


# One round trip tells what the search may use: the schemas pgvector and pg_trgm live in (NULL
# when not installed), and the side table's vector dimension, HNSW index and description (NULL
# when it does not exist or is not readable), a vector column's dimension, pgvector's version,
# and the documents table's description (NULL when it does not exist or is not readable).
_PROBE = """
SELECT
  (SELECT n.nspname FROM pg_catalog.pg_extension e
     JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'),
  (SELECT n.nspname FROM pg_catalog.pg_extension e
     JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm'),
  (SELECT a.atttypmod FROM pg_catalog.pg_attribute a
     WHERE a.attrelid = s.oid AND a.attname = 'embedding' AND NOT a.attisdropped
       AND pg_catalog.has_table_privilege(s.oid, 'SELECT')),
  (SELECT pg_catalog.obj_description(s.oid, 'pg_class')),
  EXISTS (SELECT 1 FROM pg_catalog.pg_index x
            JOIN pg_catalog.pg_class i ON i.oid = x.indexrelid
            JOIN pg_catalog.pg_am am ON am.oid = i.relam
          WHERE x.indrelid IN (s.oid, b.oid) AND am.amname = 'hnsw'),
  (SELECT a.atttypmod FROM pg_catalog.pg_attribute a
     WHERE a.attrelid = b.oid AND a.attname = %s AND NOT a.attisdropped),
  (SELECT e.extversion FROM pg_catalog.pg_extension e WHERE e.extname = 'vector'),
  CASE WHEN d.oid IS NOT NULL AND pg_catalog.has_table_privilege(d.oid, 'SELECT')
       THEN pg_catalog.obj_description(d.oid, 'pg_class') END
FROM (SELECT pg_catalog.to_regclass(%s) AS oid) AS s,
     (SELECT pg_catalog.to_regclass(%s) AS oid) AS b,
     (SELECT pg_catalog.to_regclass(%s) AS oid) AS d
"""


def probe_statement() -> bytes:
    """Values: the vector column's name (or ``''``), the side table's, the table's and the
    documents table's qualified names."""
    return _PROBE.encode()
