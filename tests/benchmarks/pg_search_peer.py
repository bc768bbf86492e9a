"""The peer of hybrid search: LangChain's ``PGVectorStore`` (``langchain-postgres``) with its
``HybridSearchConfig``, on the same PostgreSQL, rows, vectors, HNSW index and ``k`` as
``facade.search``.

Its table is filled from the library's own rows and side table (``inquiries_embeddings``): the
same precomputed vectors, written straight into the store's layout (``langchain_id``,
``content``, ``embedding``, ``content_tsv``, a ``client_id`` metadata column), not embedded a
second time. Its indexes: HNSW (``vector_cosine_ops``, pgvector's defaults, like the side table's),
a GIN on ``content_tsv`` and a btree on ``client_id``. Queried through the store's synchronous API
on a SQLAlchemy engine with the psycopg driver, connected as the same SELECT-only role.

Used by :mod:`tests.benchmarks.pg_search` (the bench) and :mod:`tests.data.relevance_peer` (P@10
on the labelled set). Installed by the ``bench`` extra only.
"""

from __future__ import annotations

import importlib.util
import statistics
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

#: Rows each leg of the peer ranks before its fusion, as a multiple of ``k``.
LEG_FACTOR = 4


def peer_installed() -> bool:
    """True when ``langchain-postgres`` (and SQLAlchemy) can be imported."""
    return importlib.util.find_spec("langchain_postgres") is not None


def leg_depth(k: int) -> int:
    """Rows each leg ranks for ``k`` results: ``LEG_FACTOR`` times ``k``, at least pgvector's
    default ``hnsw.ef_search`` (40)."""
    return max(k * LEG_FACTOR, 40)


def peer_table(table: str) -> str:
    return f"peer_{table}"


def build_table(
    admin_dsn: str,
    table: str,
    columns: Sequence[str],
    metadata: Sequence[str],
    grant_to: str,
) -> float:
    """Make ``peer_<table>`` from ``table`` and its side table (the vectors ``index_table``
    stored), with the store's indexes; returns the seconds its HNSW index took to build."""
    import psycopg

    target, source = sql.Identifier(peer_table(table)), sql.Identifier(table)
    side = sql.Identifier(f"{table}_embeddings")
    # The text the side table's vectors were made of (``row_text``: non-empty values, one per
    # line), so each row's content and vector agree.
    parts = [sql.SQL("NULLIF(t.{}::text, '')").format(sql.Identifier(c)) for c in columns]
    content = sql.SQL("concat_ws(E'\\n', {})").format(sql.SQL(", ").join(parts))
    meta = sql.SQL("").join(sql.SQL(", t.{}").format(sql.Identifier(c)) for c in metadata)
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        (kind,) = conn.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = %s::regclass AND attname = 'embedding'",
            [f"{table}_embeddings"],
        ).fetchone() or ("vector",)
        conn.execute(
            sql.SQL(
                "CREATE TABLE {target} AS SELECT t.id AS langchain_id, {content} AS content, "
                "e.embedding::{kind} AS embedding, to_tsvector('pg_catalog.english', {content}) "
                "AS content_tsv{meta}, '{{}}'::json AS langchain_metadata "
                "FROM {source} AS t JOIN {side} AS e ON e.row_id = t.id"
            ).format(
                target=target,
                content=content,
                kind=sql.SQL(kind),
                meta=meta,
                source=source,
                side=side,
            )
        )
        conn.execute(sql.SQL("ALTER TABLE {} ADD PRIMARY KEY (langchain_id)").format(target))
        started = time.perf_counter()
        conn.execute(
            sql.SQL("CREATE INDEX ON {} USING hnsw (embedding vector_cosine_ops)").format(target)
        )
        hnsw_seconds = time.perf_counter() - started
        conn.execute(sql.SQL("CREATE INDEX ON {} USING gin (content_tsv)").format(target))
        for column in metadata:
            conn.execute(sql.SQL("CREATE INDEX ON {} ({})").format(target, sql.Identifier(column)))
        conn.execute(sql.SQL("ANALYZE {}").format(target))
        conn.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(target, sql.Identifier(grant_to)))
    return hnsw_seconds


def settle(admin_dsn: str) -> list[str]:
    """Vacuum and analyse every table of the database's ``public`` schema (hint bits and the
    visibility map set alike on both sides, whoever wrote last), then read each of its tables and
    indexes, and their TOAST, into shared buffers (``pg_prewarm``): the first timed queries of
    either contender then find what the later ones find, not a cold or evicted index. Returns
    the relations read."""
    import psycopg

    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(b"CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        tables = [
            name
            for (name,) in conn.execute(
                b"SELECT c.oid::regclass::text FROM pg_class c "
                b"WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'"
            ).fetchall()
        ]
        for table in tables:
            conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(sql.SQL(table)))
        rows = conn.execute(
            b"SELECT c.oid::regclass::text, pg_prewarm(c.oid) FROM pg_class c "
            b"WHERE c.relkind IN ('r', 'i', 't') AND (c.relnamespace = 'public'::regnamespace "
            b"OR c.oid IN (SELECT reltoastrelid FROM pg_class WHERE relnamespace = "
            b"'public'::regnamespace) OR c.oid IN (SELECT indexrelid FROM pg_index WHERE "
            b"indrelid IN (SELECT reltoastrelid FROM pg_class WHERE relnamespace = "
            b"'public'::regnamespace)))"
        ).fetchall()
    return [str(name) for name, _ in rows]


@dataclass
class Peer:
    """A ``PGVectorStore`` over ``peer_<table>`` with hybrid search; ``search`` returns the ids
    of the documents in their fused order."""

    store: Any
    engine: Any
    k: int

    def search(
        self,
        text: str,
        k: int | None = None,
        where: dict[str, Any] | None = None,
        *,
        hybrid: bool = True,
    ) -> list[str]:
        """Ids of the documents found, best first; ``hybrid=False``: the vector search alone."""
        from langchain_postgres.v2.hybrid_search_config import HybridSearchConfig

        k = k or self.k
        legs = leg_depth(k)
        # A new config per call: the store writes the first query's text into the config it
        # was given (``fts_query``) and reuses it for every later query when it is shared.
        config = (
            HybridSearchConfig(tsv_column="content_tsv", primary_top_k=legs, secondary_top_k=legs)
            if hybrid
            else None
        )
        docs = self.store.similarity_search(text, k=k, filter=where, hybrid_search_config=config)
        return [str(doc.id) for doc in docs]

    def close(self) -> None:
        self.engine._run_as_sync(self.engine.close())


def open_peer(
    reader_dsn: str, table: str, metadata: Sequence[str], embeddings: Any, k: int = 10
) -> Peer:
    """The store over ``peer_<table>``, connected as the role of ``reader_dsn``."""
    from sqlalchemy.engine import URL

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from langchain_postgres import PGEngine, PGVectorStore
        from langchain_postgres.v2.hybrid_search_config import HybridSearchConfig
        from langchain_postgres.v2.indexes import HNSWQueryOptions

    params = conninfo_to_dict(reader_dsn)
    query = {key: str(params[key]) for key in ("host", "port") if params.get(key)}
    url = URL.create(
        "postgresql+psycopg",
        username=str(params.get("user") or "") or None,
        password=str(params.get("password") or "") or None,
        database=str(params.get("dbname") or "") or None,
        query=query,
    )
    engine = PGEngine.from_connection_string(url)
    store = PGVectorStore.create_sync(
        engine,
        embedding_service=embeddings,
        table_name=peer_table(table),
        metadata_columns=list(metadata),
        hybrid_search_config=HybridSearchConfig(tsv_column="content_tsv"),
        k=k,
        # The vector leg may return up to ``ef_search`` rows: raised to the leg's depth when
        # that is deeper than pgvector's default (a separate SET LOCAL per query, so not
        # otherwise).
        index_query_options=HNSWQueryOptions(ef_search=leg_depth(k)) if leg_depth(k) > 40 else None,
    )
    return Peer(store, engine, k)


@dataclass
class PeerPoint:
    """One filter share: both contenders' per-query seconds and the peer's row counts."""

    filter: str
    ours: list[float]
    peer: list[float]
    peer_rows: list[int]
    ours_rows: list[int]
    #: The query type of the texts.
    kind: str = "all"

    def as_dict(self) -> dict[str, Any]:
        return {
            "filter": self.filter,
            "kind": self.kind,
            "median_ratio": statistics.median(
                o / p for o, p in zip(self.ours, self.peer, strict=True)
            ),
            "p50_s": statistics.median(self.ours),
            "p95_s": p95(self.ours),
            "peer_p50_s": statistics.median(self.peer),
            "peer_p95_s": p95(self.peer),
            "peer_rows": self.peer_rows,
            "ours_rows": self.ours_rows,
        }


def p95(times: Sequence[float]) -> float:
    ordered = sorted(times)
    return ordered[max(0, int(len(ordered) * 0.95) - 1)]


def time_against_peer(
    ours: Callable[[str], int], peer: Callable[[str], int], texts: Sequence[str], name: str
) -> PeerPoint:
    """Both contenders on every text, alternating which goes first; each call returns the rows
    it found."""
    point = PeerPoint(name, [], [], [], [])
    ours(texts[0]), peer(texts[0])  # warm both (connections, prepared plans)
    for i, text in enumerate(texts):
        order = [(ours, point.ours, point.ours_rows), (peer, point.peer, point.peer_rows)]
        for call, times, rows in order if i % 2 == 0 else order[::-1]:
            t0 = time.perf_counter()
            found = call(text)
            times.append(time.perf_counter() - t0)
            rows.append(found)
    return point


def measure_peer(
    db: Any,
    facade: Any,
    embeddings: Any,
    texts: Mapping[str, Sequence[str]],
    clients: dict[str, Any],
    *,
    k: int = 10,
) -> tuple[list[Any], dict[str, Any]]:
    """Hybrid ``facade.search`` against the peer's hybrid search on ``inquiries`` (already
    indexed by ``index_table``), per filter share (``clients``: share name to client id, or
    ``None`` for no filter) and query type (``texts``: type to texts). Returns the report's
    two sections and the raw figures."""
    from tests.benchmarks.common import Section
    from tests.benchmarks.report import fmt_time

    columns, metadata = ("subject", "body"), ("client_id",)
    started = time.perf_counter()
    hnsw_seconds = build_table(db.admin_dsn, "inquiries", columns, metadata, db.reader_role)
    load_seconds = time.perf_counter() - started
    settle(db.admin_dsn)  # both sides' tables and indexes in memory before either is timed
    peer = open_peer(db.reader_dsn, "inquiries", metadata, embeddings, k=k)
    points: list[PeerPoint] = []
    vector_rows: dict[str, list[int]] = {}
    every = [t for group in texts.values() for t in group]
    try:
        for name, client in clients.items():
            filters, where = _filters(client)
            for kind, group in texts.items():
                point = time_against_peer(
                    lambda text, f=filters: len(  # type: ignore[misc]
                        facade.search("inquiries", text, filters=f, k=k, mode="hybrid").hits
                    ),
                    lambda text, w=where: len(peer.search(text, k, w)),  # type: ignore[misc]
                    group,
                    name,
                )
                point.kind = kind
                points.append(point)
            # Its vector search alone (no keyword leg to fill the page): the post-filter case.
            vector_rows[name] = [len(peer.search(t, k, where, hybrid=False)) for t in every]
    finally:
        peer.close()
    latency = Section(
        "Hybrid search: library vs LangChain PGVectorStore",
        f'`facade.search(..., k={k}, mode="hybrid")` against `PGVectorStore.similarity_search'
        f'(text, k={k}, filter=...)` with `HybridSearchConfig(tsv_column="content_tsv", '
        f"primary_top_k={leg_depth(k)}, secondary_top_k={leg_depth(k)})` "
        "(its default fusion, a weighted sum), langchain-postgres "
        f"{_version()}, on the same database, rows, embeddings and HNSW parameters, the filter "
        "as its metadata filter on an indexed `client_id` column. The same texts for both, by "
        "query type (*keywords*: the labelled set's keyword queries, the rows' own words; "
        "*sentences*: its agent-phrased and paraphrased queries; *identifiers*: an order number "
        "or invoice id a row holds, framed as its identifier queries are), alternating which "
        "runs first, query by query, after both sides' tables and indexes were vacuumed and read "
        "into shared buffers (2 GB when the bench starts the server). The peer's table was "
        "filled from the library's side table: the same vectors, not embedded twice. *vs peer*: "
        "the library's p50 over the peer's; *median of ratios*: the median over the texts of "
        "each text's ratio; *vs own unfiltered*: the library's p50 over its own p50 without a "
        "filter, same type.",
        (
            "Filter (share of rows)",
            "Query type",
            "facade.search p50",
            "p95",
            "PGVectorStore p50",
            "p95",
            "vs peer",
            "median of ratios",
            "vs own unfiltered",
        ),
    )
    pitfall = Section(
        "Hybrid search with a filter: rows returned when k match",
        f"Each query asks for {k} rows; every filter matches far more than {k}. The peer runs "
        "its filter in the same statement as the vector search (`WHERE … ORDER BY embedding "
        "<=> q LIMIT n`): when the HNSW index serves it, pgvector filters the index's "
        "candidates after the scan (`hnsw.ef_search` = 40, no iterative scan), so a selective "
        "filter can leave fewer than k; in hybrid search its keyword leg (`plainto_tsquery`: "
        "every word must match) may fill the rest. *Vector only*: the same store without its "
        "hybrid config. The library's vector leg scans iteratively, or exactly when the filter "
        "is selective. Every query type together.",
        (
            "Filter (share of rows)",
            "facade.search rows (min)",
            "PGVectorStore hybrid: min",
            "median",
            f"short of {k}",
            "PGVectorStore vector only: min",
            "median",
            f"short of {k}",
        ),
    )
    unfiltered = {p.kind: statistics.median(p.ours) for p in points if p.filter == "none"}
    for point in points:
        ours50, peer50 = statistics.median(point.ours), statistics.median(point.peer)
        ratios = statistics.median(o / p for o, p in zip(point.ours, point.peer, strict=True))
        own = ours50 / unfiltered[point.kind]
        latency.rows.append((point.filter, point.kind, fmt_time(ours50), fmt_time(p95(point.ours)),
                             fmt_time(peer50), fmt_time(p95(point.peer)),
                             f"{ours50 / peer50:.2f}×", f"{ratios:.2f}×",
                             "—" if point.filter == "none" else f"{own:.2f}×"))  # fmt: skip
    for name in clients:
        mine = [n for p in points if p.filter == name for n in p.ours_rows]
        theirs = [n for p in points if p.filter == name for n in p.peer_rows]
        pitfall.rows.append((name, min(mine), *_counts(theirs, k),
                             *_counts(vector_rows[name], k)))  # fmt: skip
    latency.notes.append(
        f"The peer's table: filled in {fmt_time(load_seconds)}, of which its HNSW index "
        f"{fmt_time(hnsw_seconds)}."
    )
    figures = {
        "points": [point.as_dict() for point in points],
        "vector_only_rows": vector_rows,
        "load_s": load_seconds,
        "hnsw_s": hnsw_seconds,
        "version": _version(),
    }
    return [latency, pitfall], figures


def _counts(rows: Sequence[int], k: int) -> tuple[int, str, str]:
    short = sum(1 for n in rows if n < k)
    return min(rows), f"{statistics.median(rows):g}", f"{short} of {len(rows)}"


def _filters(client: Any) -> tuple[list[Any], dict[str, Any] | None]:
    from persistence import Filter, Op

    if client is None:
        return [], None
    return [Filter("client_id", Op.EQ, client)], {"client_id": {"$eq": client}}


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("langchain-postgres")
    except metadata.PackageNotFoundError:
        return "not installed"
