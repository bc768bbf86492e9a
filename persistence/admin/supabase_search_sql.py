"""The Supabase ranking function's SQL, written for one table (docs/search-supabase.md).

The database owner installs the text :func:`search_function_sql` prints (``rag-agent
search-function``); the library never runs it. It is generated rather than hand-edited so the
constants it ranks with are the library's own (:data:`~persistence.search.fusion.RRF_K`, the
feedback step's :data:`~persistence.search.feedback.FEEDBACK_ROWS` and
:data:`~persistence.search.feedback.FEEDBACK_WEIGHT`, the leg depth, the row count under which
the semantic leg measures every filtered row,
:data:`~persistence.backends.postgres.vectors.EXACT_ROWS`), and so each filterable
column gets a typed predicate an index serves. Names and types are checked against strict
patterns: they come from the owner's command line, never from a search.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

from persistence.backends.postgres.vectors import (
    EF_SEARCH_FLOOR,
    EXACT_ROWS,
    LEG_EF_SEARCH_FLOOR,
    POOL_ROWS,
    embeddings_table,
)
from persistence.errors import ConfigurationError
from persistence.search.feedback import FEEDBACK_ROWS, FEEDBACK_WEIGHT
from persistence.search.fusion import RRF_K
from persistence.search.model import LEG_DEPTH, MAX_K, MAX_OFFSET, TIER_DEPTH, TIER_ROWS
from persistence.search.text import is_short_text_column

__all__ = ["search_function_sql"]

_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_TYPE = re.compile(r"[a-z][a-z0-9_]*( [a-z][a-z0-9_]*)*(\(\d+(, ?\d+)?\))?")
#: pg_trgm's word_similarity threshold the library's trigram legs use.
_TRIGRAM_THRESHOLD = 0.6


def _name(value: str, what: str) -> str:
    if not _NAME.fullmatch(value):
        raise ConfigurationError(
            f"{what} {value!r} is not a lower-case SQL name (letters, digits, underscores)"
        )
    return value


def _type(value: str, column: str) -> str:
    if not _TYPE.fullmatch(value):
        raise ConfigurationError(
            f"the type {value!r} of filter column {column!r} is not a SQL type"
        )
    return value


def search_function_sql(
    table: str,
    columns: Sequence[str],
    *,
    filters: Mapping[str, str] | None = None,
    id_type: str = "uuid",
    schema: str = "public",
    vector_schema: str = "extensions",
    config: str = "english",
    roles: Sequence[str] = ("anon", "authenticated"),
) -> str:
    """The ``create function {schema}.search_{table}`` script ranking ``table`` by its text
    ``columns``, filterable by equality on each column of ``filters`` (``{column: sql_type}``).

    >>> sql = search_function_sql("inquiries", ["subject", "body"], filters={"client_id": "uuid"})
    >>> "t.client_id = (filters->>'client_id')::uuid" in sql
    True
    """
    table, schema = _name(table, "table"), _name(schema, "schema")
    vector_schema, config = _name(vector_schema, "schema"), _name(config, "configuration")
    columns = [_name(c, "column") for c in columns]
    if not columns:
        raise ConfigurationError("the ranking function needs at least one text column")
    typed = {_name(c, "column"): _type(t, c) for c, t in (filters or {}).items()}
    id_type = _type(id_type, "id")
    roles = [_name(r, "role") for r in roles]
    relation = f"{schema}.{table}"
    side = f"{schema}.{embeddings_table(table)}"
    document = (
        f"to_tsvector('{config}', "
        + " || ' ' || ".join(f"coalesce(t.{c}, '')" for c in columns)
        + ")"
    )
    # Each filterable column: absent from `filters`, or equal to its value cast to the column's
    # type. The function plans each call with the values (force_custom_plan), so the absent
    # case folds away and a btree on the column serves the rest.
    where = "".join(
        f"\n      and (filters->'{c}' is null or t.{c} = (filters->>'{c}')::{t})"
        for c, t in typed.items()
    )
    keys = ", ".join(f"'{c}'" for c in typed)
    short = [c for c in columns if is_short_text_column(c)]
    if short:
        similar = " or ".join(f"query_text <% t.{c}" for c in short)
        similarity = ", ".join(f"word_similarity(query_text, t.{c})" for c in short)
        # Names checked by _name: this is the owner's script, printed, never run here.
        trigram = f"""select t.id, row_number() over (
        order by greatest({similarity}) desc, t.id)::int as r
    from {relation} t
    where match_mode <> 'semantic' and ({similar}){where}
    order by r limit depth"""  # noqa: S608
    else:
        trigram = f"select null::{id_type} as id, null::int as r where false"
    comment = json.dumps({"columns": columns, "filters": list(typed)})
    grants = ", ".join(roles)
    # Whether at most EXACT_ROWS rows match the filters (counted no further): the semantic leg
    # then measures every filtered row, as the PostgreSQL backend's exact path does, rather than
    # let the planner pick the approximate HNSW index on a small table. Names checked by _name.
    inline = where.replace("\n      ", " ")
    few = (
        f"(select count(*) <= {EXACT_ROWS} from (select 1 from {relation} t "  # noqa: S608
        f"where true{inline} limit {EXACT_ROWS + 1}) c)"
    )
    fused = _FUSED.format(
        relation=relation,
        side=side,
        document=document,
        where=where,
        trigram=trigram,
        rrf=RRF_K,
        few=few,
        pool_rows=POOL_ROWS,
        vs=vector_schema,
        feedback_rows=FEEDBACK_ROWS,
        feedback_weight=repr(FEEDBACK_WEIGHT),
    )
    return _TEMPLATE.format(
        fused=fused,
        relation=relation,
        side=side,
        table=table,
        schema=schema,
        vs=vector_schema,
        config=config,
        id_type=id_type,
        where=where,
        few=few,
        keys=f"array[{keys}]::text[]",
        comment=comment,
        grants=f"grant execute on function {schema}.search_{table} to {grants};" if roles else "",
        depth=LEG_DEPTH,
        tier_depth=TIER_DEPTH,
        tier_rows=TIER_ROWS,
        ef_floor=EF_SEARCH_FLOOR,
        leg_ef_floor=LEG_EF_SEARCH_FLOOR,
        max_k=MAX_K,
        exact_rows=EXACT_ROWS,
        max_offset=MAX_OFFSET,
        feedback_rows=FEEDBACK_ROWS,
        feedback_weight=repr(FEEDBACK_WEIGHT),
        threshold=repr(_TRIGRAM_THRESHOLD),
    )


#: The legs cut at ``depth`` and fused, best first, as persistence.search.fusion.fuse orders them.
_FUSED = """\
with
  keyword as (
    select t.id, row_number() over (order by ts_rank(
        {document},
        words, 1) desc, t.id)::int as r
    from {relation} t
    where match_mode <> 'semantic' and words is not null
      and {document} @@ words{where}
    order by r limit depth
  ),
  trigram as (
    {trigram}
  ),
  -- Without a filter on the HNSW path (`pooled`), as the PostgreSQL backend: the query's
  -- {pool_rows} nearest rows (at least the depth) in one scan, the query moved toward the mean of
  -- the first {feedback_rows} of them (as the feedback step below moves it), the pool ranked
  -- again by the moved query. Planned with the call's values, no scan when not pooled.
  pool as materialized (
    select e.row_id as id, e.embedding as e, e.embedding <=> probe as distance
    from {side} e join {relation} t on t.id = e.row_id
    where pooled and e.model_id = query_model
    order by distance limit greatest(depth, {pool_rows})
  ),
  pool_top as (
    select p.e::text as v, row_number() over (order by p.distance, p.id) as n
    from pool p order by p.distance, p.id limit {feedback_rows}
  ),
  pool_mean as (
    select c.i, sum(c.x::float8 order by pool_top.n) / count(*) as m
    from pool_top,
      unnest(string_to_array(btrim(pool_top.v, '[]'), ',')) with ordinality c(x, i)
    group by c.i
  ),
  pool_moved as (
    select q.i, q.x::float8 + {feedback_weight}::float8 * pool_mean.m as y
    from unnest(string_to_array(btrim(query_embedding, '[]'), ',')) with ordinality q(x, i)
    join pool_mean on pool_mean.i = q.i
  ),
  pool_refined as (
    select array_agg(y / l.norm order by i)::{vs}.vector as r
    from pool_moved, (select sqrt(sum(y * y order by i)) as norm from pool_moved) l
  ),
  -- Few filtered rows (`exact`, or counted here when the feedback step did not count them):
  -- every one measured, in an order no index serves (`+ 0`), as the PostgreSQL backend's exact
  -- path; else the HNSW index's scan. Planned with the call's values, a known `exact` leaves
  -- one branch.
  nearest as materialized (
    (select e.row_id as id, e.embedding <=> refined as distance
    from {side} e join {relation} t on t.id = e.row_id
    where refined is not null and e.model_id = query_model{where}
      and coalesce(exact, {few})
    order by (e.embedding <=> refined) + 0, e.row_id limit depth)
    union all
    (select e.row_id as id, e.embedding <=> refined as distance
    from {side} e join {relation} t on t.id = e.row_id
    where refined is not null and e.model_id = query_model{where}
      and not coalesce(exact, {few}) and not pooled
    order by distance limit depth)
    union all
    (select p.id, p.e <=> m.r as distance
    from pool p, pool_refined m
    order by distance, p.id limit depth)
  ),
  semantic as (
    select n.id, row_number() over (order by n.distance, n.id)::int as r from nearest n
  ),
  ranked as (
    select coalesce(k.id, g.id, s.id) as id, k.r as kr, g.r as gr, s.r as sr
    from keyword k full join trigram g on g.id = k.id
    full join semantic s on s.id = coalesce(k.id, g.id)
  ),
  fused as (
    -- Summed in leg order, in double precision, as persistence.search.fusion.fuse sums.
    select x.id,
      coalesce((weights->>'keyword')::float8 / ({rrf} + x.kr), 0)
        + coalesce((weights->>'trigram')::float8 / ({rrf} + x.gr), 0)
        + coalesce((weights->>'semantic')::float8 / ({rrf} + x.sr), 0) as score,
      least(x.kr, x.gr, x.sr) as best, x.kr, x.gr, x.sr
    from ranked x
  )
  select f.id, f.score, f.kr, f.gr, f.sr,
    row_number() over (order by f.score desc, f.best, f.id) as position
  from fused f"""


_TEMPLATE = """\
create or replace function {schema}.search_{table}(
  query_text text,
  query_terms jsonb default '[]',
  -- text, not vector: the feedback step moves the query by its own double-precision digits,
  -- as the library does; the legs cast it to a vector.
  query_embedding text default null,
  query_model text default null,
  filters jsonb default '{{}}',
  match_mode text default 'hybrid',
  match_count int default 10,
  match_offset int default 0,
  weights jsonb default '{{"keyword": 1, "trigram": 1, "semantic": 2}}'
) returns table (
  id {id_type}, score double precision,
  keyword_rank int, trigram_rank int, semantic_rank int, total_count bigint
)
language plpgsql stable security invoker
set search_path = pg_catalog, {schema}, {vs}
-- Planned with each call's values: a filter left out folds away, a given one uses its index.
set plan_cache_mode = force_custom_plan
as $$
declare
  page int := least(greatest(coalesce(match_count, 10), 1), {max_k});
  skip int := least(greatest(coalesce(match_offset, 0), 0), {max_offset});
  -- Legs cut at fixed depths, never at the page: the first {tier_rows} rows are those of the legs
  -- cut at {tier_depth}, every later row comes from the legs cut at {depth} without those
  -- (persistence.search.fusion.fuse_tiers), so the order is the same whatever the page.
  depth int := {tier_depth};
  head_id {id_type}[];
  head_score float8[];
  head_kr int[];
  head_gr int[];
  head_sr int[];
  deep_id {id_type}[];
  deep_score float8[];
  deep_kr int[];
  deep_gr int[];
  deep_sr int[];
  words tsquery;
  word text;
  -- Whether at most {exact_rows} rows match the filters (null until a statement counted them).
  exact boolean;
  probe {vs}.vector;
  refined {vs}.vector;
  -- Whether the semantic leg ranks the pool of one scan (no filter, the HNSW path, feedback).
  pooled boolean := false;
begin
  if jsonb_typeof(filters) is distinct from 'object' then
    raise exception 'filters must be a JSON object of column: value';
  end if;
  if exists (select 1 from jsonb_object_keys(filters) f(k) where k <> all ({keys})) then
    raise exception 'filters may name only the columns this function filters by';
  end if;
  if jsonb_typeof(query_terms) is distinct from 'array' then
    raise exception 'query_terms must be a JSON array of words';
  end if;
  -- One plainto_tsquery per word, ORed: no word becomes tsquery syntax.
  for word in select value from jsonb_array_elements_text(query_terms) loop
    words := case when words is null then plainto_tsquery('{config}', word)
                  else words || plainto_tsquery('{config}', word) end;
  end loop;
  perform set_config('pg_trgm.word_similarity_threshold', '{threshold}', true);
  perform set_config('hnsw.ef_search', least(greatest(depth, {ef_floor}), 1000)::text, true);
  begin
    perform set_config('hnsw.iterative_scan', 'relaxed_order', true);  -- pgvector 0.8+
  exception when others then null;
  end;
  if match_mode <> 'keyword' and query_embedding is not null then
    probe := query_embedding::{vs}.vector;
    refined := probe;
    -- As persistence.search.feedback.takes_feedback: no feedback where the keyword leg
    -- outweighs the semantic one (a text naming an identifier).
    if coalesce((weights->>'semantic')::float8, 0)
        >= coalesce((weights->>'keyword')::float8, 0) then
      -- One round of pseudo-relevance feedback, as persistence.search.feedback.refine: the
      -- query moved toward the mean of the {feedback_rows} nearest filtered rows (their vectors
      -- read as the library reads them, from their text), normalised, summed in the library's
      -- order; computed here once for both tiers, or from each tier's pool when pooled.
      -- No filter and more than {exact_rows} rows (counted here, up to one more): the HNSW
      -- path, where the legs rank the pool of one scan and move the query from it (`pool`
      -- above), so no scan of its own here.
      if filters = '{{}}'::jsonb then
        exact := {few};
        pooled := not exact;
      end if;
    end if;
    if not pooled and coalesce((weights->>'semantic')::float8, 0)
        >= coalesce((weights->>'keyword')::float8, 0) then
      -- As deep as the first tier's legs, then cut: a tie at the last place breaks by id, as in
      -- the library.
      -- At most {exact_rows} filtered rows (counted here, up to one more, unless counted above,
      -- and kept in `exact` for the legs): every one measured, in an order no index serves
      -- (`+ 0`), as the PostgreSQL backend's exact path; more: the HNSW index's scan.
      with few as materialized (
        select coalesce(exact, {few}) as yes
      ),
      nearest as materialized (
        (select e.row_id as id, e.embedding <=> probe as distance, e.embedding as v
        from {side} e join {relation} t on t.id = e.row_id
        where e.model_id = query_model{where}
          and (select yes from few)
        order by (e.embedding <=> probe) + 0, e.row_id limit depth)
        union all
        (select e.row_id as id, e.embedding <=> probe as distance, e.embedding as v
        from {side} e join {relation} t on t.id = e.row_id
        where e.model_id = query_model{where}
          and not (select yes from few)
        order by distance limit depth)
      ),
      top as (
        select x.v::text as v, row_number() over (order by x.distance, x.id) as n
        from nearest x order by x.distance, x.id limit {feedback_rows}
      ),
      mean as (
        select c.i, sum(c.x::float8 order by top.n) / count(*) as m
        from top, unnest(string_to_array(btrim(top.v, '[]'), ',')) with ordinality c(x, i)
        group by c.i
      ),
      moved as (
        select q.i, q.x::float8 + {feedback_weight}::float8 * mean.m as y
        from unnest(string_to_array(btrim(query_embedding, '[]'), ',')) with ordinality q(x, i)
        join mean on mean.i = q.i
      )
      select array_agg(y / norm order by i)::{vs}.vector, (select yes from few)
      into refined, exact
      from moved, (select sqrt(sum(y * y order by i)) as norm from moved) l;
      refined := coalesce(refined, probe);
    end if;
    if not pooled then
      -- The leg's own scan needs only its depth (the feedback step's 5 rows needed more).
      perform set_config('hnsw.ef_search', least(greatest(depth, {leg_ef_floor}), 1000)::text,
        true);
    end if;
  end if;
  -- The first tier: its first {tier_rows} fused rows.
  select array_agg(o.id order by o.position), array_agg(o.score order by o.position),
    array_agg(o.kr order by o.position), array_agg(o.gr order by o.position),
    array_agg(o.sr order by o.position)
  into head_id, head_score, head_kr, head_gr, head_sr
  from (
  {fused}
  ) o
  where o.position <= {tier_rows};
  -- The deep tier only for a page ending past what the first tier gives.
  if skip + page > coalesce(cardinality(head_id), 0) then
    depth := {depth};
    perform set_config('hnsw.ef_search', least(greatest(depth, {ef_floor}), 1000)::text, true);
    select array_agg(o.id order by o.position), array_agg(o.score order by o.position),
      array_agg(o.kr order by o.position), array_agg(o.gr order by o.position),
      array_agg(o.sr order by o.position)
    into deep_id, deep_score, deep_kr, deep_gr, deep_sr
    from (
  {fused}
    ) o
    where o.id <> all (coalesce(head_id, '{{}}'));
  end if;
  return query
  with
  ordered as (
    select h.id, h.score, h.kr, h.gr, h.sr, h.position
    from unnest(head_id, head_score, head_kr, head_gr, head_sr) with ordinality
      h(id, score, kr, gr, sr, position)
    union all
    select d.id, d.score, d.kr, d.gr, d.sr, d.position + coalesce(cardinality(head_id), 0)
    from unnest(deep_id, deep_score, deep_kr, deep_gr, deep_sr) with ordinality
      d(id, score, kr, gr, sr, position)
  ),
  filler as (
    -- Fewer rows ranked than the page needs: filtered rows in id order fill it.
    select t.id, row_number() over (order by t.id) + (select count(*) from ordered) as position
    from {relation} t
    where t.id not in (select o.id from ordered o){where}
    order by t.id limit greatest(skip + page - (select count(*) from ordered), 0)
  ),
  matching as (
    select count(*) as n from {relation} t where true{where}
  )
  select p.id, p.score, p.kr, p.gr, p.sr, (select n from matching)
  from (
    select o.id, o.score, o.kr, o.gr, o.sr, o.position from ordered o
    union all
    select f.id, 0::float8, null::int, null::int, null::int, f.position from filler f
  ) p
  order by p.position
  offset skip limit page;
end;
$$;

-- The columns it ranks by and filters by, in the comment (PostgREST shows it in the API
-- description); the backend calls the function only when the access policy lets the search
-- read every ranked column and each filter names a filterable column.
comment on function {schema}.search_{table} is
  E'Ranked search for the read-only facade\\n{comment}';
-- The reader roles PostgREST uses may run it:
{grants}
-- PostgREST reloads its schema cache on: notify pgrst, 'reload schema';
"""
