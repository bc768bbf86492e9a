"""A question planned from its shape's memoised plan is planned exactly as a fresh parse plans it.

Templates are the labelled questions (both labelled query sets and the two schemas' question set)
that hold an e-mail address or a uuid, and those asking for a row by number with the number
written as a uuid instead; generated literals go into their slots, words the rules read
("count", "status", "by", the vocabulary's values) among them, so a literal that would steer
the rules is generated too. Each example plans one question of a template (which may keep the
shape), then another of it, through an agent with the memo and through one without: the plans
must be equal, on the sample schema and on the second schema.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from persistence import AccessPolicy, MemoryBackend, MemoryStore, ReadOnlyPersistenceFacade
from persistence.steps import drive
from rag_agent import RAGAgent, RAGSettings
from rag_agent.conversation.followup import FollowUp
from rag_agent.envelope.assemble import Outcome
from rag_agent.ops.sample import load_sample
from rag_agent.pipeline.plan_memo import Plan, PlanMemo
from rag_agent.pipeline.question_shape import QuestionShape, question_shape
from rag_agent.runtime.deadline import LLMDeadline
from rag_agent.runtime.effects import perform
from rag_agent.understanding.rules import EMAIL_RE
from tests.data import second_schema
from tests.data.schema_questions import questions

NOW = dt.datetime(2025, 9, 17, 12, tzinfo=dt.UTC)
DATA = Path(__file__).resolve().parents[1] / "data"
_NUMBER = re.compile(r"(?<![\w#-])#?\d{1,6}(?![\w-])")


def _texts(schema: str) -> list[str]:
    texts = [q.text for q in questions() if q.schema == schema]
    if schema == "sample":
        for name in ("labelled_queries.jsonl", "understanding_queries.jsonl"):
            with (DATA / name).open(encoding="utf-8") as lines:
                texts += [json.loads(line)["text"] for line in lines if line.strip()]
    return texts


@functools.cache
def _templates(schema: str) -> tuple[QuestionShape, ...]:
    """The shapes of the schema's labelled questions: their own literals' slots, and a number
    after an entity word written as a uuid ("lead 42" → "lead <uuid>")."""
    found: dict[Any, QuestionShape] = {}
    probe = "0f0f0f0f-1a1a-4b4b-8c8c-2d2d2d2d2d2d"
    for text in _texts(schema):
        for candidate in (text, _NUMBER.sub(probe, text, count=1)):
            shape = question_shape(candidate)
            if shape is not None:
                found.setdefault(shape.key, shape)
    return tuple(found[key] for key in sorted(found, key=repr))


def _store(schema: str) -> MemoryStore:
    if schema == "sample":
        store = MemoryStore()
        load_sample(store)
        return store
    store = second_schema.memory_store()
    second_schema.load_memory(store)
    return store


@functools.cache
def _agents(schema: str) -> tuple[RAGAgent, RAGAgent]:
    """An agent that memoises plans and one that plans every question anew, on one store."""
    store = _store(schema)

    def agent(memo: PlanMemo) -> RAGAgent:
        facade = ReadOnlyPersistenceFacade(MemoryBackend(store), AccessPolicy.read_only())
        made = RAGAgent(facade, settings=RAGSettings(cache_disabled=True), now=lambda: NOW)
        object.__setattr__(made._pipeline, "plans", memo)
        return made

    return agent(PlanMemo()), agent(PlanMemo(0))


def plan_of(agent: RAGAgent, text: str, table: str | None = None) -> Plan:
    """The plan ``agent``'s pipeline makes of ``text`` (step 1 and 2 of a run, alone)."""
    pipeline = agent._pipeline
    steps = pipeline._plan(
        _Log(),
        Outcome("persistence.leads"),
        LLMDeadline(pipeline.settings.llm_deadline_s),
        text,
        table,
        None,
        None,
        pipeline.vocabulary(),
        FollowUp(text=text),
    )
    return drive(steps, functools.partial(perform, pipeline))


class _Log:
    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


# Words the rules read, and plain ones: a literal may hold either.
_WORDS = [
    "count", "status", "by", "per", "owner", "rep", "email", "new", "won", "lost", "paused",
    "leads", "lead", "client", "acme", "globex", "ana", "ken", "hopper", "example", "id",
    "about", "pricing", "owns", "total", "sum", "stage", "gold", "csv", "x", "q", "zed",
    "murphy", "dharma", "referral", "webinar", "refund", "chat", "high", "urgent", "in", "out",
]  # fmt: skip
_TLDS = ["com", "io", "example", "by", "owner", "status", "org", "co", "de", "count"]


@functools.cache
def _value_words() -> list[str]:
    """Every word of both schemas' learned values (statuses, names, sources, ...)."""
    words: set[str] = set()
    for schema in ("sample", "second"):
        vocabulary = _agents(schema)[0]._pipeline.vocabulary()
        assert vocabulary is not None
        for table in vocabulary.tables.values():
            for column in table.columns.values():
                for value in column.values or ():
                    words.update(re.findall(r"[a-z]+", str(value).lower()))
    return sorted(words)


def _token() -> st.SearchStrategy[str]:
    word = (
        st.sampled_from(_WORDS)
        | st.sampled_from(_value_words())
        | st.from_regex(r"[a-z]{1,6}", fullmatch=True)
    )
    return st.builds(lambda w, n: w + n, word, st.sampled_from(["", "", "1", "42", "_x"]))


_LOCAL = st.lists(_token(), min_size=1, max_size=3).flatmap(
    lambda words: st.sampled_from([".", "_", "-", "+"]).map(lambda sep: sep.join(words))
)
_EMAILS = st.builds(
    lambda local, domain, tld: f"{local}@{domain}.{tld}",
    _LOCAL,
    st.lists(_token(), min_size=1, max_size=2).map(lambda w: "-".join(w).replace("_", "-")),
    st.sampled_from(_TLDS),
).filter(lambda address: EMAIL_RE.fullmatch(address) is not None)
_UUIDS = st.uuids().map(str) | st.sampled_from(
    ["deadbeef-face-4ace-8bad-cafe0000beef", "00000000-0000-4000-8000-000000000000"]
)


def _literals(shape: QuestionShape) -> st.SearchStrategy[tuple[str, ...]]:
    return st.tuples(*(_UUIDS if kind == "uuid" else _EMAILS for kind in shape.kinds))


def _example(schema: str) -> st.SearchStrategy[tuple[QuestionShape, tuple[str, ...], Any]]:
    return st.sampled_from(_templates(schema)).flatmap(
        lambda shape: st.tuples(st.just(shape), _literals(shape), _literals(shape))
    )


@pytest.mark.parametrize("schema", ["sample", "second"])
def test_templates_exist(schema: str) -> None:
    """Both schemas' labelled sets hold questions with slots of both kinds."""
    kinds = {kind for shape in _templates(schema) for kind in shape.kinds}
    assert kinds == {"uuid", "email"}
    assert len(_templates(schema)) >= 10


def _check(schema: str, example: tuple[QuestionShape, tuple[str, ...], Any]) -> None:
    shape, first, second = example
    memoising, fresh = _agents(schema)
    for literals in (first, second):
        text = shape.text(literals)
        assert question_shape(text) is not None
        assert plan_of(memoising, text) == plan_of(fresh, text), text


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(example=_example("sample"))
def test_a_shaped_plan_is_a_fresh_parse_on_the_sample(example: Any) -> None:
    """On the sample schema, a question planned from its shape is planned as the rules read
    it."""
    _check("sample", example)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(example=_example("second"))
def test_a_shaped_plan_is_a_fresh_parse_on_the_second_schema(example: Any) -> None:
    """On the second schema, a question planned from its shape is planned as the rules read
    it."""
    _check("second", example)


@pytest.mark.parametrize("schema", ["sample", "second"])
def test_plain_literals_reuse_a_shape(schema: str) -> None:
    """With literals holding no word the rules read, shapes are kept and reused: the second
    question of a shape is planned without the rules (and still as they would plan it)."""
    memoising, fresh = _agents(schema)
    reused = 0
    for shape in _templates(schema):
        for i in (1, 2):
            literals = tuple(
                f"{i:08x}-7b7b-4c4c-8d8d-9e9e9e9e9e9e" if kind == "uuid" else f"zq{i}.vw{i}@qz.io"
                for kind in shape.kinds
            )
            text = shape.text(literals)
            before = memoising._pipeline.plans.hits
            assert plan_of(memoising, text) == plan_of(fresh, text), text
            reused += memoising._pipeline.plans.hits - before
    assert reused >= 5
