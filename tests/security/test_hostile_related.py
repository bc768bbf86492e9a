"""Hostile input as relation names and included rows' filter values, on memory, PostgreSQL and
the Supabase adapter: a typed refusal before any I/O, or a literal match; the data unchanged."""

from __future__ import annotations

import functools
from collections.abc import Iterator

import pytest

from persistence import Filter, InvalidQueryError, Op, QueryTimeoutError
from persistence.relations import Include
from tests.conftest import corpus_lines
from tests.faults.worlds import BACKENDS, World, open_world, seed_leads
from tests.security.test_hostile_inputs import (
    IDENTIFIER_TRICKS,
    METACHARACTERS,
    OWN_CASES,
    typed_refusal,
    unstorable,
)


@pytest.fixture(scope="module")
def values() -> list[str]:
    """Every corpus line and every own case."""
    return [*corpus_lines(), *OWN_CASES]


@pytest.fixture(scope="module", params=BACKENDS)
def world(request: pytest.FixtureRequest) -> Iterator[World]:
    """One backend seeded with the base leads (no conversations: children are never made up)."""
    with open_world(request.param, seed_leads(METACHARACTERS), request) as world:
        yield world


class TestHostileRelations:
    def test_every_line_as_a_relation_name_is_refused(
        self, world: World, values: list[str]
    ) -> None:
        """Each input as an include name, or inside a dotted path, is an InvalidQueryError,
        and the data is unchanged."""
        before = world.checksum()
        read = world.facade.read
        problems = []
        for name in [*values, *IDENTIFIER_TRICKS]:
            for include in ([name], [f"conversations.{name}"], [f"{name}.messages"]):
                outcome = typed_refusal(
                    functools.partial(read, "leads", include=include), InvalidQueryError
                )
                if outcome:
                    problems.append(f"{include!r:.80}: {outcome}")
        assert problems == []
        assert world.checksum() == before

    def test_every_line_as_a_child_filter_value_matches_literally(
        self, world: World, values: list[str]
    ) -> None:
        """Each input as a child filter value selects no made-up child, or is refused typed."""
        before = world.checksum()
        problems = []
        for index, value in enumerate(values):
            op = (Op.ICONTAINS, Op.EQ, Op.IEQ)[index % 3]
            try:
                wanted = Include("conversations", (Filter("channel", op, value),))
                page = world.facade.read("leads", columns=["id"], include=[wanted], limit=3)
            except InvalidQueryError:
                if not unstorable(value, world):
                    problems.append(f"{op.value} {value[:60]!r} refused")
                continue
            except QueryTimeoutError:
                continue
            except Exception as exc:
                if not (world.kind == "supabase" and "*" in value):
                    problems.append(f"{op.value} {value[:60]!r}: {type(exc).__name__}: {exc}")
                continue
            if any(row["conversations"] for row in page.rows):
                problems.append(f"{op.value} {value[:60]!r} found children")
        assert problems == []
        assert world.checksum() == before
