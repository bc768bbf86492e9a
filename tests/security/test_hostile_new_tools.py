"""The hostile corpus through the counting, aggregating and discovery tools and ``include``.

Every line of the shared SQL-injection corpus (and our own metacharacter, Unicode and oversized
cases) goes through ``count_rows``, ``aggregate_table``, ``list_tables``, ``describe_table`` and
``query_table`` with ``include``, on memory and PostgreSQL (least-privilege role), in every
argument position a caller controls. Each call must answer (no exception escapes a tool) with a
result or a typed error, a count must be the literal count, records must be stored rows with
verifying hashes, and the stored data (and, on PostgreSQL, the schema and the roles) must be
unchanged: nothing the input says is executed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from persistence.values.like import fold_case
from rag_agent.envelope import OUTSIDE_ROW, row_hash
from tests.conftest import corpus_lines
from tests.faults.worlds import (
    TYPED_INPUT_ERRORS,
    World,
    envelope_problems,
    invoke_tool,
    open_world,
    seed_leads,
)
from tests.security.test_hostile_inputs import METACHARACTERS, UNICODE

OVERSIZED = ["a" * 5_000, "%" * 5_000, "'" * 100_000]
STORED_SAMPLE_STEP = 37
#: What a discovery tool may answer with, besides its result.
DISCOVERY_ERRORS = TYPED_INPUT_ERRORS


@pytest.fixture(scope="module")
def values() -> list[str]:
    """Every corpus line and our own hostile cases."""
    return [*corpus_lines(), *METACHARACTERS, *UNICODE, *OVERSIZED]


@pytest.fixture(scope="module", params=("memory", "postgres"))
def world(request: pytest.FixtureRequest) -> Iterator[World]:
    """One backend seeded with the base leads and a sample of payloads stored as data."""
    rows = seed_leads([*corpus_lines()[::STORED_SAMPLE_STEP], *METACHARACTERS, *UNICODE])
    with open_world(request.param, rows, request) as world:
        yield world


@pytest.fixture
def unchanged(world: World) -> Iterator[None]:
    before = world.checksum()
    yield
    assert world.checksum() == before


def _cases(value: str) -> dict[str, list[object]]:
    """Per tool, its arguments carrying ``value`` in every position a caller controls."""
    contains = [{"column": "company_name", "op": "icontains", "value": value}]
    return {
        "count_rows": [
            {"table": "leads", "filters": contains},
            {"table": value},
            {"table": "leads", "filters": {"email": value}},
            {"table": "leads", "filters": [{"column": value, "op": "eq", "value": 1}]},
            {"table": "leads", "ranges": [{"column": "created_at", "gte": value}]},
            {"table": "leads", "filters": [{"column": "id", "op": "in", "value": [value, 1]}]},
            value,
        ],
        "aggregate_table": [
            {"table": "leads", "group_by": ["status"], "filters": contains},
            {"table": "leads", "group_by": [value]},
            {"table": "leads", "metrics": [value]},
            {"table": "leads", "metrics": [f"sum:{value}"]},
            {"table": value, "group_by": ["status"]},
            {"table": "leads", "group_by": ["status"], "limit": value},
            value,
        ],
        "list_tables": [{}, {"table": value}, value],
        "describe_table": [
            {"table": value},
            {"table": "leads", "sample_rows": value},
            {"table": value, "sample_rows": 1},
            value,
        ],
        "query_table": [
            {"table": "leads", "include": [value]},
            {"table": "leads", "include": [f"conversations.{value}"], "filters": {"id": 1}},
            {"table": "leads", "filters": contains, "include": ["conversations"]},
            {"table": "leads", "filters": {"id": 1}, "include": ["conversations"],
             "include_limit": value},
            {"table": "leads", "include": value},
        ],
    }  # fmt: skip


def _literal_count(world: World, value: str) -> int:
    wanted = fold_case(value)
    return sum(
        isinstance(row.get("company_name"), str) and wanted in fold_case(row["company_name"])
        for row in world.rows.values()
    )


def _envelope_checks(name: str, args: object, answer: Any, world: World, value: str) -> list[str]:
    """What is wrong with an envelope a data tool answered."""
    if not isinstance(answer, dict) or "metadata" not in answer:
        return [f"{name} {str(args)[:80]}: not an envelope: {str(answer)[:120]}"]
    allowed = TYPED_INPUT_ERRORS | ({"QueryTimeoutError"} if len(value) > 4_096 else set())
    own = {**answer, "records": [_own_fields(r) for r in answer["records"]]}
    problems = envelope_problems(own, world, allowed_errors=frozenset(allowed))
    for record in answer["records"]:
        for children in (record.get("related") or {}).values():
            for child in children:
                if row_hash(_own_fields(child)) != child["provenance"]["row_hash"]:
                    problems.append(f"child hash mismatch {child}")
    error = answer["metadata"].get("error")
    is_contains = isinstance(args, dict) and args.get("filters") == [
        {"column": "company_name", "op": "icontains", "value": value}
    ]
    if is_contains and error is None and name in {"count_rows", "aggregate_table"}:
        expected = _literal_count(world, value)
        if answer["metadata"]["total_count"] != expected:
            problems.append(f"counted {answer['metadata']['total_count']}, literal {expected}")
    return [f"{name} {str(args)[:80]}: {p}" for p in problems]


def _own_fields(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in OUTSIDE_ROW - {"provenance"}}


def _discovery_checks(name: str, args: object, answer: Any) -> list[str]:
    """What is wrong with a discovery tool's answer: neither a result nor a typed error."""
    if not isinstance(answer, dict):
        return [f"{name} {str(args)[:80]}: not JSON: {str(answer)[:120]}"]
    error = answer.get("error")
    if error is not None:
        if error.get("type") not in DISCOVERY_ERRORS:
            return [f"{name} {str(args)[:80]}: untyped error {error}"]
        return []
    if "tables" not in answer and "columns" not in answer:
        return [f"{name} {str(args)[:80]}: unexpected answer {str(answer)[:120]}"]
    return []


@pytest.mark.usefixtures("unchanged")
class TestNewToolsUnderHostileInput:
    def test_every_tool_answers_every_input(self, world: World, values: list[str]) -> None:
        """Each input through each tool, its argument position turning with the input's index:
        an answer or a typed error every time, literal counts, stored rows only."""
        tools = world.tools
        problems: list[str] = []
        calls = 0
        for index, value in enumerate(values):
            for name, cases in _cases(value).items():
                args = cases[index % len(cases)]
                calls += 1
                try:
                    answer = invoke_tool(tools[name], args)
                except Exception as exc:  # the contract under test: this must never happen
                    problems.append(f"{name} {str(args)[:80]} raised {type(exc).__name__}: {exc}")
                    continue
                if name in {"list_tables", "describe_table"}:
                    problems += _discovery_checks(name, args, answer)
                else:
                    problems += _envelope_checks(name, args, answer, world, value)
        assert problems == []
        assert calls == len(values) * 5

    def test_payload_counts_are_literal(self, world: World, values: list[str]) -> None:
        """``count_rows`` with every stored payload as an ``icontains`` value counts exactly the
        rows that hold it literally (never a wildcard's or a folded look-alike's worth more)."""
        tool = world.tools["count_rows"]
        problems = []
        for value in [*METACHARACTERS, *UNICODE, *values[::STORED_SAMPLE_STEP]]:
            args = {
                "table": "leads",
                "filters": [{"column": "company_name", "op": "icontains", "value": value}],
            }
            answer = invoke_tool(tool, args)
            problems += _envelope_checks("count_rows", args, answer, world, value)
        assert problems == []
