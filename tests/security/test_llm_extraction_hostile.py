"""A hostile model: SQL-injection corpus lines as its answers to schema-constrained extraction.

Whatever the model writes, only validated values pass: a payload as a column, an operator or a
table is always refused; as a value it passes only when the user wrote it, only on a column whose
kind it has, and then as a literal that the facade matches literally.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage

from persistence import Op
from rag_agent.understanding.llm.extract import SchemaFilterExtractor
from rag_agent.understanding.llm.grounding import understand_answer
from rag_agent.understanding.llm.schema import SCHEMA_NAME
from tests.conftest import corpus_lines
from tests.faults.worlds import World, open_world, seed_leads
from tests.support.extraction import answer, cond, extraction_request
from tests.unit.test_llm_scripted import ScriptedChatModel, call, calls

STORED_SAMPLE_STEP = 37  # every 37th payload is also stored as a company, so literal hits exist
THROUGH_MODEL_STEP = 9  # every 9th payload also goes through a model end to end
TYPED_COLUMNS = (("score", "gt"), ("client_id", "eq"), ("created_at", "gte"), ("id", "in"))


@pytest.fixture(scope="module")
def payloads() -> list[str]:
    """Every corpus line."""
    return corpus_lines()


@pytest.fixture(scope="module")
def world(request: pytest.FixtureRequest, payloads: list[str]) -> Iterator[World]:
    """The memory backend seeded with the base leads and a sample of payloads as data."""
    with open_world("memory", seed_leads(payloads[::STORED_SAMPLE_STEP]), request) as opened:
        yield opened


def hostile_answer(payload: str) -> dict[str, Any]:
    """An answer putting ``payload`` everywhere a model can put something."""
    return answer(
        cond("company_name", "icontains", payload),
        cond("email", "ieq", payload),
        *(cond(column, op, [payload] if op == "in" else payload) for column, op in TYPED_COLUMNS),
        cond(payload, "eq", "acme"),
        cond("company_name", payload, "acme"),
        table=payload,
        ignored=({"text": payload, "reason": payload},),
    )


class TestHostileModelAnswers:
    def test_payloads_the_user_did_not_write_never_pass(self, payloads: list[str]) -> None:
        """A payload the request does not contain is refused in every position."""
        failures = []
        for payload in payloads:
            result = understand_answer(hostile_answer(payload), extraction_request("leads at acme"))
            if result.conditions or result.table is not None:
                failures.append(payload)
        assert failures == []

    def test_payloads_never_become_columns_operators_or_tables(self, payloads: list[str]) -> None:
        """Even when the user wrote it, a payload is never a column, an operator or a table."""
        failures = []
        for payload in payloads:
            raw = answer(cond(payload, "eq", "acme"), cond("company_name", payload, "acme"))
            raw["table"] = payload
            result = understand_answer(raw, extraction_request(f"acme {payload}"))
            if result.conditions or result.table is not None:
                failures.append(payload)
        assert failures == []

    def test_payloads_never_shape_the_answer(self, payloads: list[str]) -> None:
        """Even when the user wrote it (with every cue word), a payload is never a group-by
        column, a metric function or column, or a relation."""
        failures = []
        for payload in payloads:
            raw = {
                **answer(),
                "group_by": [payload],
                "metrics": [
                    {"function": payload, "column": "score"},
                    {"function": "sum", "column": payload},
                ],
                "include": [payload],
            }
            text = f"total average distinct by per each conversations {payload}"
            base = extraction_request(text)
            request = dataclasses.replace(base, relations=("conversations",))
            result = understand_answer(raw, request)
            if result.group_by or result.metrics or result.include:
                failures.append(payload)
        assert failures == []

    def test_written_payloads_pass_only_as_literals_of_their_kind(
        self, payloads: list[str], world: World
    ) -> None:
        """A payload the user wrote passes only as a literal text value, matched literally."""
        for payload in payloads:
            text = f"leads at {payload}"
            result = understand_answer(hostile_answer(payload), extraction_request(text))
            assert result.table is None
            for condition in result.conditions:
                if condition.column in {"company_name", "email"}:
                    assert condition.value == payload
                    assert condition.op in {Op.ICONTAINS, Op.IEQ}
                else:  # a typed column takes only a payload that is a plain number or date
                    assert condition.column in {"score", "id", "created_at"}, payload
                    assert not isinstance(condition.value, str)
            for condition in result.conditions:
                if condition.op is not Op.ICONTAINS or "\x00" in payload:
                    continue
                page = world.facade.read("leads", [condition.to_filter()])
                for row in page.rows:
                    assert payload.casefold() in str(row["company_name"]).casefold()

    def test_a_hostile_model_end_to_end(self, payloads: list[str]) -> None:
        """Through the extractor, a model answering with payloads yields nothing unwritten."""
        sample = payloads[::THROUGH_MODEL_STEP]

        def hostile(messages: list[BaseMessage]) -> AIMessage:
            payload = sample[len(seen)]
            seen.append(payload)
            return calls(call(SCHEMA_NAME, **hostile_answer(payload)))

        seen: list[str] = []
        model = ScriptedChatModel(script=[hostile] * len(sample))
        extract = SchemaFilterExtractor(model, budget=lambda: True)
        for index, _ in enumerate(sample):
            result = extract(extraction_request(f"leads at acme, question {index}"))
            assert result.conditions == () and result.table is None
        assert seen == sample
