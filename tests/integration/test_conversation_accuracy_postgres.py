"""The labelled conversations over both schemas on PostgreSQL: at least 0.9 of the
conversations right and every turn kind at least 0.75, the same answers after a JSON round trip
between turns, and the same answers as on memory for every turn."""

from __future__ import annotations

import pytest

from tests.conftest import POSTGRES_ADMIN_DSN, _postgres_admin_connect, require_service
from tests.data.conversation_accuracy import Report, evaluate
from tests.unit.test_conversation_accuracy import CONVERSATION_AIM, weak_kinds, wrong_turns

# The whole set three times (PostgreSQL plain and round trip, memory): minutes on 2 busy cores.
pytestmark = [pytest.mark.postgres, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def reports() -> tuple[Report, Report, Report]:
    admin = _postgres_admin_connect(POSTGRES_ADMIN_DSN)
    require_service(admin is not None, f"PostgreSQL not reachable at {POSTGRES_ADMIN_DSN!r}")
    assert admin is not None
    admin.close()
    return (
        evaluate("postgres", admin_dsn=POSTGRES_ADMIN_DSN),
        evaluate("postgres", round_trip=True, admin_dsn=POSTGRES_ADMIN_DSN),
        evaluate("memory"),
    )


def test_conversations_are_answered_right_on_postgres(
    reports: tuple[Report, Report, Report],
) -> None:
    postgres, _, _ = reports
    assert postgres.rate() >= CONVERSATION_AIM, (
        postgres.figures()["conversations"],
        wrong_turns(postgres),
    )
    assert weak_kinds(postgres) == {}, wrong_turns(postgres)


def test_a_json_round_trip_gives_the_same_answers_on_postgres(
    reports: tuple[Report, Report, Report],
) -> None:
    postgres, tripped, _ = reports
    assert postgres.answers() == tripped.answers()


def test_memory_and_postgres_give_the_same_answers(
    reports: tuple[Report, Report, Report],
) -> None:
    """The same count for every turn, and the same rows whenever the answer is whole."""
    postgres, _, memory = reports
    differ = [
        (r.conversation.id, index, p.turn.text, p.total_count, m.total_count)
        for r, n in zip(postgres.results, memory.results, strict=True)
        for index, (p, m) in enumerate(zip(r.turns, n.turns, strict=True), start=1)
        if p.total_count != m.total_count
        or (len(p.got_ids) == p.total_count and p.got_ids != m.got_ids)
    ]
    assert differ == []
