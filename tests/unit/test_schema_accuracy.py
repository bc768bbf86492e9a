"""The agent answers the labelled questions over the sample and the second schema (every
question class, truths computed from the rows): at least 0.95 right on the held-out half of each
schema, on memory here and on PostgreSQL in ``tests/integration/test_schema_accuracy_postgres.py``.
"""

from __future__ import annotations

import pytest

from tests.data.schema_accuracy import Report, evaluate
from tests.data.schema_questions import SCHEMAS

# The whole labelled set in one fixture: a minute or more on a busy 2-core machine.
pytestmark = pytest.mark.timeout(600)

#: The aim of the understand-any-schema work, per schema, on the half the rules were not tuned on.
HELD_OUT_AIM = 0.95


def held_out_rates(report: Report) -> dict[str, float]:
    rates = {}
    for schema in SCHEMAS:
        results = [r for r in report.results if r.question.schema == schema]
        held = [r for r in results if r.question.half == "held_out"]
        rates[schema] = sum(r.right for r in held) / len(held)
    return rates


@pytest.fixture(scope="module")
def memory_report() -> Report:
    return evaluate("memory")


def test_held_out_questions_are_answered_right_on_memory(memory_report: Report) -> None:
    rates = held_out_rates(memory_report)
    wrong = [
        (r.question.id, r.question.text, r.reason)
        for r in memory_report.results
        if r.question.half == "held_out" and not r.right
    ]
    assert all(rate >= HELD_OUT_AIM for rate in rates.values()), (rates, wrong)


def test_every_class_is_mostly_right_on_both_schemas(memory_report: Report) -> None:
    """No question class is left behind on either schema: at least 0.75 of each class's
    questions (both halves, 12 to 19 a class) are right (the weakest today: 11 of 14)."""
    tally: dict[tuple[str, str], list[int]] = {}
    for result in memory_report.results:
        key = (result.question.schema, result.question.cls)
        tally.setdefault(key, [0, 0])
        tally[key][0] += result.right
        tally[key][1] += 1
    weak = {key: tuple(counts) for key, counts in tally.items() if counts[0] < 0.75 * counts[1]}
    assert weak == {}
