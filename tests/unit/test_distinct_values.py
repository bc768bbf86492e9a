"""``facade.distinct_values``: a column's values when it holds few, checked like a grouping.

The PostgreSQL statement (its probe, its plan) is tested in
``tests/integration/test_postgres_distinct_values.py``; the answers of every backend against
each other in ``tests/property/test_differential_aggregate.py``.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from persistence import (
    AccessPolicy,
    ColumnNotAllowedError,
    DistinctValues,
    InvalidQueryError,
    MemoryBackend,
    MemoryStore,
    ReadOnlyPersistenceFacade,
    RedactionPolicy,
    TableNotAllowedError,
    create_persistence_agent,
    create_read_only_facade,
)
from persistence.vocabulary import SchemaVocabulary
from tests.support.postgrest import BASE_URL, PostgrestEmulator, fake_key

LEADS = [
    {"status": "won", "score": 3, "email": "a@x.io"},
    {"status": "new", "score": 1, "email": "b@x.io"},
    {"status": None, "score": None, "email": "c@x.io"},
    {"status": "Won", "score": 3, "email": "d@x.io"},
    {"status": "new", "score": 2, "email": None},
]


def _store(rows: list[dict[str, object]] = LEADS) -> MemoryStore:
    store = MemoryStore()
    create_persistence_agent(kind="memory", store=store).batch("leads", rows)
    return store


@pytest.fixture
def memory() -> ReadOnlyPersistenceFacade:
    return create_read_only_facade(kind="memory", store=_store())


class TestAnswers:
    def test_values_in_key_order_without_null(self, memory: ReadOnlyPersistenceFacade) -> None:
        """Distinct, NULL left out, in code-point order (upper case first), typed."""
        assert memory.distinct_values("leads", "status") == DistinctValues(
            "status", ("Won", "new", "won"), False
        )
        assert memory.distinct_values("leads", "score").values == (1, 2, 3)

    def test_more_than_the_limit_is_capped_with_no_value(
        self, memory: ReadOnlyPersistenceFacade
    ) -> None:
        """Exactly ``limit`` values are not capped; one more is, and lists none."""
        assert memory.distinct_values("leads", "status", limit=3).capped is False
        assert memory.distinct_values("leads", "status", limit=2) == DistinctValues(
            "status", (), True
        )

    def test_nulls_do_not_count_towards_the_limit(self) -> None:
        """A NULL is no value: three values and NULLs fit a limit of three."""
        facade = create_read_only_facade(
            kind="memory", store=_store([{"status": s} for s in ("a", None, "b", None, "c")])
        )
        assert facade.distinct_values("leads", "status", limit=3).values == ("a", "b", "c")

    def test_awaited_twin_answers_alike(self, memory: ReadOnlyPersistenceFacade) -> None:
        for limit in (1, 2, 3, None):
            awaited = asyncio.run(memory.adistinct_values("leads", "status", limit=limit))
            assert awaited == memory.distinct_values("leads", "status", limit=limit)

    def test_supabase_answers_through_its_aggregate(
        self, memory: ReadOnlyPersistenceFacade
    ) -> None:
        """A backend without its own statement groups the non-NULL rows: same answer."""
        emulator = PostgrestEmulator(_store(), aggregates=True)
        with httpx.Client(transport=emulator.transport()) as http:
            supabase = create_read_only_facade(
                kind="supabase", url=BASE_URL, key=fake_key(), http_client=http
            )
            for column in ("status", "score", "email"):
                for limit in (1, 2, 3, 4, None):
                    got = supabase.distinct_values("leads", column, limit=limit)
                    assert got == memory.distinct_values("leads", column, limit=limit)


class TestRefusals:
    @pytest.mark.parametrize(
        ("column", "limit", "error"),
        [
            ("nope", None, ColumnNotAllowedError),
            ("email; drop table leads", None, InvalidQueryError),
            (["status"], None, InvalidQueryError),
            ("status", 0, InvalidQueryError),
            ("status", 1001, InvalidQueryError),
            ("status", True, InvalidQueryError),
        ],
    )
    def test_bad_arguments_are_typed_errors(
        self,
        memory: ReadOnlyPersistenceFacade,
        column: object,
        limit: object,
        error: type[Exception],
    ) -> None:
        with pytest.raises(error):
            memory.distinct_values("leads", column, limit=limit)  # type: ignore[arg-type]

    def test_policy_applies(self) -> None:
        """A column or table outside the policy is refused as for a grouping."""
        policy = AccessPolicy(read_tables=frozenset({"leads"}), columns={"leads": {"id", "status"}})
        facade = ReadOnlyPersistenceFacade(MemoryBackend(_store()), policy)
        assert facade.distinct_values("leads", "status").values == ("Won", "new", "won")
        with pytest.raises(ColumnNotAllowedError):
            facade.distinct_values("leads", "score")
        with pytest.raises(TableNotAllowedError):
            facade.distinct_values("clients", "name")

    def test_a_redacted_column_is_refused_as_a_grouping(self) -> None:
        """Its values would leave in clear: refused, and the error names the grouping, not the
        filter the facade adds for NULLs."""
        redaction = RedactionPolicy({"leads": {"email": "mask:email"}}, lookups="all")
        facade = create_read_only_facade(kind="memory", store=_store(), redaction=redaction)
        with pytest.raises(ColumnNotAllowedError, match="grouping"):
            facade.distinct_values("leads", "email")
        assert facade.distinct_values("leads", "status").capped is False


class TestLearning:
    def test_learning_reads_distinct_values(self) -> None:
        """The vocabulary's values are the column's distinct values; a column of more than
        ``max_values`` is skipped and says why."""
        facade = create_read_only_facade(kind="memory", store=_store())
        learned = SchemaVocabulary.learn(facade, tables=["leads"], max_values=3).table("leads")
        assert learned is not None
        assert learned.columns["status"].values == ("Won", "new", "won")
        assert learned.columns["email"].values is None
        assert learned.columns["email"].skipped == "more than 3 distinct values"

    def test_nulls_do_not_push_a_column_over(self) -> None:
        """Exactly ``max_values`` values plus NULLs are learned (a NULL is no value)."""
        rows = [{"status": s} for s in ("a", "b", None)]
        facade = create_read_only_facade(kind="memory", store=_store(rows))
        learned = SchemaVocabulary.learn(facade, tables=["leads"], max_values=2).table("leads")
        assert learned is not None
        assert learned.columns["status"].values == ("a", "b")
