"""The plan memo: a question asked again is not read and checked again, and never answered
differently for it."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from persistence import AccessPolicy, MemoryBackend, MemoryStore, ReadOnlyPersistenceFacade
from rag_agent import RAGAgent, RAGSettings
from rag_agent.ops.sample import load_sample
from rag_agent.pipeline import pipeline as pipeline_module
from rag_agent.pipeline.plan_memo import Plan, PlanMemo, plan_key
from rag_agent.pipeline.question_shape import is_inert, question_shape
from rag_agent.specs import Understanding
from rag_agent.understanding.request import Request

NOW = dt.datetime(2026, 3, 4, 5, 6, 7, tzinfo=dt.UTC)

_STORE = MemoryStore()
load_sample(_STORE)

# Pieces of questions the rules read (and some they do not), joined at random.
_PARTS = [
    "leads",
    "lead 7",
    "lead 12",
    "how many",
    "campaigns",
    "inquiries",
    "conversations",
    "of client 3",
    "at acme",
    "at Globex Inc.",
    "with email ana@example.com",
    "score above 50",
    "created last week",
    "in 2025",
    "status new",
    "with its conversations",
    "about pricing",
    "by status",
    "show",
    "find",
    "😀",
    "",
]


def _agent(memo: PlanMemo, **kwargs: Any) -> RAGAgent:
    facade = ReadOnlyPersistenceFacade(MemoryBackend(_STORE), AccessPolicy.read_only())
    agent = RAGAgent(
        facade,
        settings=RAGSettings(cache_disabled=True),
        now=lambda: NOW,
        clock=lambda: 0.0,
        **kwargs,
    )
    object.__setattr__(agent._pipeline, "plans", memo)
    return agent


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The tables whose conditions a run checked through the facade (``apply_conditions``)."""
    calls: list[str] = []
    original = pipeline_module.apply_conditions

    def counting(facade: Any, table: str, conditions: Any) -> Any:
        calls.append(table)
        return original(facade, table, conditions)

    monkeypatch.setattr(pipeline_module, "apply_conditions", counting)
    yield calls


_MEMOISED = _agent(PlanMemo(8))
_PLAIN = _agent(PlanMemo(0))


class TestSameAnswers:
    """A memoised plan answers exactly what planning anew answers."""

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        parts=st.lists(st.sampled_from(_PARTS), max_size=5),
        noise=st.text(max_size=12),
        tables=st.permutations([None, "leads", "campaigns", "inquiries", "nope"]),
        count_only=st.lists(st.sampled_from([None, True, False]), min_size=2, max_size=2),
        limit=st.sampled_from([None, 1, 5]),
    )
    def test_random_texts(
        self,
        parts: list[str],
        noise: str,
        tables: list[str | None],
        count_only: list[bool | None],
        limit: int | None,
    ) -> None:
        """Over random texts, asked of every table in turn and with two ``count_only``: the
        envelope of a run planned anew, of a run that memoised its plan, and of the run that
        reused it, are the same JSON."""
        text = " ".join([*parts, noise])
        for table in tables:
            for only in count_only:
                options: dict[str, Any] = {"table": table, "count_only": only, "limit": limit}
                expected = _PLAIN.run(text, return_json=True, **options)
                assert _MEMOISED.run(text, return_json=True, **options) == expected
                assert _MEMOISED.run(text, return_json=True, **options) == expected
        assert len(_MEMOISED._pipeline.plans) <= 8

    def test_a_repeat_is_not_checked_again(self, counted: list[str]) -> None:
        """The second run of a question reuses the plan: its conditions are not checked again."""
        agent = _agent(PlanMemo())
        first = agent.run("lead 7", return_json=True)
        assert agent.run("lead 7", return_json=True) == first
        assert counted == ["leads"]
        assert first["metadata"]["total_count"] == 1

    def test_the_table_is_part_of_the_key(self, counted: list[str]) -> None:
        """The same text about another table is planned for that table."""
        agent = _agent(PlanMemo())
        plain = _agent(PlanMemo(0))
        for table in ("leads", "inquiries", "leads"):
            options: dict[str, Any] = {"table": table}
            expected = plain.run("of client 3", return_json=True, **options)
            assert agent.run("of client 3", return_json=True, **options) == expected
        # The plain agent checks every time; the memoising one once per table.
        assert counted == ["leads", "leads", "inquiries", "inquiries", "leads"]

    def test_the_day_is_part_of_the_key(self, counted: list[str]) -> None:
        """A date read relative to today is read again the next day."""
        today = [NOW]
        agent = _agent(PlanMemo())
        object.__setattr__(agent._pipeline, "now", lambda: today[0])
        first = agent.run("leads created yesterday", return_json=True)
        today[0] = NOW + dt.timedelta(days=1)
        second = agent.run("leads created yesterday", return_json=True)
        assert len(counted) == 2
        assert first["metadata"]["filters"] != second["metadata"]["filters"]


class TestWhatIsNotMemoised:
    """Plans that depend on more than the rules and the catalog are never kept."""

    def test_explicit_filters(self) -> None:
        """A run with the caller's conditions plans them every time."""
        agent = _agent(PlanMemo())
        agent.run("leads at acme", filters={"id": 7})
        assert len(agent._pipeline.plans) == 0

    def test_a_question_sent_to_the_extractor(self) -> None:
        """A text the rules leave to the model asks the model again (it caches itself)."""
        asked: list[str] = []

        def extractor(request: Any) -> Understanding:
            asked.append(request.text)
            return Understanding()

        agent = _agent(PlanMemo(), extractor=extractor)
        agent.run("the ones that look promising")
        agent.run("the ones that look promising")
        assert asked == ["the ones that look promising"] * 2
        assert len(agent._pipeline.plans) == 0
        agent.run("lead 7")  # read by the rules alone: memoised, extractor or not
        assert len(agent._pipeline.plans) == 1


class TestInvalidation:
    """A plan is reused only while its table's columns are those it was checked against."""

    def test_a_changed_catalog_checks_again(
        self, counted: list[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """When the facade reports other column types for the table, the plan is dropped and
        the conditions checked anew."""
        agent = _agent(PlanMemo())
        agent.run("lead 7")
        agent.run("lead 7")
        assert counted == ["leads"]
        original = ReadOnlyPersistenceFacade.column_types

        def changed(self: Any, table: str) -> Mapping[str, Any]:
            types = dict(original(self, table))
            types.pop("phone", None)
            return types

        monkeypatch.setattr(ReadOnlyPersistenceFacade, "column_types", changed)
        assert agent.run("lead 7").metadata.total_count == 1
        assert counted == ["leads", "leads"]
        agent.run("lead 7")  # memoised again, with the new types
        assert counted == ["leads", "leads"]

    def test_a_backend_that_cannot_tell_its_types(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without column types there is nothing to check a plan against: none is kept."""
        monkeypatch.setattr(ReadOnlyPersistenceFacade, "column_types", lambda self, table: {})
        agent = _agent(PlanMemo())
        agent.run("lead 7")
        assert len(agent._pipeline.plans) == 0


class _Facade:
    """Just the column types the memo asks for."""

    def __init__(self) -> None:
        self.types: dict[str, Any] = {"id": "bigint"}

    def column_types(self, table: str) -> Mapping[str, Any]:
        return dict(self.types)


def _plan(table: str = "leads") -> Plan:
    return Plan(Request(table=table, conditions=()), table, (), ())


class TestPlanMemo:
    """The memo itself: bounded, least recently used first, checked against the types."""

    def test_bounded_lru(self) -> None:
        """At most ``maxsize`` plans; the least recently used goes first."""
        facade, memo = _Facade(), PlanMemo(2)
        for key in ("a", "b"):
            memo.put(key, _plan(), facade.column_types("leads"))
        assert memo.get("a", facade) is not None  # "b" is now the least recently used
        memo.put("c", _plan(), facade.column_types("leads"))
        assert len(memo) == 2
        assert memo.get("b", facade) is None
        assert memo.get("a", facade) is not None and memo.get("c", facade) is not None

    def test_changed_types_drop_the_plan(self) -> None:
        """A plan whose table's types changed is not returned, and is forgotten."""
        facade, memo = _Facade(), PlanMemo()
        memo.put("k", _plan(), facade.column_types("leads"))
        facade.types["id"] = "uuid"
        assert memo.get("k", facade) is None
        assert len(memo) == 0

    def test_size_zero_keeps_nothing(self) -> None:
        """``maxsize=0`` memoises nothing; a negative size is refused."""
        memo = PlanMemo(0)
        memo.put("k", _plan(), {"id": "bigint"})
        assert len(memo) == 0
        with pytest.raises(ValueError):
            PlanMemo(-1)

    def test_clear(self) -> None:
        """``clear`` forgets every plan."""
        memo = PlanMemo()
        memo.put("k", _plan(), {"id": "bigint"})
        memo.clear()
        assert len(memo) == 0

    def test_key_reads_the_day_in_utc(self) -> None:
        """Two instants of the same UTC day share a key; the table and count_only tell apart."""
        late = dt.datetime(2026, 3, 4, 23, 0, tzinfo=dt.timezone(dt.timedelta(hours=-2)))
        assert plan_key("x", None, None, NOW) != plan_key("x", None, None, late)
        assert plan_key("x", None, None, NOW) == plan_key("x", None, None, NOW.replace(hour=23))
        assert plan_key("x", "leads", None, NOW) != plan_key("x", None, None, NOW)
        assert plan_key("x", None, True, NOW) != plan_key("x", None, None, NOW)


class TestQuestionShapes:
    """A question of a shape planned before reuses that plan with its own literals."""

    def test_another_address_is_not_read_again(self, counted: list[str]) -> None:
        """The second e-mail question of one shape is planned from the first's shape: its
        conditions are not checked again, and it answers what planning anew answers."""
        agent = _agent(PlanMemo())
        first = agent.run("find the lead with email lucia.jensen@zorg-ag.example", return_json=True)
        assert first["metadata"]["total_count"] == 1
        assert counted == ["leads", "leads"]  # the question, then the shape's probe
        text = "find the lead with email ada.lopez@halcyon-plc.example"
        second = agent.run(text, return_json=True)
        assert counted == ["leads", "leads"]
        assert second == _PLAIN.run(text, return_json=True)
        assert [r["email"] for r in second["records"]] == ["ada.lopez@halcyon-plc.example"]

    def test_a_literal_the_rules_read_is_read_in_full(self, counted: list[str]) -> None:
        """An address holding a word the rules read ("count") is not planned from the shape."""
        agent = _agent(PlanMemo())
        agent.run("find the lead with email lucia.jensen@zorg-ag.example")
        text = "find the lead with email count@zorg-ag.example"
        expected = _PLAIN.run(text, return_json=True)
        counted.clear()
        assert agent.run(text, return_json=True) == expected
        assert counted == ["leads"]  # checked anew, and no probe: the literal is not inert

    def test_a_failing_probe_keeps_no_shape_and_fails_no_run(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """When checking the shape's probe fails, the question is still answered (by its own
        plan) and no shape is kept."""
        original = pipeline_module.apply_conditions
        calls: list[str] = []

        def second_fails(facade: Any, table: str, conditions: Any) -> Any:
            calls.append(table)
            if len(calls) == 2:  # the probe's check
                raise RuntimeError("the backend went away")
            return original(facade, table, conditions)

        monkeypatch.setattr(pipeline_module, "apply_conditions", second_fails)
        agent = _agent(PlanMemo())
        text = "find the lead with email lucia.jensen@zorg-ag.example"
        answer = agent.run(text, return_json=True)
        assert answer == _PLAIN.run(text, return_json=True)
        assert len(calls) == 3 and len(agent._pipeline.plans) == 1  # the exact text's alone

    def test_a_shape_whose_literal_is_refused_is_not_kept(self, counted: list[str]) -> None:
        """A uuid asked of a bigint id is refused with its value in the reason: the plan
        depends on the literal beyond a condition value, so the shape is not kept."""
        agent = _agent(PlanMemo())
        agent.run("show lead 3f2a9c1e-1111-4abc-8def-0123456789ab")
        assert counted == ["leads", "leads"]  # the question's check, then the probe's
        assert len(agent._pipeline.plans) == 1  # the exact text's plan alone
        agent.run("show lead 00000000-2222-4abc-8def-0123456789ab")
        assert len(counted) == 4  # no shape to reuse: checked (and probed) again


class TestQuestionShape:
    """Finding a question's slots."""

    def test_slots(self) -> None:
        shape = question_shape("show lead 3f2a9c1e-1111-4abc-8def-0123456789ab, or a@b.io?")
        assert shape is not None
        assert shape.kinds == ("uuid", "email")
        assert shape.literals == ("3f2a9c1e-1111-4abc-8def-0123456789ab", "a@b.io")
        assert shape.text(shape.literals) == (
            "show lead 3f2a9c1e-1111-4abc-8def-0123456789ab, or a@b.io?"
        )
        other = question_shape("show lead 00000000-2222-4abc-8def-0123456789ab, or q@z.io?")
        assert other is not None and other.key == shape.key

    @pytest.mark.parametrize(
        "text",
        [
            "leads at Acme",  # no slot
            "show lead 3F2A9C1E-1111-4ABC-8DEF-0123456789AB",  # upper case may steer a rule
            "lead 3f2a9c1e-1111-4abc-8def-0123456789ab's conversations",  # not standing alone
            "(a@b.io)",  # not standing alone
            "a@b.io b@b.io c@b.io d@b.io e@b.io",  # a list, not a look-up
            "lead 42",  # numbers are no slots
        ],
    )
    def test_no_shape(self, text: str) -> None:
        assert question_shape(text) is None

    def test_reserved_words(self) -> None:
        vocabulary = _MEMOISED._pipeline.vocabulary()
        assert is_inert(
            ["ken.hopper1@example.com", "3f2a9c1e-1111-4abc-8def-0123456789ab"], vocabulary
        )
        assert not is_inert(["count@x.io"], vocabulary)  # a rule word
        assert not is_inert(["status@x.io"], vocabulary)  # a column's word
        assert not is_inert(["a@x.by"], vocabulary)  # "by" may start a grouping after it
        assert is_inert(["count1@x.io"], vocabulary)  # digits glued to letters: no word
