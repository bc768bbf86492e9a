"""Hostile input through ``RAGAgent.run`` and the tools on PostgreSQL with pg_trgm installed,
where the agent also takes its fuzzy routes (a company by word similarity, the fuzzy fallback
over the text columns): the same contract as ``test_hostile_inputs`` (a checked envelope, never
an exception, never a row that does not literally match, the data unchanged).

Each fuzzy run costs a few trigram scans over long hostile text, so the corpus is not
enumerated here: every class of payload runs on every run (each syntax line, every breakout,
body and ending of the grid, every own case; ``class_sample``), and hypothesis draws further
lines from the whole corpus.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import PostgresDatabase, corpus_lines
from tests.data.hostile_payloads import class_sample
from tests.faults.worlds import World, envelope_problems, open_world, seed_leads
from tests.security.test_hostile_inputs import (
    METACHARACTERS,
    OWN_CASES,
    STORED_SAMPLE_STEP,
    UNICODE,
    allowed,
    tool_problems,
)

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def world(request: pytest.FixtureRequest) -> Iterator[World]:
    """The seeded PostgreSQL world of ``test_hostile_inputs``, with pg_trgm installed before the
    facade opens (the module-boundary restore removes it afterwards)."""
    database: PostgresDatabase = request.getfixturevalue("postgres_db")
    database.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    corpus = corpus_lines()
    rows = seed_leads([*corpus[::STORED_SAMPLE_STEP], *METACHARACTERS, *UNICODE])
    with open_world("postgres", rows, request) as world:
        yield world


@pytest.fixture(scope="module")
def values() -> list[str]:
    """Every class of payload at least once, and every own case."""
    return [*class_sample(corpus_lines()), *OWN_CASES]


@pytest.fixture
def unchanged(world: World) -> Iterator[None]:
    before = world.checksum()
    yield
    assert world.checksum() == before


def _run_problems(world: World, value: str) -> list[str]:
    problems = []
    for text in (value, f"leads at {value}", f"lead with email {value}"):
        try:
            envelope = world.agent.run(text, return_json=True)
        except Exception as exc:  # the contract under test: this must never happen
            problems.append(f"run({text[:60]!r}) raised {type(exc).__name__}: {exc}")
            continue
        found = envelope_problems(envelope, world, allowed_errors=allowed(value))
        problems += [f"{text[:60]!r}: {p}" for p in found]
    return problems


@pytest.mark.usefixtures("unchanged")
class TestWithTrigram:
    def test_free_text_of_every_payload_class(self, world: World, values: list[str]) -> None:
        """run() answers each class of input (raw, as a company, as an e-mail) with a checked
        envelope while the fuzzy routes are open."""
        problems = [p for value in values for p in _run_problems(world, value)]
        assert problems == []

    def test_every_tool_answers_every_payload_class(self, world: World, values: list[str]) -> None:
        """Each tool answers each class of input, every argument position in turn."""
        problems = [p for i, value in enumerate(values) for p in tool_problems(world, i, value)]
        assert problems == []

    @settings(max_examples=8, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(data=st.data())
    def test_lines_drawn_from_the_whole_corpus(self, world: World, data: st.DataObject) -> None:
        """Any corpus line or own case, not only the class sample, through run() and the
        tools (the corpus is read here, never at import time)."""
        everything = [*corpus_lines(), *OWN_CASES]
        index = data.draw(st.integers(min_value=0, max_value=len(everything) - 1), label="line")
        value = everything[index]
        assert _run_problems(world, value) + tool_problems(world, index, value) == []
