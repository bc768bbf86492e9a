"""A plain lookup answers exactly as the general steps do (rag_agent.pipeline.lookup_path).

Two agents over one facade, one taking the lookup path and one with it off (every run through
the general steps), are asked the same generated questions: look-ups by id, uuid or e-mail
address of rows that exist and of rows that do not (the general path then reformulates and asks
the fallback), in windows that may show no record, with and without ``include_raw`` and
``trace``, through a facade that may redact columns, with the result cache on or off (each
question asked twice, so a cached answer is compared too), and questions of other shapes
beside them (a count, a company and an address) that the lookup path must leave alone. The
envelopes' JSON must be equal (timings aside: trace milliseconds), and so must the events
logged and the requests the fallback hook got (the seconds left of the LLM deadline aside).

On the memory backend (the sample's integer ids, run and ``arun``) and on PostgreSQL (the
uuid-keyed Supabase-style schema).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import functools
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from persistence import (
    AccessPolicy,
    MemoryBackend,
    MemoryStore,
    ReadOnlyPersistenceFacade,
    RedactionPolicy,
    create_read_only_facade,
)
from rag_agent import RAGAgent, RAGSettings
from rag_agent.hooks import FallbackRequest, FallbackResult
from rag_agent.ops.sample import load_sample
from rag_agent.pipeline.pipeline import Pipeline
from tests.conftest import PostgresDatabase

NOW = dt.datetime(2025, 9, 17, 12, tzinfo=dt.UTC)
KEY = "lookup path test key, long enough"
REDACTION = {"leads": {"email": "mask:email", "phone": "hash", "last_name": "drop"}}

# {key} is an id (an integer or a uuid), {address} an e-mail address.
LOOKUPS = (
    "show lead {key}",
    "lead {key}",
    "find the lead with id {key}",
    "find the lead with email {address}",
    "lead with email {address}",
    "who is {address}",
    "leads with email {address}",
)
# Questions of other plans: a count, a company beside the address, an ordinary question.
OTHERS = (
    "how many leads with email {address}",
    "leads at acme with email {address}",
    "leads at globex",
)


class RecordingFallback:
    """A fallback hook that reads nothing and records what it was asked."""

    def __init__(self) -> None:
        self.requests: list[FallbackRequest] = []

    def __call__(self, request: FallbackRequest) -> FallbackResult:
        self.requests.append(request)
        return FallbackResult(answer="nothing found")


def _untimed(value: Any) -> Any:
    """``value`` without its wall-clock figures (a trace's or an event's milliseconds)."""
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k != "ms" and not k.endswith("_ms")}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def _asked(fallback: RecordingFallback) -> list[FallbackRequest]:
    return [dataclasses.replace(r, seconds_left=None) for r in fallback.requests]


@dataclasses.dataclass(frozen=True)
class Question:
    text: str
    limit: int | None
    offset: int | None
    include_raw: bool
    trace: bool
    #: ``key``: a lookup by key ("lead <id>", found or not), always read as a plain lookup;
    #: ``address``: by e-mail (a generated address may be none the rules read, a masked e-mail
    #: is no plain lookup); ``other``: never a plain lookup.
    form: str


def questions(keys: list[Any], addresses: list[str], missing_key: Any) -> st.SearchStrategy[Any]:
    key = st.sampled_from(keys) | st.just(missing_key)
    address = st.sampled_from(addresses) | st.emails().map(str.lower).filter(
        lambda a: a not in addresses
    )
    template = st.sampled_from(LOOKUPS + OTHERS)
    return st.builds(
        lambda t, k, a, limit, offset, include_raw, trace: Question(
            t.format(key=k, address=a),
            limit,
            offset,
            include_raw,
            trace,
            "other" if t in OTHERS else "key" if "{key}" in t else "address",
        ),
        template,
        key,
        address,
        st.sampled_from([None, 1, 5]),
        st.sampled_from([None, 0, 1]),
        st.booleans(),
        st.booleans(),
    )


def _agent(
    facade: ReadOnlyPersistenceFacade, *, cached: bool, lookups: bool
) -> tuple[RAGAgent, RecordingFallback]:
    fallback = RecordingFallback()
    agent = RAGAgent(
        facade,
        settings=RAGSettings(cache_disabled=not cached, max_fallbacks_per_min=10**6),
        fallback=fallback,
        now=lambda: NOW,
        clock=lambda: 0.0,
    )
    object.__setattr__(agent._pipeline, "lookups", lookups)
    return agent, fallback


def compare(
    facade: ReadOnlyPersistenceFacade,
    asked: list[Question],
    cached: bool,
    run: Callable[[RAGAgent, Question], dict[str, Any]],
    *,
    redacted: bool,
) -> None:
    """Ask ``asked`` (each twice) of an agent with the lookup path and one without: the same
    envelopes, events and fallback requests; the lookup path taken only with it on, only by
    lookups, and (without redaction) by at least one lookup by key when one is asked."""
    answers: list[Any] = []
    taken: list[str] = []
    for lookups in (False, True):
        agent, fallback = _agent(facade, cached=cached, lookups=lookups)
        with (
            mock.patch.object(
                Pipeline, "_look_up", autospec=True, side_effect=Pipeline._look_up
            ) as look_up,
            capture_logs() as events,
        ):
            envelopes = [_untimed(run(agent, q)) for q in asked for _ in range(2)]
        taken += [c.args[3] for c in look_up.call_args_list]  # (self, log, outcome, text, …)
        assert lookups or not taken
        answers.append((envelopes, events, _asked(fallback)))
    (general, general_events, general_asked), (fast, fast_events, fast_asked) = answers
    for question, one, other in zip(
        [q for q in asked for _ in range(2)], general, fast, strict=True
    ):
        note(f"{question}")
        assert other == one
    assert _untimed(fast_events) == _untimed(general_events)
    assert fast_asked == general_asked
    if not redacted and any(q.form == "key" for q in asked):
        assert taken, "no plain lookup took the lookup path"
    assert set(taken) <= {q.text for q in asked if q.form != "other"}


def _options(question: Question) -> dict[str, Any]:
    return {
        "limit": question.limit,
        "offset": question.offset,
        "include_raw": question.include_raw,
        "trace": question.trace,
        "return_json": True,
    }


def _run(agent: RAGAgent, question: Question) -> dict[str, Any]:
    return agent.run(question.text, **_options(question))


def _arun(agent: RAGAgent, question: Question) -> dict[str, Any]:
    return asyncio.run(agent.arun(question.text, **_options(question)))


# --- memory --------------------------------------------------------------------------------------


@functools.cache
def _memory() -> tuple[MemoryStore, list[int], list[str]]:
    store = MemoryStore()
    load_sample(store)
    rows = ReadOnlyPersistenceFacade(MemoryBackend(store), AccessPolicy.read_only()).read(
        "leads", limit=500
    )
    keys = [row["id"] for row in rows.rows]
    addresses = [row["email"].lower() for row in rows.rows if row["email"]]
    return store, keys, addresses


def _memory_facade(redacted: bool) -> ReadOnlyPersistenceFacade:
    store = _memory()[0]
    redaction = RedactionPolicy(REDACTION, key=KEY) if redacted else None
    return ReadOnlyPersistenceFacade(
        MemoryBackend(store), AccessPolicy.read_only(), redaction=redaction
    )


_, _KEYS, _ADDRESSES = _memory()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    asked=st.lists(questions(_KEYS, _ADDRESSES, 10**6), min_size=1, max_size=4),
    redacted=st.booleans(),
    cached=st.booleans(),
    awaited=st.booleans(),
)
def test_memory_lookups_answer_as_the_general_steps(
    asked: list[Question], redacted: bool, cached: bool, awaited: bool
) -> None:
    compare(_memory_facade(redacted), asked, cached, _arun if awaited else _run, redacted=redacted)


def test_the_lookup_path_is_taken_for_a_plain_lookup() -> None:
    """The path under test is the one plain lookups take: a run of one skips the general steps
    (the company link among them), and one of another shape does not."""
    agent, _ = _agent(_memory_facade(False), cached=False, lookups=True)
    pipeline = agent._pipeline
    calls: list[str] = []
    original = type(pipeline)._look_up

    def spy(self: Any, *args: Any) -> Any:
        calls.append(args[2])
        return original(self, *args)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(type(pipeline), "_look_up", spy)
        found = agent.run(f"find the lead with email {_ADDRESSES[0]}")
        agent.run("leads at globex")
        agent.run(f"how many leads with email {_ADDRESSES[0]}")
    assert found.metadata.total_count == 1
    assert calls == [f"find the lead with email {_ADDRESSES[0]}"]


# --- PostgreSQL ----------------------------------------------------------------------------------

LEADS = 30


@pytest.fixture(scope="module")
def pg(postgres_supabase_db: PostgresDatabase) -> Iterator[PostgresDatabase]:
    with postgres_supabase_db.leads(
        "INSERT INTO leads (email, company_name, phone, last_name, status) "
        "SELECT 'user' || g || '@example.com', 'Co ' || (g %% 5), '+1 555 ' || g, "
        "'Name' || g, 'new' FROM generate_series(1, %s) AS g",
        (LEADS,),
    ) as db:
        yield db


@pytest.fixture(scope="module")
def pg_facades(pg: PostgresDatabase) -> Iterator[dict[bool, ReadOnlyPersistenceFacade]]:
    with (
        create_read_only_facade(kind="postgres", dsn=pg.reader_dsn) as plain,
        create_read_only_facade(
            kind="postgres", dsn=pg.reader_dsn, redaction=RedactionPolicy(REDACTION, key=KEY)
        ) as redacted,
    ):
        yield {False: plain, True: redacted}


@pytest.fixture(scope="module")
def pg_leads(pg: PostgresDatabase) -> tuple[list[str], list[str]]:
    rows = pg.execute("SELECT id, email FROM leads ORDER BY email")
    return [str(row[0]) for row in rows], [str(row[1]) for row in rows]


@pytest.mark.postgres
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data(), redacted=st.booleans(), cached=st.booleans())
def test_postgres_lookups_answer_as_the_general_steps(
    pg_facades: dict[bool, ReadOnlyPersistenceFacade],
    pg_leads: tuple[list[str], list[str]],
    data: st.DataObject,
    redacted: bool,
    cached: bool,
) -> None:
    keys, addresses = pg_leads
    asked = data.draw(
        st.lists(questions(keys, addresses, str(uuid.UUID(int=7))), min_size=1, max_size=4)
    )
    compare(pg_facades[redacted], asked, cached, _run, redacted=redacted)
