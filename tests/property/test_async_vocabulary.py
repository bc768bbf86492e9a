"""``facade.avocabulary()`` answers as ``facade.vocabulary()`` would, learning in a worker
thread only when the kept vocabulary is no longer current.

The awaited vocabulary used to be the blocking one run in a worker thread on every call (a run
asks for it at every step); it now answers the kept one on the loop when no table was written
and it is younger than the TTL. Any sequence of writes, clock moves, refreshes and blocking or
awaited asks must learn exactly when that reference (the blocking call, in a thread) learned,
and return the same object.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import persistence.facade.reader as reader_module
from persistence import MemoryStore, create_persistence_agent, create_read_only_facade
from persistence.vocabulary import SchemaVocabulary
from rag_agent.ops.sample import load_sample

_TTL = reader_module.VOCABULARY_TTL_SECONDS

#: ``write``: a row added to a table; ``tick``/``expire``: the clock moves within / past the
#: TTL; ``blocking``/``awaited``: the vocabulary asked so, ``... refresh`` with ``refresh=True``.
_ACTIONS = st.lists(
    st.sampled_from(
        ["write", "tick", "expire", "blocking", "awaited", "blocking refresh", "awaited refresh"]
    ),
    max_size=12,
)


class _Clock:
    """What the facade's module reads as ``time``: a monotonic clock moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    fake = _Clock()
    monkeypatch.setattr(reader_module, "time", fake)
    return fake


@pytest.fixture
def spies(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many times a vocabulary was learned and a worker thread was started."""
    counted = {"learned": 0, "threads": 0}
    learn = SchemaVocabulary.learn.__func__  # type: ignore[attr-defined]
    to_thread = asyncio.to_thread

    def counting_learn(cls: Any, *args: Any, **kwargs: Any) -> SchemaVocabulary:
        counted["learned"] += 1
        result: SchemaVocabulary = learn(cls, *args, **kwargs)
        return result

    async def counting_to_thread(func: Any, /, *args: Any, **kwargs: Any) -> Any:
        counted["threads"] += 1
        return await to_thread(func, *args, **kwargs)

    monkeypatch.setattr(SchemaVocabulary, "learn", classmethod(counting_learn))
    monkeypatch.setattr(reader_module.asyncio, "to_thread", counting_to_thread)
    return counted


_EMAILS = itertools.count()


@settings(max_examples=60, deadline=None)
@given(actions=_ACTIONS)
def test_the_awaited_vocabulary_learns_when_the_blocking_one_would(
    clock: _Clock, spies: dict[str, int], actions: list[str]
) -> None:
    store = MemoryStore()
    load_sample(store, tables=["clients", "leads"])
    facade = create_read_only_facade(kind="memory", store=store)
    writer = create_persistence_agent(kind="memory", store=store)
    spies.update(learned=0, threads=0)
    # The reference: what the blocking call kept (its versions and when it learned).
    kept: tuple[Any, float] | None = None
    version = facade.data_version("leads"), facade.data_version("clients")
    learned = threads = 0
    for action in actions:
        if action == "write":
            writer.batch("leads", [{"email": f"v{next(_EMAILS)}@x.example"}])
            continue
        if action in ("tick", "expire"):
            clock.now += _TTL / 3 if action == "tick" else _TTL
            continue
        refresh = action.endswith("refresh")
        version = facade.data_version("leads"), facade.data_version("clients")
        current = kept is not None and kept[0] == version and clock.now - kept[1] < _TTL
        if refresh or not current:
            learned += 1
            kept = (version, clock.now)
        awaited = action.startswith("awaited")
        # The awaited call goes to a thread exactly when it has something to learn.
        threads += awaited and (refresh or not current)
        before = facade._vocabulary
        answer = (
            asyncio.run(facade.avocabulary(refresh=refresh))
            if awaited
            else facade.vocabulary(refresh=refresh)
        )
        assert (spies["learned"], spies["threads"]) == (learned, threads), action
        if not refresh and current:
            assert before is not None and answer is before[0]
        assert facade.vocabulary() is answer  # kept: the next blocking ask answers the same
