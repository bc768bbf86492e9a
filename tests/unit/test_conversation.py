"""Conversations: follow-ups read against the last answer, the history's bounds and JSON form,
the trace of a run, and the fallback's answer with its citations.

The follow-up kinds are scored on a labelled set over two schemas in
``tests/unit/test_conversation_accuracy.py``; here each mechanism is checked on its own, with
truths computed from the rows in plain Python.
"""

from __future__ import annotations

import asyncio
import functools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import HumanMessage

from persistence import MemoryStore, create_read_only_facade
from rag_agent import Conversation, ConversationError, RAGAgent
from rag_agent.conversation import Turn, TurnCondition
from rag_agent.conversation.followup import read_follow_up
from rag_agent.pipeline import pipeline as pipeline_module
from rag_agent.runtime.trace import Trace
from rag_agent.settings import RAGSettings
from rag_agent.specs import Understanding
from tests.data.schema_questions import NOW
from tests.unit.test_llm_scripted import ScriptedChatModel, call, calls, final

TABLES = ("leads", "conversations", "messages", "clients", "campaigns", "staging_leads")


def _json_children(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(children, max_size=4) | st.dictionaries(
        st.text(max_size=8), children, max_size=4
    )


def settings_() -> RAGSettings:
    return RAGSettings.from_env({}, cache_disabled=True, llm=False)


@pytest.fixture(scope="module")
def sample() -> tuple[RAGAgent, MemoryStore]:
    from rag_agent.ops.sample import load_sample

    store = MemoryStore()
    load_sample(store)
    facade = create_read_only_facade(kind="memory", store=store, settings=settings_())
    return RAGAgent(facade, settings=settings_(), now=lambda: NOW), store


def rows(store: MemoryStore, table: str) -> list[dict[str, Any]]:
    return [dict(row) for row in store.rows(table)]


def ids(envelope: dict[str, Any]) -> set[Any]:
    return {r["id"] for r in envelope["records"]}


def ask(agent: RAGAgent, conversation: Conversation, text: str, **options: Any) -> dict[str, Any]:
    envelope = agent.run(text, conversation=conversation, return_json=True, **options)
    assert "error" not in envelope["metadata"], envelope["metadata"]
    return envelope


class TestFollowUps:
    def test_refinement_adds_to_the_previous_conditions(
        self, sample: tuple[RAGAgent, MemoryStore]
    ) -> None:
        agent, store = sample
        conversation = agent.conversation()
        first = ask(agent, conversation, "leads at Globex", limit=500)
        assert first["metadata"]["context"] == {
            "kind": "fresh",
            "turn": None,
            "carried": [],
            "dropped": [],
        }
        second = ask(agent, conversation, "only the qualified ones", limit=500)
        truth = {
            r["id"]
            for r in rows(store, "leads")
            if "globex" in (r["company_name"] or "").lower() and r["status"] == "qualified"
        }
        assert truth and ids(second) == truth
        context = second["metadata"]["context"]
        assert context["kind"] == "refine" and context["turn"] == 1
        assert context["carried"] == ["company_name icontains 'Globex'"]

    def test_a_negation_removes_the_condition_it_names(
        self, sample: tuple[RAGAgent, MemoryStore]
    ) -> None:
        agent, store = sample
        conversation = agent.conversation()
        ask(agent, conversation, "leads at Globex", limit=500)
        ask(agent, conversation, "only the qualified ones", limit=500)
        third = ask(agent, conversation, "not Globex", limit=500)
        qualified = sum(1 for r in rows(store, "leads") if r["status"] == "qualified")
        assert third["metadata"]["total_count"] == qualified
        assert third["metadata"]["context"]["dropped"] == ["company_name icontains 'Globex'"]

    def test_their_rows_follow_the_foreign_key_from_every_matched_row(
        self, sample: tuple[RAGAgent, MemoryStore]
    ) -> None:
        agent, store = sample
        conversation = agent.conversation()
        first = ask(agent, conversation, "qualified leads at Globex", limit=5)
        assert first["metadata"]["total_count"] > 5  # more rows matched than were shown
        related = ask(agent, conversation, "what about their conversations?", limit=500)
        leads = {
            r["id"]
            for r in rows(store, "leads")
            if "globex" in (r["company_name"] or "").lower() and r["status"] == "qualified"
        }
        truth = {r["id"] for r in rows(store, "conversations") if r["lead_id"] in leads}
        assert truth and ids(related) == truth
        assert related["metadata"]["source"] == "persistence.conversations"
        assert related["metadata"]["filters"][-1]["source"] == "context"

    def test_an_item_is_one_record_of_the_previous_page(
        self, sample: tuple[RAGAgent, MemoryStore]
    ) -> None:
        agent, _ = sample
        conversation = agent.conversation()
        first = ask(agent, conversation, "qualified leads", limit=5)
        third = ask(agent, conversation, "the third one")
        assert [r["id"] for r in third["records"]] == [first["records"][2]["id"]]
        last = ask(agent, conversation, "#1 of that list")
        assert [r["id"] for r in last["records"]] == [first["records"][2]["id"]]

    def test_next_page_moves_the_previous_window(
        self, sample: tuple[RAGAgent, MemoryStore]
    ) -> None:
        agent, _ = sample
        conversation = agent.conversation()
        whole = agent.run("qualified leads", limit=10, return_json=True)
        ask(agent, conversation, "qualified leads", limit=5)
        second = ask(agent, conversation, "next page")
        assert [r["id"] for r in second["records"]] == [r["id"] for r in whole["records"][5:]]
        assert second["metadata"]["offset"] == 5
        back = ask(agent, conversation, "previous page")
        assert [r["id"] for r in back["records"]] == [r["id"] for r in whole["records"][:5]]

    def test_a_new_subject_is_a_question_of_its_own(
        self, sample: tuple[RAGAgent, MemoryStore]
    ) -> None:
        agent, _ = sample
        conversation = agent.conversation()
        ask(agent, conversation, "leads at Globex")
        alone = agent.run("campaigns of client 9", return_json=True)
        fresh = ask(agent, conversation, "now campaigns of client 9")
        assert ids(fresh) == ids(alone)
        assert fresh["metadata"]["context"] == {
            "kind": "fresh",
            "turn": None,
            "carried": [],
            "dropped": [],
        }

    def test_a_count_carries_over_until_rows_are_asked_for(
        self, sample: tuple[RAGAgent, MemoryStore]
    ) -> None:
        agent, store = sample
        conversation = agent.conversation()
        ask(agent, conversation, "how many leads at Globex?")
        counted = ask(agent, conversation, "and the qualified ones?")
        assert counted["metadata"]["count_only"] is True and counted["records"] == []
        truth = sum(
            1
            for r in rows(store, "leads")
            if "globex" in (r["company_name"] or "").lower() and r["status"] == "qualified"
        )
        assert counted["metadata"]["total_count"] == truth
        shown = ask(agent, conversation, "show them", limit=500)
        assert len(shown["records"]) == truth

    def test_an_explicit_table_makes_a_question_stand_alone(
        self, sample: tuple[RAGAgent, MemoryStore]
    ) -> None:
        agent, _ = sample
        conversation = agent.conversation()
        ask(agent, conversation, "leads at Globex")
        alone = ask(agent, conversation, "only the qualified ones", table="leads")
        assert [f["column"] for f in alone["metadata"]["filters"]] == ["status"]

    def test_what_cannot_be_followed_is_said(self, sample: tuple[RAGAgent, MemoryStore]) -> None:
        agent, _ = sample
        conversation = agent.conversation()
        ask(agent, conversation, "lead 42")
        missing = ask(agent, conversation, "the fifth one")
        assert missing["metadata"]["total_count"] == 0
        assert "shows 1 record" in missing["metadata"]["ignored"][0]["reason"]
        ask(agent, conversation, "lead 42")
        done = ask(agent, conversation, "next page")
        assert done["records"] == []
        assert "last page" in done["metadata"]["ignored"][0]["reason"]

    def test_async_runs_read_the_same_follow_ups(
        self, sample: tuple[RAGAgent, MemoryStore]
    ) -> None:
        agent, _ = sample
        questions = ["leads at Globex", "only the qualified ones", "their conversations"]
        blocking, awaited = agent.conversation(), agent.conversation()
        expected = [ids(ask(agent, blocking, q, limit=500)) for q in questions]

        async def conversation() -> list[set[Any]]:
            return [
                ids(await agent.arun(q, conversation=awaited, limit=500, return_json=True))
                for q in questions
            ]

        assert asyncio.run(conversation()) == expected


@pytest.fixture(scope="module")
def second() -> tuple[RAGAgent, MemoryStore]:
    from tests.data import second_schema

    store = second_schema.memory_store()
    second_schema.load_memory(store)
    facade = create_read_only_facade(
        kind="memory",
        store=store,
        relations=second_schema.SECOND.relations,
        settings=settings_(),
    )
    return RAGAgent(facade, settings=settings_(), now=lambda: NOW), store


class TestSecondSchema:
    """The same follow-ups on a schema with other columns, enums and booleans."""

    def test_refine_then_related_then_exclusion(self, second: tuple[RAGAgent, MemoryStore]) -> None:
        agent, store = second
        conversation = agent.conversation()
        ask(agent, conversation, "our gold clients", limit=500)
        emea = ask(agent, conversation, "only the ones in EMEA", limit=500)
        clients = {
            r["id"] for r in rows(store, "clients") if r["tier"] == "gold" and r["region"] == "EMEA"
        }
        assert ids(emea) == clients
        leads = ask(agent, conversation, "their leads", limit=500)
        truth = {r["id"] for r in rows(store, "leads") if r["client_id"] in clients}
        assert ids(leads) == truth
        without = ask(agent, conversation, "not webinar", limit=500)
        kept = {
            r["id"]
            for r in rows(store, "leads")
            if r["client_id"] in clients and r["source"] is not None and r["source"] != "webinar"
        }
        assert ids(without) == kept


class TestConversationObject:
    def test_round_trip_gives_the_same_answers(self, sample: tuple[RAGAgent, MemoryStore]) -> None:
        agent, _ = sample
        kept, carried = agent.conversation(), agent.conversation()
        for text in ("qualified leads", "the second one", "their conversations", "next page"):
            carried = Conversation.from_json(json.loads(json.dumps(carried.to_json())))
            assert ids(ask(agent, carried, text, limit=5)) == ids(ask(agent, kept, text, limit=5))
        assert carried.to_json()["turns"] == kept.to_json()["turns"]

    def test_turns_are_bounded_and_numbered_over_the_whole_conversation(self) -> None:
        conversation = Conversation(max_turns=3)
        for number in range(1, 6):
            conversation.add(Turn(number=conversation.next_number(), question=f"q{number}"))
        assert [t.number for t in conversation.turns] == [3, 4, 5]
        conversation.reset()
        assert conversation.turns == () and conversation.next_number() == 6

    def test_history_keeps_the_most_recent_turns_within_its_token_budget(self) -> None:
        conversation = Conversation(max_history_tokens=40)
        for number in range(1, 6):
            conversation.add(
                Turn(number=number, question=f"question {number}", table="leads", total_count=3)
            )
        history = conversation.history()
        assert history[-2:] == ("Q5: question 5", "A5: leads: 3 rows matched")
        assert sum(len(line) + 1 for line in history) <= 40 * 4
        assert "Q1: question 1" not in history

    @pytest.mark.parametrize(
        "data",
        [
            {},
            {"id": "x", "max_turns": 0, "max_history_tokens": 1},
            {"id": "x", "max_turns": 5, "max_history_tokens": 1, "turns": [{"question": "q"}]},
            {"id": "x", "max_turns": 5, "max_history_tokens": 1, "extra": 1},
            "not json",
            {"id": "x", "max_turns": 5, "max_history_tokens": 1, "turns": [], "version": 2},
        ],
    )
    def test_malformed_data_is_a_typed_error(self, data: Any) -> None:
        with pytest.raises(ConversationError, match="not a conversation"):
            Conversation.from_json(data)

    @given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(), _json_children))
    @settings(max_examples=200)
    def test_no_json_value_reads_as_anything_but_a_conversation_or_a_typed_error(
        self, data: Any
    ) -> None:
        try:
            read = Conversation.from_json(data if isinstance(data, dict) else {"turns": data})
        except ConversationError as exc:
            assert str(exc).startswith("not a conversation")
        else:  # what reads as a conversation writes back as itself
            assert Conversation.from_json(read.to_json()).to_json() == read.to_json()

    def test_a_tampered_turn_reaches_no_table_outside_the_allow_list(self) -> None:
        store = MemoryStore()
        store.insert("leads", [{"id": 1, "company_name": "Acme"}])
        store.insert("secrets", [{"id": 1, "lead_id": 1, "value": "s3cret"}])
        facade = create_read_only_facade(kind="memory", store=store, settings=settings_())
        agent = RAGAgent(facade, settings=settings_())
        forged = Conversation(
            turns=[
                Turn(
                    number=1,
                    question="x",
                    table="secrets",
                    conditions=(TurnCondition(column="value", op="neq", value="", source="rules"),),
                    ids=(1,),
                    total_count=1,
                )
            ]
        )
        for text in ("next page", "the first one", "only the new ones"):
            envelope = agent.run(text, conversation=forged, return_json=True)
            assert "s3cret" not in json.dumps(envelope)
            assert envelope["metadata"]["error"]["type"] == "TableNotAllowedError"

    def test_a_conversation_must_be_one(self, sample: tuple[RAGAgent, MemoryStore]) -> None:
        agent, _ = sample
        envelope = agent.run("leads", conversation={"turns": []}, return_json=True)  # type: ignore[arg-type]
        assert envelope["metadata"]["error"]["type"] == "InvalidQueryError"


class TestFollowUpReading:
    """The reader alone: which kind each phrasing is, from the words and the last turn."""

    LAST = Turn(number=1, question="leads at Acme", table="leads", ids=(4, 9), total_count=2)

    @pytest.mark.parametrize(
        ("text", "named", "kind"),
        [
            ("next page", None, "page"),
            ("more", None, "page"),
            ("the first one", None, "item"),
            ("lead #2 of that list", "leads", "item"),
            ("what about their conversations?", "conversations", "related"),
            ("and their client?", None, "related"),
            ("only the qualified ones", None, "refine"),
            ("not Acme", None, "refine"),
            ("how many of them?", None, "refine"),
            ("now campaigns of client 9", "campaigns", "fresh"),
            ("campaigns of client 9", "campaigns", "fresh"),
            ("leads at Globex", "leads", "fresh"),
        ],
    )
    def test_kinds(self, text: str, named: str | None, kind: str) -> None:
        assert read_follow_up(text, self.LAST, named, TABLES).kind == kind

    @given(st.text(max_size=200))
    def test_any_text_reads_as_some_kind_without_raising(self, text: str) -> None:
        follow = read_follow_up(text, self.LAST, None, TABLES)
        assert follow.kind in ("fresh", "refine", "related", "item", "page")


class TestTrace:
    def test_a_traced_run_lists_its_steps_without_values(
        self, sample: tuple[RAGAgent, MemoryStore]
    ) -> None:
        agent, store = sample
        email = next(r["email"] for r in rows(store, "leads") if r["email"])
        envelope = agent.run(f"who is {email}?", trace=True, return_json=True)
        trace = envelope["metadata"]["trace"]
        steps = [s["step"] for s in trace["steps"]]
        assert "rules" in steps and "read" in steps
        read = next(s for s in trace["steps"] if s["step"] == "read")
        assert read["table"] == "leads" and read["rows"] == envelope["metadata"]["total_count"]
        assert read["conditions"] == ["email ieq"]
        assert email not in json.dumps(trace)
        assert sum(s["ms"] for s in trace["steps"]) <= trace["total_ms"]
        assert "trace" not in agent.run(f"who is {email}?", return_json=True)["metadata"]

    def test_an_awaited_run_is_traced_alike(self, sample: tuple[RAGAgent, MemoryStore]) -> None:
        agent, _ = sample
        blocking = agent.run("qualified leads", trace=True, return_json=True)["metadata"]
        awaited = asyncio.run(agent.arun("qualified leads", trace=True, return_json=True))
        steps = [(s["step"], s.get("table"), s.get("rows")) for s in blocking["trace"]["steps"]]
        assert [
            (s["step"], s.get("table"), s.get("rows"))
            for s in awaited["metadata"]["trace"]["steps"]
        ] == steps
        assert ("read", "leads", 50) in steps


class TestFallbackAnswer:
    @pytest.fixture
    def agent_with(self) -> Any:
        store = MemoryStore()
        store.insert(
            "leads",
            [
                {"id": 1, "company_name": "Acme Inc.", "email": "ana@acme.example"},
                {"id": 2, "company_name": "Acme GmbH", "email": "bo@acme.example"},
            ],
        )
        store.insert("secrets", [{"id": 1, "value": "s3cret"}])
        facade = create_read_only_facade(kind="memory", store=store, settings=settings_())

        def build(script: list[Any]) -> tuple[RAGAgent, ScriptedChatModel]:
            model = ScriptedChatModel(script=script)
            agent = RAGAgent(
                facade,
                settings=RAGSettings.from_env({}, cache_disabled=True),
                llm=model,
                extractor=lambda _request: Understanding(),
            )
            return agent, model

        return build

    def script(self, *cited: tuple[str, Any]) -> list[Any]:
        return [
            calls(
                call("query_table", table="secrets"),  # refused: outside the allow-list
                call("query_table", table="leads", filters="not a list"),  # invalid arguments
                call(
                    "query_table",
                    table="leads",
                    filters=[{"column": "company_name", "op": "icontains", "value": "acme"}],
                ),
            ),
            final(*(cited or (("leads", 2),)), answer="Bo at Acme GmbH is the one."),
        ]

    def test_the_answer_cites_its_records(self, agent_with: Any) -> None:
        agent, _ = agent_with(self.script())
        envelope = agent.run("who wants a callback", return_json=True)
        meta = envelope["metadata"]
        assert meta["fallback"] == "agent"
        assert meta["answer"] == {
            "text": "Bo at Acme GmbH is the one.",
            "citations": [{"table": "leads", "id": 2}],
            "dropped_citations": 0,
        }
        assert [r["id"] for r in envelope["records"]] == [2]

    def test_an_answer_citing_unread_rows_is_withheld(self, agent_with: Any) -> None:
        agent, _ = agent_with(self.script(("leads", 2), ("secrets", 1)))
        envelope = agent.run("who wants a callback", return_json=True)
        answer = envelope["metadata"]["answer"]
        assert answer["text"] == "" and "1 row(s) no tool read" in answer["withheld"]
        assert answer["citations"] == [{"table": "leads", "id": 2}]
        assert answer["dropped_citations"] == envelope["metadata"]["fallback_dropped_ids"] == 1

    def test_the_trace_lists_every_tool_call_and_adds_up(
        self, agent_with: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Every step is listed, and the steps add up to the run: on a clock that moves only
        while the model answers (a second per call), the run takes those seconds and they
        fall inside one top-level step each, never counted twice."""
        clock = [0.0]
        monkeypatch.setattr(pipeline_module, "Trace", functools.partial(Trace, lambda: clock[0]))
        answer = ScriptedChatModel._generate

        def slow_answer(model: ScriptedChatModel, *args: Any, **kwargs: Any) -> Any:
            clock[0] += 1.0
            return answer(model, *args, **kwargs)

        monkeypatch.setattr(ScriptedChatModel, "_generate", slow_answer)
        agent, _ = agent_with(self.script())
        envelope = agent.run("who wants a callback", trace=True, return_json=True)
        trace = envelope["metadata"]["trace"]
        fallback = next(s for s in trace["steps"] if s["step"] == "fallback")
        inner = fallback["steps"]
        tools = [(s["step"], s.get("status", "ok")) for s in inner if s["step"] != "model"]
        assert sorted(tools) == sorted(
            [("query_table", "refused"), ("query_table", "refused"), ("query_table", "ok")]
        )
        assert [s["step"] for s in inner].count("model") == 2
        assert "s3cret" not in json.dumps(trace)
        assert trace["total_ms"] == 2000.0
        assert sum(s["ms"] for s in trace["steps"]) == 2000.0
        assert fallback["ms"] == 2000.0

    def test_the_history_reaches_the_fallback_model(self, agent_with: Any) -> None:
        agent, model = agent_with([final(answer="nothing"), final(answer="still nothing")])
        conversation = agent.conversation()
        agent.run("who wants a callback", conversation=conversation)
        agent.run("and who wants an invoice?", conversation=conversation)
        first_message = next(m for m in model.requests[-1] if isinstance(m, HumanMessage))
        assert "Q1: who wants a callback" in str(first_message.content)


class TestTool:
    def test_the_rag_agent_tool_keeps_a_conversation_per_caller_id(
        self, sample: tuple[RAGAgent, MemoryStore]
    ) -> None:
        from rag_agent.tools import build_tools
        from rag_agent.untrusted import unwrap_boundary

        agent, store = sample
        tool = next(t for t in build_tools(agent, content="full") if t.name == "rag_agent")

        def run(query: str, conversation_id: str | None = None) -> dict[str, Any]:
            args = {
                "query": query,
                **({"conversation_id": conversation_id} if conversation_id else {}),
            }
            envelope: dict[str, Any] = json.loads(unwrap_boundary(tool.invoke(args)))
            return envelope["metadata"]

        run("leads at Globex", "a")
        run("leads at Acme", "b")
        assert run("only the qualified ones", "a")["total_count"] == sum(
            1
            for r in rows(store, "leads")
            if "globex" in (r["company_name"] or "").lower() and r["status"] == "qualified"
        )
        alone = run("only the qualified ones")  # no id: a question of its own
        assert [f["column"] for f in alone["filters"]] == ["status"]
        assert run("x", "bad id with spaces")["error"]["type"] == "ToolInputError"


def test_a_company_named_holdings_is_no_paused_campaign(
    second: tuple[RAGAgent, MemoryStore],
) -> None:
    """A synonym is met by its inflections only: "Holdings" in a name is not "on hold"."""
    agent, _ = second
    envelope = agent.run("campaigns of Granite Holdings", return_json=True)
    assert all(f["column"] != "state" for f in envelope["metadata"].get("filters") or [])
    held = agent.run("campaigns on hold", return_json=True)
    assert [(f["column"], f["value"]) for f in held["metadata"]["filters"]] == [("state", "paused")]
