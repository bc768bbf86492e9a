"""Aggregates: metrics, the facade's checks, the memory backend's answers, the PostgREST wire."""

from __future__ import annotations

import decimal
import uuid
from urllib.parse import unquote

import httpx
import pytest

from persistence import (
    AccessPolicy,
    AggregatesDisabledError,
    ColumnNotAllowedError,
    Filter,
    Group,
    InvalidQueryError,
    MemoryBackend,
    MemoryStore,
    Metric,
    Op,
    ReadOnlyPersistenceFacade,
    TableNotAllowedError,
    UnsupportedOperatorError,
    create_persistence_agent,
    create_read_only_facade,
)
from persistence.aggregate import numeric_quotient, parse_metric
from persistence.schema import SUPABASE_STYLE
from tests.support.postgrest import BASE_URL, PostgrestEmulator, fake_key

LEADS = [
    {"status": "new", "score": 1, "email": "a@x.io"},
    {"status": "new", "score": 2, "email": "a@x.io"},
    {"status": "won", "score": None, "email": "b@x.io"},
    {"status": None, "score": 5, "email": None},
    {"status": "Won", "score": 4, "email": "c*d@x.io"},
]


@pytest.fixture
def memory() -> ReadOnlyPersistenceFacade:
    store = MemoryStore()
    create_persistence_agent(kind="memory", store=store).batch("leads", LEADS)
    return create_read_only_facade(kind="memory", store=store)


def _supabase(
    store: MemoryStore, *, aggregates: bool = True, max_rows: int | None = None, **options: object
) -> tuple[ReadOnlyPersistenceFacade, PostgrestEmulator]:
    emulator = PostgrestEmulator(store, aggregates=aggregates, max_rows=max_rows)
    facade = create_read_only_facade(
        kind="supabase",
        url=BASE_URL,
        key=fake_key(),
        http_client=httpx.Client(transport=emulator.transport()),
        **options,
    )
    return facade, emulator


class TestMetric:
    def test_string_forms_round_trip(self) -> None:
        """'count' and '<function>:<column>' parse to Metric and print back unchanged."""
        assert parse_metric("count") == Metric("count")
        assert parse_metric("sum:score") == Metric("sum", "score")
        assert [str(parse_metric(m)) for m in ("count", "avg:score")] == ["count", "avg:score"]

    @pytest.mark.parametrize(
        "text", ["", "total", "sum", "sum:", "count:score", "sum:Score", "max:a b", "avg:x;y"]
    )
    def test_malformed_metrics_are_invalid(self, text: str) -> None:
        """An unknown function, a missing or malformed column is an InvalidQueryError."""
        with pytest.raises(InvalidQueryError) as info:
            parse_metric(text)
        assert info.value.field == "metrics"


class TestNumericQuotient:
    @pytest.mark.parametrize(
        ("total", "count", "text"),
        [
            (3, 2, "1.5000000000000000"),
            (8, 3, "2.6666666666666667"),
            (-8, 3, "-2.6666666666666667"),
            (0, 5, "0E-20"),  # PostgreSQL prints 0.00000000000000000000
            (decimal.Decimal("10.50"), 4, "2.6250000000000000"),
            (123456789012, 7, "17636684144.57142857"),
        ],
    )
    def test_postgresql_digits(self, total: int | decimal.Decimal, count: int, text: str) -> None:
        """The quotient has the scale and rounding PostgreSQL's numeric avg shows (as Python
        prints a Decimal)."""
        assert str(numeric_quotient(total, count)) == text


class TestMemoryAggregate:
    def test_groups_in_key_order_with_nulls_last(self, memory: ReadOnlyPersistenceFacade) -> None:
        """Groups come in code-point key order ('Won' < 'new' < 'won'), NULL last."""
        result = memory.aggregate("leads", group_by=["status"])
        assert [g.keys["status"] for g in result.groups] == ["Won", "new", "won", None]
        assert [g.metrics["count"] for g in result.groups] == [1, 2, 1, 1]
        assert (result.matched, result.total_groups, result.capped) == (5, 4, False)

    def test_nulls_ignored_by_every_metric_but_count(
        self, memory: ReadOnlyPersistenceFacade
    ) -> None:
        """A group whose values are all NULL has count 1 but no sum, avg, min or max."""
        result = memory.aggregate(
            "leads",
            [Filter("status", Op.EQ, "won")],
            metrics=["count", "sum:score", "avg:score", "min:score", "count_distinct:score"],
        )
        assert result.groups == (
            Group(
                keys={},
                metrics={
                    "count": 1,
                    "sum:score": None,
                    "avg:score": None,
                    "min:score": None,
                    "count_distinct:score": 0,
                },
            ),
        )

    def test_exact_types(self, memory: ReadOnlyPersistenceFacade) -> None:
        """sum of an integer column is an int, of a bigint a Decimal; avg a Decimal."""
        (group,) = memory.aggregate("leads", metrics=["sum:score", "avg:score", "sum:id"]).groups
        assert group.metrics["sum:score"] == 12 and type(group.metrics["sum:score"]) is int
        assert group.metrics["sum:id"] == decimal.Decimal(15)
        assert type(group.metrics["sum:id"]) is decimal.Decimal
        assert str(group.metrics["avg:score"]) == "3.0000000000000000"

    def test_cap(self, memory: ReadOnlyPersistenceFacade) -> None:
        """At most limit groups, the first in key order, and capped says more existed."""
        result = memory.aggregate("leads", group_by=["status"], limit=2)
        assert [g.keys["status"] for g in result.groups] == ["Won", "new"]
        assert result.capped and result.total_groups == 4 and result.matched == 5

    def test_no_match_without_grouping_is_one_group(
        self, memory: ReadOnlyPersistenceFacade
    ) -> None:
        """Like SQL, an aggregate without GROUP BY over no row is one group with count 0."""
        result = memory.aggregate("leads", [Filter("score", Op.GT, 99)], metrics=["count"])
        assert result.groups == (Group(keys={}, metrics={"count": 0}),)
        grouped = memory.aggregate("leads", [Filter("score", Op.GT, 99)], group_by=["status"])
        assert grouped.groups == () and grouped.matched == 0


class TestFacadeChecks:
    def test_filters_are_coerced(self, memory: ReadOnlyPersistenceFacade) -> None:
        """Filter values go through the column's type, as in a read."""
        result = memory.aggregate("leads", [Filter("score", Op.GTE, "2")])
        assert result.matched == 3

    @pytest.mark.parametrize(
        ("call", "error"),
        [
            ({"group_by": ["password"]}, ColumnNotAllowedError),
            ({"metrics": ["max:password"]}, ColumnNotAllowedError),
            ({"group_by": "status"}, InvalidQueryError),
            ({"group_by": ["status", "status"]}, InvalidQueryError),
            ({"group_by": ["status", "score", "email", "id"]}, InvalidQueryError),
            ({"metrics": []}, InvalidQueryError),
            ({"metrics": "count"}, InvalidQueryError),
            ({"metrics": ["sum:email"]}, InvalidQueryError),
            ({"metrics": ["avg:created_at"]}, InvalidQueryError),
            ({"limit": 0}, InvalidQueryError),
            ({"limit": 1001}, InvalidQueryError),
            ({"limit": True}, InvalidQueryError),
        ],
    )
    def test_refusals(
        self,
        memory: ReadOnlyPersistenceFacade,
        call: dict[str, object],
        error: type[Exception],
    ) -> None:
        """Unknown columns, bad shapes and metrics a type cannot take are typed errors."""
        with pytest.raises(error):
            memory.aggregate("leads", **call)  # type: ignore[arg-type]

    def test_policy_applies_to_grouped_and_aggregated_columns(self) -> None:
        """A column outside the policy's allowed columns can be neither grouped nor measured."""
        store = MemoryStore()
        create_persistence_agent(kind="memory", store=store).batch("leads", LEADS)
        policy = AccessPolicy(read_tables=frozenset({"leads"}), columns={"leads": {"id", "status"}})
        facade = ReadOnlyPersistenceFacade(MemoryBackend(store), policy)
        assert facade.aggregate("leads", group_by=["status"]).matched == 5
        for call in ({"group_by": ["score"]}, {"metrics": ["sum:score"]}):
            with pytest.raises(ColumnNotAllowedError):
                facade.aggregate("leads", **call)  # type: ignore[arg-type]
        with pytest.raises(TableNotAllowedError):
            facade.aggregate("clients")

    def test_numeric_comparisons_of_every_kind(self) -> None:
        """min/max on dates and numerics keep the column's type; group by uuid and boolean."""
        store = MemoryStore(schema=SUPABASE_STYLE.types)
        client = uuid.UUID(int=7)
        create_persistence_agent(kind="memory", store=store).batch(
            "leads",
            [
                {"client_id": client, "is_qualified": True, "deal_value": "10.50"},
                {"client_id": client, "is_qualified": False, "deal_value": "2.25"},
            ],
        )
        facade = create_read_only_facade(kind="memory", store=store)
        result = facade.aggregate(
            "leads", group_by=["client_id"], metrics=["sum:deal_value", "max:deal_value"]
        )
        assert result.groups == (
            Group(
                keys={"client_id": client},
                metrics={
                    "sum:deal_value": decimal.Decimal("12.75"),
                    "max:deal_value": decimal.Decimal("10.50"),
                },
            ),
        )


class TestPostgrestAggregate:
    def test_wire_request(self) -> None:
        """One GET: aliased columns and aggregates, order on the grouped columns, limit + 1."""
        store = MemoryStore()
        create_persistence_agent(kind="memory", store=store).batch("leads", LEADS)
        facade, emulator = _supabase(store)
        facade.aggregate(
            "leads",
            [Filter("score", Op.GT, 0)],
            group_by=["status"],
            metrics=["count", "sum:score"],
            limit=10,
        )
        (request,) = [r for r in emulator.requests if r.url.path == "/rest/v1/leads"]
        assert unquote(request.url.query.decode()) == (
            "select=g0:status,m0:count(),m1:score.sum(),n:count()"
            "&score=gt.0&order=status.asc.nullslast&limit=11"
        )

    def test_same_answer_as_memory_with_typed_values(
        self, memory: ReadOnlyPersistenceFacade
    ) -> None:
        """Groups, exact types and digits over HTTP equal the memory backend's."""
        store = MemoryStore()
        create_persistence_agent(kind="memory", store=store).batch("leads", LEADS)
        facade, _ = _supabase(store)
        call = {"group_by": ["status"], "metrics": ["count", "avg:score", "sum:id", "max:email"]}
        got, want = facade.aggregate("leads", **call), memory.aggregate("leads", **call)
        assert got.groups == want.groups and got.matched == want.matched
        for mine, theirs in zip(got.groups, want.groups, strict=True):
            assert [type(v) for v in mine.metrics.values()] == [
                type(v) for v in theirs.metrics.values()
            ]
            assert str(mine.metrics["avg:score"]) == str(theirs.metrics["avg:score"])

    def test_capped_counts_matches_separately(self) -> None:
        """When capped, the groups' counts are not all rows: the total is asked on its own."""
        store = MemoryStore()
        create_persistence_agent(kind="memory", store=store).batch("leads", LEADS)
        facade, emulator = _supabase(store)
        result = facade.aggregate("leads", group_by=["status"], limit=1)
        assert result.capped and result.matched == 5 and result.total_groups is None
        assert len([r for r in emulator.requests if r.url.path == "/rest/v1/leads"]) == 2

    def test_server_row_cap_below_the_limit_reports_capped(self) -> None:
        """A response cut by the server's row cap cannot prove there are no more groups."""
        store = MemoryStore()
        create_persistence_agent(kind="memory", store=store).batch("leads", LEADS)
        facade, _ = _supabase(store, max_rows=2, page_size=2)
        assert facade.aggregate("leads", group_by=["status"], limit=5).capped

    def test_disabled_aggregates_are_a_typed_explained_error(self) -> None:
        """PGRST123 becomes AggregatesDisabledError naming the server setting; no rows are
        read instead."""
        store = MemoryStore()
        create_persistence_agent(kind="memory", store=store).batch("leads", LEADS)
        facade, emulator = _supabase(store, aggregates=False)
        with pytest.raises(AggregatesDisabledError) as info:
            facade.aggregate("leads", group_by=["status"])
        assert "db-aggregates-enabled" in str(info.value)
        assert isinstance(info.value, UnsupportedOperatorError)
        reads = [r for r in emulator.requests if r.url.path == "/rest/v1/leads"]
        assert len(reads) == 1 and "count()" in unquote(reads[0].url.query.decode())

    def test_count_distinct_counts_the_grouped_pairs(self) -> None:
        """PostgREST has no count(DISTINCT ...): the server groups (status, email) pairs and
        the client counts them per status; NULL values and duplicates do not count."""
        store = MemoryStore()
        create_persistence_agent(kind="memory", store=store).batch(
            "leads",
            [
                {"status": "new", "email": "a@x.io"},
                {"status": "new", "email": "a@x.io"},
                {"status": "new", "email": "b@x.io"},
                {"status": "won", "email": None},
                {"status": None, "email": "c@x.io"},
            ],
        )
        memory = create_read_only_facade(kind="memory", store=store)
        facade, emulator = _supabase(store)
        query = {"group_by": ["status"], "metrics": ["count_distinct:email", "count"]}
        result = facade.aggregate("leads", **query)
        assert result == memory.aggregate("leads", **query)
        assert [dict(g.metrics) for g in result.groups] == [
            {"count_distinct:email": 2, "count": 3},
            {"count_distinct:email": 0, "count": 1},
            {"count_distinct:email": 1, "count": 1},
        ]
        queries = [unquote(r.url.query.decode()) for r in emulator.requests]
        assert any("g1:email" in query for query in queries)  # grouped by the pair
        capped, _ = _supabase(store, max_rows=2)  # a server row cap: the pairs come in pages
        whole = {"metrics": ["count_distinct:email"]}
        assert capped.aggregate("leads", **whole) == memory.aggregate("leads", **whole)

    def test_count_distinct_over_too_many_values_is_refused(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """More distinct pairs than the bound is a typed refusal, never a long scan."""
        from persistence.backends.supabase.postgrest import distinct as _postgrest_distinct

        monkeypatch.setattr(_postgrest_distinct, "MAX_DISTINCT_PAIRS", 3)
        store = MemoryStore()
        create_persistence_agent(kind="memory", store=store).batch(
            "leads", [{"email": f"{i}@x.io"} for i in range(5)]
        )
        facade, _ = _supabase(store)
        with pytest.raises(UnsupportedOperatorError, match="more than 3"):
            facade.aggregate("leads", metrics=["count_distinct:email"])

    def test_literal_star_is_checked_exactly(self, memory: ReadOnlyPersistenceFacade) -> None:
        """An icontains value with a literal '*' is aggregated over exactly matching rows."""
        store = MemoryStore()
        create_persistence_agent(kind="memory", store=store).batch("leads", LEADS)
        facade, _ = _supabase(store)
        flt = [Filter("email", Op.ICONTAINS, "c*d")]
        got = facade.aggregate("leads", flt, group_by=["status"], metrics=["count", "sum:score"])
        want = memory.aggregate("leads", flt, group_by=["status"], metrics=["count", "sum:score"])
        assert got.groups == want.groups and got.matched == want.matched == 1
