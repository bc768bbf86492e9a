"""What a run understood and applied: conditions checked by the facade, sources, ignored parts,
count-only answers, paging hints and the fallback's reads."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import jsonschema
import pytest

from persistence import (
    AccessPolicy,
    Filter,
    InvalidQueryError,
    MemoryBackend,
    MemoryStore,
    Op,
    ReadOnlyPersistenceFacade,
    create_persistence_agent,
    create_read_only_facade,
)
from rag_agent import (
    FallbackRead,
    FallbackRequest,
    FallbackResult,
    MemorySlidingWindowLimiter,
    RAGAgent,
    RAGSettings,
    envelope_json_schema,
)
from rag_agent.hooks import FallbackCall
from rag_agent.specs import Condition, ExtractionRequest, Ignored, Understanding
from rag_agent.understanding.conditions import key_conditions, query_filters_view
from rag_agent.understanding.llm.schema import SCHEMA_NAME
from rag_agent.understanding.request import (
    apply_conditions,
    explicit_conditions,
    understand_request,
)
from tests.support.extraction import answer, cond
from tests.unit.test_llm_scripted import ScriptedChatModel, call, calls

NOW = dt.datetime(2026, 3, 4, 5, 6, 7, tzinfo=dt.UTC)
SCHEMA = envelope_json_schema()
LEADS = [
    {"id": i, "email": f"p{i}@acme.example", "company_name": "Acme", "score": i * 10}
    for i in range(1, 8)
] + [{"id": 8, "email": "z@globex.example", "company_name": "Globex", "score": 50}]


@pytest.fixture
def facade(store: MemoryStore) -> ReadOnlyPersistenceFacade:
    create_persistence_agent(kind="memory", store=store).batch("leads", LEADS)
    return create_read_only_facade(kind="memory", store=store)


def agent(facade: ReadOnlyPersistenceFacade, **kwargs: Any) -> RAGAgent:
    return RAGAgent(facade, settings=RAGSettings(), now=lambda: NOW, **kwargs)


def valid(data: dict[str, Any]) -> dict[str, Any]:
    jsonschema.validate(json.loads(json.dumps(data)), SCHEMA)
    return data


class TestApplyConditions:
    def test_applies_what_the_facade_accepts_and_ignores_the_rest(
        self, facade: ReadOnlyPersistenceFacade
    ) -> None:
        """Known columns pass; an unknown column and an unsupported value are ignored with the
        facade's reason."""
        applied, refused = apply_conditions(
            facade,
            "leads",
            [
                Condition("company_name", Op.ICONTAINS, "acme"),
                Condition("industry", Op.EQ, "logistics", "llm"),
                Condition("score", Op.ICONTAINS, 5),
            ],
        )
        assert applied == (Condition("company_name", Op.ICONTAINS, "acme"),)
        assert [condition.column for condition, _ in refused] == ["industry", "score"]
        ignored = [part for _, part in refused]
        assert [part.text for part in ignored] == [
            "industry eq 'logistics'",
            "score icontains 5",
        ]
        assert "has no column 'industry'" in ignored[0].reason
        assert "takes text" in ignored[1].reason

    def test_a_second_condition_with_the_same_column_and_operator_is_ignored(
        self, facade: ReadOnlyPersistenceFacade
    ) -> None:
        """Two 'eq' on one column: the first is applied, the second reported."""
        applied, refused = apply_conditions(
            facade, "leads", [Condition("id", Op.EQ, 1), Condition("id", Op.EQ, 2, "tool")]
        )
        assert applied == (Condition("id", Op.EQ, 1),)
        [(condition, part)] = refused
        assert condition.value == 2 and "second 'eq'" in part.reason

    def test_a_table_outside_the_policy_is_refused(self, store: MemoryStore) -> None:
        """Conditions on a table the policy does not allow are all ignored."""
        policy = AccessPolicy(read_tables=frozenset({"leads"}), write_tables=frozenset())
        facade = ReadOnlyPersistenceFacade(MemoryBackend(store), policy)
        applied, refused = apply_conditions(facade, "clients", [Condition("id", Op.EQ, 1)])
        assert applied == () and "not" in refused[0][1].reason


class TestExplicitConditions:
    def test_filter_keys_become_tool_conditions(self) -> None:
        """The four filter keys map to their columns and operators."""
        assert explicit_conditions({"company": "Acme", "client_id": 7}) == (
            Condition("company_name", Op.ICONTAINS, "Acme", "tool"),
            Condition("client_id", Op.EQ, 7, "tool"),
        )

    @pytest.mark.parametrize("bad", ["company=acme", 5, [("id", 1)]])
    def test_anything_else_is_refused(self, bad: object) -> None:
        """A string, a number or a list of non-conditions is an InvalidQueryError."""
        with pytest.raises(InvalidQueryError):
            explicit_conditions(bad)


class TestQueryFiltersView:
    def test_filter_keys_and_other_conditions(self) -> None:
        """The filter keys' conditions show as their keys; others as {column: {op: value}}."""
        conditions = (
            *key_conditions({"id": 4, "email": "a@x.io"}, "rules"),
            Condition("score", Op.GT, 80),
            Condition("score", Op.LTE, 90),
            Condition("status", Op.IN, ("new", "qualified")),
        )
        assert query_filters_view(conditions) == {
            "id": 4,
            "email": "a@x.io",
            "score": {"gt": 80, "lte": 90},
            "status": {"in": ["new", "qualified"]},
        }


class TestUnderstandRequest:
    def test_explicit_conditions_win_over_the_text(self) -> None:
        """The text's company and the given company: the given one is kept, once."""
        given = (Condition("company_name", Op.ICONTAINS, "Globex", "tool"),)
        request = understand_request(
            "leads at Acme",
            table=None,
            explicit=given,
            count_only=None,
            now=NOW,
            extract=None,
        )
        assert request.conditions == given and request.table == "leads"

    def test_explicit_conditions_win_on_every_column_they_name(self) -> None:
        """The text's "score above 80" and the caller's score >= 50: the caller's applies, and
        the text's is reported as overridden; other columns of the text stay."""
        given = (Condition("score", Op.GTE, 50, "tool"),)
        request = understand_request(
            "leads at Acme with score above 80",
            table=None,
            explicit=given,
            count_only=None,
            now=NOW,
            extract=None,
        )
        assert request.conditions == (
            Condition("company_name", Op.ICONTAINS, "Acme"),
            Condition("score", Op.GTE, 50, "tool"),
        )
        assert [(i.text, i.reason) for i in request.ignored] == [
            ("score gt 80", "the caller's own filter on score applies instead")
        ]

    def test_the_extractor_is_asked_only_when_the_rules_find_nothing(self) -> None:
        """Rules that match skip the extractor; text they cannot read goes to it."""
        asked: list[tuple[str, str]] = []

        def extract(text: str, table: str) -> Understanding:
            asked.append((text, table))
            return Understanding(conditions=(Condition("score", Op.GT, 5, "llm"),))

        understand_request(
            "lead #3", table=None, explicit=None, count_only=None, now=NOW, extract=extract
        )
        assert asked == []
        request = understand_request(
            "the usual suspects",
            table="clients",
            explicit=None,
            count_only=None,
            now=NOW,
            extract=extract,
        )
        assert asked == [("the usual suspects", "clients")]
        assert request.conditions == (Condition("score", Op.GT, 5, "llm"),)

    def test_what_the_extractor_could_not_map_is_kept_as_ignored(self) -> None:
        """An extractor that finds nothing still says what it left out."""
        request = understand_request(
            "the usual suspects",
            table=None,
            explicit=None,
            count_only=None,
            now=NOW,
            extract=lambda t, tb: Understanding(ignored=(Ignored("suspects", "no column"),)),
        )
        assert request.conditions == () and request.ignored == (Ignored("suspects", "no column"),)


class TestRunReportsWhatItUnderstood:
    def test_sources_of_applied_filters(self, facade: ReadOnlyPersistenceFacade) -> None:
        """Rules' conditions say 'rules', explicit ones 'tool'."""
        data = valid(
            agent(facade).run(
                "leads at acme",
                filters=[Condition("score", Op.GTE, 50, "tool")],
                return_json=True,
            )
        )
        assert data["metadata"]["filters"] == [
            {"column": "company_name", "op": "icontains", "value": "acme", "source": "rules"},
            {"column": "score", "op": "gte", "value": 50, "source": "tool"},
        ]
        assert data["metadata"]["query_filters"] == {"company": "acme", "score": {"gte": 50}}
        assert [r["id"] for r in data["records"]] == [5, 6, 7]

    def test_llm_conditions_say_llm_and_the_extractor_sees_the_schema(
        self, facade: ReadOnlyPersistenceFacade
    ) -> None:
        """The extractor gets the table's columns with kinds and operators; its conditions are
        applied with source 'llm'."""
        requests: list[ExtractionRequest] = []

        def extractor(request: ExtractionRequest) -> Understanding:
            requests.append(request)
            return Understanding(conditions=(Condition("score", Op.GT, 60, "llm"),))

        data = valid(agent(facade, extractor=extractor).run("the strong ones", return_json=True))
        [request] = requests
        assert request.table == "leads" and "leads" in request.tables and request.now == NOW
        score = next(c for c in request.columns if c.name == "score")
        assert "gt" in score.operators
        assert data["metadata"]["filters"][0]["source"] == "llm"
        assert [r["id"] for r in data["records"]] == [7]

    def test_a_failing_extractor_means_nothing_understood(
        self, facade: ReadOnlyPersistenceFacade
    ) -> None:
        """An extractor that raises, or answers something else, reads nothing."""

        def broken(request: ExtractionRequest) -> Understanding:
            raise RuntimeError("model down")

        for extractor in (broken, lambda request: {"company": "acme"}):
            data = valid(agent(facade, extractor=extractor).run("hmm", return_json=True))
            assert data["records"] == [] and "filters" not in data["metadata"]
            assert "error" not in data["metadata"]

    def test_conditions_the_facade_refuses_are_ignored_not_fatal(
        self, facade: ReadOnlyPersistenceFacade
    ) -> None:
        """An LLM condition on a missing column is listed in ignored; the rest still runs."""
        data = valid(
            agent(
                facade,
                extractor=lambda r: Understanding(
                    conditions=(
                        Condition("industry", Op.EQ, "logistics", "llm"),
                        Condition("company_name", Op.ICONTAINS, "globex", "llm"),
                    )
                ),
            ).run("the logistics company", return_json=True)
        )
        meta = data["metadata"]
        assert [part["text"] for part in meta["ignored"]] == ["industry eq 'logistics'"]
        assert [r["id"] for r in data["records"]] == [8]

    def test_explicit_filters_of_which_none_applies_are_an_error(
        self, facade: ReadOnlyPersistenceFacade
    ) -> None:
        """Explicit conditions that all fail never turn into an unfiltered read."""
        data = valid(
            agent(facade).run(
                "", filters=[Condition("industry", Op.EQ, "x", "tool")], return_json=True
            )
        )
        assert data["records"] == [] and data["metadata"]["error"]["type"] == "InvalidQueryError"
        assert data["metadata"]["ignored"][0]["text"] == "industry eq 'x'"


class TestCountOnly:
    def test_count_only_answers_the_number_and_no_records(
        self, facade: ReadOnlyPersistenceFacade
    ) -> None:
        """count_only: total_count is the number of matches, records are empty, no paging."""
        rag = agent(facade)
        data = valid(rag.run("leads at acme", count_only=True, return_json=True))
        meta = data["metadata"]
        assert meta["total_count"] == 7 and meta["count_only"] is True
        assert data["records"] == [] and "has_more" not in meta
        assert meta["cache"] == "miss"
        again = valid(rag.run("leads at acme", count_only=True, return_json=True))
        assert again["metadata"]["cache"] == "hit" and again["metadata"]["total_count"] == 7

    def test_a_zero_count_is_an_answer_not_a_fallback(
        self, facade: ReadOnlyPersistenceFacade
    ) -> None:
        """No fallback runs for a count of zero: zero is what was asked."""
        fallback_calls: list[FallbackRequest] = []

        def fallback(request: FallbackRequest) -> FallbackResult:
            fallback_calls.append(request)
            return FallbackResult()

        data = agent(facade, fallback=fallback).run(
            "leads at initech", count_only=True, return_json=True
        )
        assert data["metadata"]["total_count"] == 0 and "fallback" not in data["metadata"]
        assert fallback_calls == []

    def test_read_count_only(self, facade: ReadOnlyPersistenceFacade) -> None:
        """RAGAgent.read(count_only=True) counts with the same filters a page would use."""
        data = valid(
            agent(facade).read(
                "leads", [Filter("score", Op.GT, 40)], count_only=True, return_json=True
            )
        )
        assert data["metadata"]["total_count"] == 4 and data["records"] == []
        assert data["metadata"]["query_filters"] == {"score": {"gt": 40}}
        assert data["metadata"]["filters"][0]["source"] == "tool"


class TestPaging:
    @pytest.mark.parametrize(
        ("limit", "offset", "has_more", "next_offset"),
        [(3, 0, True, 3), (3, 3, True, 6), (3, 6, False, None), (10, 0, False, None)],
    )
    def test_has_more_and_next_offset(
        self,
        facade: ReadOnlyPersistenceFacade,
        limit: int,
        offset: int,
        has_more: bool,
        next_offset: int | None,
    ) -> None:
        """has_more says whether rows follow this page; next_offset is where they start."""
        meta = valid(
            agent(facade).run("leads at acme", limit=limit, offset=offset, return_json=True)
        )["metadata"]
        assert meta["has_more"] is has_more
        assert meta.get("next_offset") == next_offset

    def test_walking_next_offset_visits_every_match_once(
        self, facade: ReadOnlyPersistenceFacade
    ) -> None:
        """Following next_offset from 0 returns each matching row exactly once."""
        rag, seen, offset = agent(facade), [], 0
        while True:
            meta_and_records = rag.run("leads at acme", limit=2, offset=offset, return_json=True)
            seen += [r["id"] for r in meta_and_records["records"]]
            if not meta_and_records["metadata"]["has_more"]:
                break
            offset = meta_and_records["metadata"]["next_offset"]
        assert seen == [1, 2, 3, 4, 5, 6, 7]


class TestFallbackReads:
    def test_the_envelope_lists_the_reads_the_fallback_made(
        self, facade: ReadOnlyPersistenceFacade
    ) -> None:
        """fallback_reads: table, filters and row count of each read, in order."""
        row = {"id": 8, "email": "z@globex.example", "company_name": "Globex", "score": 50}
        result = FallbackResult(
            reads=[FallbackRead("leads", [row], retrieved_at=NOW)],
            calls=[
                FallbackCall("leads", {"company_name": {"icontains": "glob"}}, 1),
                FallbackCall("clients", {}, 0),
            ],
        )
        data = valid(agent(facade, fallback=lambda r: result).run("anything", return_json=True))
        assert data["metadata"]["fallback_reads"] == [
            {"table": "leads", "filters": {"company_name": {"icontains": "glob"}}, "rows": 1},
            {"table": "clients", "filters": {}, "rows": 0},
        ]
        assert [r["id"] for r in data["records"]] == [8]


class TestExtractionIsMetered:
    def test_a_zero_budget_makes_no_model_call_at_all(
        self, facade: ReadOnlyPersistenceFacade
    ) -> None:
        """With RAG_MAX_FALLBACKS_PER_MIN=0, twenty questions the rules cannot read make no
        model call: neither extraction nor fallback."""
        model = ScriptedChatModel(script=[])
        rag = agent(facade, llm=model, limiter=MemorySlidingWindowLimiter(0))
        for i in range(20):
            data = rag.run(f"the usual suspects number {i}", return_json=True)
            assert data["metadata"]["fallback"] == "suppressed"
        assert model.requests == []

    def test_a_repeated_question_is_extracted_once(self, facade: ReadOnlyPersistenceFacade) -> None:
        """The same question twice costs one extraction call and one unit of budget."""
        found = answer(cond("company_name", "icontains", "Globex"))
        model = ScriptedChatModel(script=[calls(call(SCHEMA_NAME, **found))])
        limiter = MemorySlidingWindowLimiter(5)
        rag = agent(facade, llm=model, limiter=limiter)
        for _ in range(2):
            data = rag.run("everyone over at that Globex place", return_json=True)
            assert [r["id"] for r in data["records"]] == [8]
            assert data["metadata"]["filters"][0]["source"] == "llm"
        assert len(model.requests) == 1 and limiter.used() == 1


class TestCacheFollowsWrites:
    def test_a_write_to_the_shared_store_drops_the_cached_answer(
        self, store: MemoryStore, facade: ReadOnlyPersistenceFacade
    ) -> None:
        """After a PersistenceAgent writes to the table, the same question is read again and
        sees the new row; a write to another table leaves the cached answer in place."""
        rag = agent(facade)
        writer = create_persistence_agent(kind="memory", store=store)
        first = rag.run("leads at globex", return_json=True)
        assert first["metadata"]["total_count"] == 1
        assert rag.run("leads at globex", return_json=True)["metadata"]["cache"] == "hit"
        writer.write("inquiries", {"subject": "Globex"})
        assert rag.run("leads at globex", return_json=True)["metadata"]["cache"] == "hit"
        writer.write("leads", {"email": "new@globex.example", "company_name": "Globex"})
        again = rag.run("leads at globex", return_json=True)
        assert again["metadata"]["cache"] == "miss" and again["metadata"]["total_count"] == 2
        counted = rag.run("leads at globex", count_only=True, return_json=True)
        assert counted["metadata"]["total_count"] == 2


class TestExplicitSource:
    def test_conditions_a_caller_passes_are_reported_as_the_tools(
        self, facade: ReadOnlyPersistenceFacade
    ) -> None:
        """A Condition built with the default source, passed as filters=, shows source 'tool'."""
        data = agent(facade).run("", filters=[Condition("score", Op.GTE, 70)], return_json=True)
        assert [f["source"] for f in data["metadata"]["filters"]] == ["tool"]
