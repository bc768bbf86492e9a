"""The Supabase backend's :meth:`search`, written as steps (one implementation, sync and async).

Two paths, chosen per search (see docs/search-supabase.md):

* **The owner's ranking function** ``search_<table>`` (listed under ``/rpc/`` in the API's
  OpenAPI description): called with ``GET``, so PostgREST runs it in a read-only transaction,
  with the words, the query embedding and the equality filters as *parameters* (never a PostgREST
  filter after it, which would apply after its ``LIMIT``). It answers ids, scores, ranks and the
  filtered total; the rows' allowed columns are then read by id, in the function's order.
* **The fallback**: full-text candidates through PostgREST's ``wfts`` filter (each word its own
  quoted condition of one ``or=(...)``), plus the first filtered rows in id order, both bounded;
  ranked here by BM25, trigram similarity and, with embeddings, cosine; fused by
  :func:`~persistence.search.fusion.fuse`; filled in id order to honour the k-rows rule.

Besides HTTP exchanges the steps yield :class:`EmbedQuery` and :class:`EmbedRows`, which the
backend's sync or async driver answers with the embedder.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from cachetools import LRUCache

from persistence.backends.supabase.postgrest.client import (
    Exchange,
    PostgrestClient,
    json_default,
    json_rows,
)
from persistence.backends.supabase.postgrest.encoding import (
    CountMode,
    in_list,
    needs_client_check,
    quote_list_element,
    select_param,
)
from persistence.backends.supabase.postgrest.paging import total_steps, window_steps
from persistence.backends.supabase.postgrest.schema import ApiDescription
from persistence.backends.supabase.postgrest.search_legs import (
    keyword_leg,
    semantic_leg,
    trigram_leg,
)
from persistence.errors import BackendError
from persistence.query import Filter, Op, Query
from persistence.search import SearchHit, SearchMode, SearchRequest, SearchResult
from persistence.search.embedder import Embedder, Vector
from persistence.search.feedback import takes_feedback
from persistence.search.fusion import fuse, weights_for
from persistence.search.text import is_short_text_column, keyword_terms, topical_text
from persistence.steps import Steps
from persistence.values.like import text_predicate

__all__ = [
    "CANDIDATE_ROWS",
    "EmbedQuery",
    "EmbedRows",
    "SearchStep",
    "filtered_columns",
    "function_name",
    "ranked_columns",
    "search_steps",
]

Row = dict[str, Any]
Params = list[tuple[str, str]]
#: Rows each bounded fetch of the fallback brings: full-text candidates, and filtered rows in id
#: order (more when the page is deeper). The fallback is exact up to this many filtered rows.
CANDIDATE_ROWS = 500
#: Row vectors the fallback keeps per backend (by model and text hash), least recently used out.
_CACHED_VECTORS = 20_000
# websearch_to_tsquery's one operator word; every other word of keyword_terms is plain text.
_WEBSEARCH_OPERATORS = frozenset({"or"})
_RUN = re.compile(r"[^\W_]+")


class EmbedQuery(NamedTuple):
    """Ask the embedder for the query's vector."""

    text: str


class EmbedRows(NamedTuple):
    """Ask the embedder for rows' vectors (``None`` for a text without direction)."""

    texts: tuple[str, ...]


#: What the search steps yield.
SearchStep = Exchange | EmbedQuery | EmbedRows


def function_name(table: str) -> str:
    """The ranking function's name for ``table``."""
    return f"search_{table}"


class RowVectors:
    """In-process row vectors of the fallback, keyed by model, dimension and text hash."""

    def __init__(self, maxsize: int = _CACHED_VECTORS) -> None:
        self._entries: LRUCache[tuple[str, int, bytes], Vector | None] = LRUCache(maxsize)

    def steps(
        self, texts: Sequence[str], embedder: Embedder, dimension: int
    ) -> Steps[SearchStep, list[Vector | None]]:
        keys = [
            (
                embedder.model_id,
                dimension,
                hashlib.blake2b(t.encode("utf-8", "surrogatepass"), digest_size=16).digest(),
            )
            for t in texts
        ]
        found: list[Vector | None] = [self._entries.get(key) for key in keys]
        missing = [i for i, key in enumerate(keys) if key not in self._entries and texts[i].strip()]
        if missing:
            fresh = yield EmbedRows(tuple(texts[i] for i in missing))
            for i, vector in zip(missing, fresh, strict=True):
                found[i] = self._entries[keys[i]] = vector
        return found


def _declared(comment: str, key: str) -> tuple[str, ...] | None:
    """The list of names under ``key`` in the first line of ``comment`` holding a JSON object
    that has it, or ``None``."""
    for line in comment.splitlines():
        try:
            said = json.loads(line)
        except ValueError:
            continue
        names = said.get(key) if isinstance(said, dict) else None
        if isinstance(names, list) and all(isinstance(c, str) for c in names):
            return tuple(names)
    return None


def ranked_columns(comment: str) -> tuple[str, ...] | None:
    """The columns a ranking function's comment says it ranks by: a line holding a JSON object
    ``{"columns": ["subject", "body"]}``. ``None`` when no line says so: a function that does
    not say what it reads could rank by a column the access policy hides."""
    return _declared(comment, "columns") or None


def filtered_columns(comment: str) -> tuple[str, ...] | None:
    """The columns a ranking function's comment says it filters by (``"filters": [...]`` beside
    ``"columns"``, as the generated function says); ``None`` when it does not say, as a function
    written from the first template (``to_jsonb(row) @> filters``, any column) does not."""
    return _declared(comment, "filters")


def _function_filters(filters: Sequence[Filter]) -> dict[str, Any] | None:
    """The ``{column: value}`` object the function takes, or ``None`` when a filter is not an
    equality it can apply (the fallback serves those)."""
    taken: dict[str, Any] = {}
    for flt in filters:
        value = flt.value[0] if flt.op is Op.IN and len(flt.value) == 1 else flt.value
        if flt.op not in (Op.EQ, Op.IN) or (flt.op is Op.IN and len(flt.value) != 1):
            return None
        if flt.column in taken and taken[flt.column] != value:
            return None
        taken[flt.column] = value
    return taken


def _json(value: object) -> str:
    return json.dumps(value, default=json_default, allow_nan=False, separators=(",", ":"))


def _vector_literal(vector: Vector) -> str:
    return "[" + ",".join(repr(v) for v in vector) + "]"


def search_steps(
    client: PostgrestClient,
    description: ApiDescription,
    vectors: RowVectors,
    query: Query,
    base: Params,
    request: SearchRequest,
    text_columns: tuple[str, ...],
    embedder: Embedder | None,
    *,
    page_size: int,
    count_mode: CountMode,
) -> Steps[SearchStep, SearchResult]:
    """Rank the rows of ``query.table`` matching ``query.filters`` (``base``: their PostgREST
    parameters) by ``request``; see the module docstring."""
    if not description.known():
        yield from description.fetch_steps()
    name = function_name(query.table)
    functions = description.functions()
    installed = name in functions
    ranked_by = ranked_columns(functions.get(name, ""))
    filtered_by = filtered_columns(functions.get(name, ""))
    taken = _function_filters(query.filters) if installed else None
    unfiltered = sorted(set(taken or ()) - set(filtered_by)) if filtered_by is not None else []
    if (
        taken is not None
        and not unfiltered
        and ranked_by is not None
        and set(ranked_by) <= set(text_columns)
    ):
        return (
            yield from _function_steps(
                client, name, query, taken, request, embedder, (base, count_mode)
            )
        )
    if installed and ranked_by is None:
        why = f"the ranking function {name} does not name the columns it ranks by (its comment)"
    elif installed and not set(ranked_by or ()) <= set(text_columns):
        why = f"the ranking function {name} ranks by a column this search may not read"
    elif installed and unfiltered:
        why = f"the ranking function {name} does not filter by {', '.join(unfiltered)}"
    elif installed:
        why = f"the ranking function {name} takes equality filters only"
    else:
        why = f"the ranking function {name} is not installed"
    return (
        yield from _fallback_steps(
            client,
            vectors,
            query,
            base,
            request,
            text_columns,
            embedder,
            why,
            (page_size, count_mode),
        )
    )


def _function_steps(
    client: PostgrestClient,
    name: str,
    query: Query,
    filters: Mapping[str, Any],
    request: SearchRequest,
    embedder: Embedder | None,
    counting: tuple[Params, CountMode],
) -> Steps[SearchStep, SearchResult]:
    table = query.table
    text = topical_text(request.text, table)
    mode, why = request.runnable_mode(embedder is not None)
    notes = [] if why is None else [why]
    params: Params = [
        ("query_text", text),
        ("query_terms", _json(list(keyword_terms(request.text, table)))),
        ("filters", _json(dict(filters))),
        ("match_mode", mode.value),
        ("match_count", str(request.k)),
        ("match_offset", str(request.offset)),
        # The fusion weights every backend uses for this text (an identifier lets keywords lead).
        ("weights", _json(dict(weights_for(request.text, table)))),
    ]
    if mode is not SearchMode.KEYWORD and embedder is not None:
        vector = yield EmbedQuery(text)
        params += [("query_embedding", _vector_literal(vector)), ("query_model", embedder.model_id)]
    # GET: PostgREST runs the function in a read-only transaction. Only its own parameters are
    # sent; a filter here would apply to its result, after its LIMIT.
    response = yield from client.request_steps("GET", f"rpc/{name}", "search", params)
    ranked = json_rows(response, table, "search")
    legs: tuple[str, ...] = {
        SearchMode.KEYWORD: ("keyword", "trigram"),
        SearchMode.SEMANTIC: ("semantic",),
        SearchMode.HYBRID: ("keyword", "trigram", "semantic"),
    }[mode]
    ids = [row.get("id") for row in ranked]
    if any(i is None for i in ids):
        raise BackendError(
            f"the ranking function {name} answered rows without an id",
            backend="supabase",
            operation="search",
        )
    rows: dict[Any, Row] = {}
    if ids:
        columns = query.columns
        select = select_param(None if columns is None else ("id", *columns))
        read = yield from client.request_steps(
            "GET",
            table,
            "search",
            [("select", select), ("id", f"in.{in_list(ids)}")],
            columns=columns or (),
        )
        rows = {str(row.get("id")): row for row in json_rows(read, table, "search")}
    hits = []
    for entry in ranked:
        row = rows.get(str(entry["id"]))
        if row is None:  # gone since, or hidden from this role between the two requests
            continue
        if query.columns is not None:
            row = {c: row.get(c) for c in query.columns}
        ranks = {leg: entry.get(f"{leg}_rank") for leg in legs}
        hits.append(SearchHit(row, float(entry.get("score") or 0.0), ranks))
    total = ranked[0].get("total_count") if ranked else None
    if not isinstance(total, int):
        # An empty page says nothing of how many rows match (the offset may lie past them).
        total = yield from total_steps(client, table, "search", *counting)
    return SearchResult(
        hits=tuple(hits),
        mode=mode,
        legs=legs,
        query=text,
        total_count=total,
        degraded="; ".join(notes) or None,
    )


def wfts_condition(columns: Sequence[str], terms: Sequence[str]) -> str | None:
    """The ``or=`` value matching any word in any column by websearch full-text search, or
    ``None`` when no word is left.

    Each value is one run of letters and digits (a term's apostrophe splits it: ``admin'or``
    gives ``admin`` and ``or``), never ``or`` (websearch's operator word), quoted as a logic-tree
    value: nothing of websearch's syntax (quotes, ``-``, ``or``) nor PostgREST's can pass.
    """
    words = [
        w for w in dict.fromkeys(p for t in terms for p in _RUN.findall(t.casefold()))
        if w not in _WEBSEARCH_OPERATORS
    ]  # fmt: skip
    if not words or not columns:
        return None
    return "(" + ",".join(f"{c}.wfts.{quote_list_element(w)}" for c in columns for w in words) + ")"


def _fallback_steps(
    client: PostgrestClient,
    vectors: RowVectors,
    query: Query,
    base: Params,
    request: SearchRequest,
    text_columns: tuple[str, ...],
    embedder: Embedder | None,
    why: str,
    paging: tuple[int, CountMode],
) -> Steps[SearchStep, SearchResult]:
    table = query.table
    text = topical_text(request.text, table)
    mode, missing = request.runnable_mode(embedder is not None)
    notes: list[str] = []
    checks = [text_predicate(f) for f in query.filters if needs_client_check(f)]
    wanted = None if query.columns is None else ("id", *query.columns, *text_columns)
    select = select_param(None if wanted is None else tuple(dict.fromkeys(wanted)))
    bound = max(CANDIDATE_ROWS, request.depth)
    page_size, count_mode = paging

    def fetch(extra: Params) -> Steps[SearchStep, tuple[list[Row], int | None]]:
        params = [("select", select), *base, *extra, ("order", "id.asc")]
        rows, total, _ = yield from window_steps(
            client, table, "search", params, offset=0, limit=bound, page_size=page_size,
            max_rows=bound, count_mode=count_mode, columns=query.referenced_columns(),
        )  # fmt: skip
        return [r for r in rows if all(p(r) for p in checks)], total

    pool, total = yield from fetch([])
    terms = keyword_terms(request.text, table)
    candidates: list[Row] = []
    condition = wfts_condition(text_columns, terms) if mode is not SearchMode.SEMANTIC else None
    if condition is not None:
        candidates, _ = yield from fetch([("or", condition)])
    elif mode is not SearchMode.SEMANTIC:
        notes.append("the text has no words to match, so the keyword leg ranked nothing")
    universe = list({str(r.get("id")): r for r in itertools.chain(pool, candidates)}.values())
    universe.sort(key=lambda r: _id_key(r.get("id")))
    matched = (
        total if total is not None and not checks else len(pool) if len(pool) < bound else None
    )
    legs: dict[str, list[int]] = {}
    texts = ["\n".join(str(r[c]) for c in text_columns if r.get(c)) for r in universe]
    if mode is not SearchMode.SEMANTIC:
        if condition is not None:
            legs["keyword"] = keyword_leg(universe, texts, terms, candidates)
        short = [c for c in text_columns if is_short_text_column(c)]
        if short:
            legs["trigram"] = trigram_leg(universe, short, text)
    weights = weights_for(request.text, query.table)
    if mode is not SearchMode.KEYWORD and embedder is not None:
        query_vector = yield EmbedQuery(text)
        row_vectors = yield from vectors.steps(texts, embedder, len(query_vector))
        legs["semantic"] = semantic_leg(query_vector, row_vectors, feedback=takes_feedback(weights))
    fused = fuse(legs, weights)
    project = (lambda r: dict(r)) if query.columns is None else _projector(query.columns)
    hits = [
        SearchHit(project(universe[position]), score, ranks)
        for position, score, ranks in fused[request.offset : request.depth]
    ]
    if len(hits) < request.k:
        ranked = {str(universe[position].get("id")) for position, _, _ in fused}
        unranked = (r for r in pool if str(r.get("id")) not in ranked)
        skip = max(0, request.offset - len(fused))
        for row in itertools.islice(unranked, skip, skip + request.k - len(hits)):
            hits.append(SearchHit(project(row), 0.0, dict.fromkeys(legs)))
    ran = "keyword-only" if "semantic" not in legs else "ranked in process"
    scope = f"at most {bound} full-text candidates and the first {bound} filtered rows"
    if matched is not None and matched <= bound:
        scope = "every filtered row"
    notes.insert(0, f"{ran}: {why}; ranked here: {scope}")
    if missing is not None:
        notes.append(missing)
    return SearchResult(
        hits=tuple(hits),
        mode=mode,
        legs=tuple(legs),
        query=text,
        total_count=matched if matched is not None else len(universe),
        degraded="; ".join(notes),
    )


def _id_key(value: object) -> tuple[int, Any]:
    # Ids of one table share a type; the first element keeps a None apart all the same.
    return (0, value) if value is not None else (1, 0)


def _projector(columns: Sequence[str]) -> Callable[[Row], Row]:
    return lambda row: {c: row.get(c) for c in columns}
