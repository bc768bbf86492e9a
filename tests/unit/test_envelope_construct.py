"""The envelope's models built without validating the run's values again
(:mod:`rag_agent.envelope.construct`) are the validated models: the same fields, fields set and
JSON bytes, on every envelope the labelled questions, the agent fallback and the error paths
make (here on memory; ``tests/integration/test_envelope_construct_postgres.py`` on PostgreSQL).

Every envelope a run assembles is built both ways while a test runs, and any difference is
recorded (the run itself never raises, so a difference could not fail it otherwise).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from persistence import AccessPolicy, MemoryBackend, MemoryStore, ReadOnlyPersistenceFacade
from rag_agent import Envelope, FallbackRead, FallbackResult, RAGAgent, RAGSettings
from rag_agent.envelope import Metadata, Record, construct
from rag_agent.envelope import assemble as assembly
from tests.data.schema_accuracy import evaluate

NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)


@dataclass
class Checked:
    """What the checking constructors saw: envelopes compared, how many took the plain path
    (not validated), and every difference."""

    compared: int = 0
    plain: int = 0
    differences: list[str] = field(default_factory=list)

    def metadata_of(self, values: dict[str, Any]) -> Metadata:
        built = construct.metadata_of(values)
        validated = Metadata(**values)
        self.plain += construct.plain_metadata(values)
        self._compare("metadata", built, validated, values)
        for key in ("query_filters", "filters"):
            if values.get(key) is not None and getattr(built, key) is values[key]:
                self.differences.append(f"{key} shared with the run, not copied")
        return built

    def envelope_of(self, metadata: Metadata, records: list[Record]) -> Envelope:
        built = construct.envelope_of(metadata, records)
        validated = Envelope(metadata=metadata, records=records)
        self.compared += 1
        self._compare("envelope", built, validated, metadata.source)
        if json.dumps(built.to_json()) != json.dumps(validated.to_json()):
            self.differences.append(f"to_json differs: {validated.to_json()!r:.300}")
        if built.records is records:
            self.differences.append("records shared with the run, not copied")
        return built

    def _compare(self, what: str, built: Any, validated: Any, context: Any) -> None:
        if type(built) is not type(validated) or built != validated:
            self.differences.append(f"{what} differs for {context!r:.200}")
        if built.model_fields_set != validated.model_fields_set:
            self.differences.append(f"{what} fields set differs for {context!r:.200}")
        if built.model_dump_json() != validated.model_dump_json():
            self.differences.append(f"{what} JSON differs for {context!r:.200}")
        if list(built.__dict__) != list(validated.__dict__):
            self.differences.append(f"{what} field order differs")


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> Iterator[Checked]:
    seen = Checked()
    monkeypatch.setattr(assembly, "metadata_of", seen.metadata_of)
    monkeypatch.setattr(assembly, "envelope_of", seen.envelope_of)
    yield seen
    assert seen.differences == []


# The whole labelled set: seconds on memory, more on a busy machine.
@pytest.mark.timeout(600)
def test_labelled_questions(checked: Checked) -> None:
    report = evaluate("memory")
    assert checked.compared >= len(report.results)
    assert checked.plain >= len(report.results) // 2  # the plain path is the common one


class _Fallback:
    def __init__(self, result: FallbackResult) -> None:
        self.result = result

    def __call__(self, request: Any) -> FallbackResult:
        return self.result


def _agent(store: MemoryStore, **kwargs: Any) -> RAGAgent:
    facade = ReadOnlyPersistenceFacade(MemoryBackend(store), AccessPolicy.read_only())
    settings = kwargs.pop("settings", RAGSettings(cache_disabled=True))
    return RAGAgent(facade, settings=settings, now=lambda: NOW, **kwargs)


@pytest.fixture
def store() -> MemoryStore:
    store = MemoryStore()
    store.insert(
        "leads",
        [
            {"id": 1, "email": "ada@acme.io", "company_name": "Acme Inc.", "status": "new"},
            {"id": 2, "email": "bob@initech.io", "company_name": "Initech", "score": 7},
        ],
    )
    store.insert("clients", [{"id": 9, "name": "Initech"}])
    return store


def test_fallback_error_and_cached_envelopes(checked: Checked, store: MemoryStore) -> None:
    rows = [{"id": 2, "email": "bob@initech.io", "company_name": "Initech"}]
    fallback = _Fallback(
        FallbackResult(
            reads=[FallbackRead("leads", rows, retrieved_at=NOW), FallbackRead("clients", [])]
        )
    )
    answers = [
        _agent(store, fallback=fallback).run("someone who asked about widgets", limit=5),
        _agent(store).run("lead #404"),  # fallback disabled
        _agent(store).run("leads at Acme Inc. with email nobody@acme.io"),  # reformulations
        _agent(store).run("x" * 100_000),  # refused: too long
        _agent(store).run("show me everything", table="users"),  # a table not allowed
        _agent(store).run(42),  # type: ignore[arg-type]
        _agent(store).run("how many leads", count_only=True),
        _agent(store).run("leads by status", return_json=True),
        _agent(store).run("lead 1", include_raw=True, limit=1, offset=0),
        _agent(store).run("lead 2", offset=3),
    ]
    cached = _agent(store, settings=RAGSettings())
    answers += [cached.run("lead 1"), cached.run("lead 1")]  # a miss, then a hit
    answers.append(assembly.error_envelope("leads", ValueError("boom"), now=lambda: NOW))
    assert checked.compared >= len(answers) - 1
    assert any(a.metadata.error is not None for a in answers if isinstance(a, Envelope))
    assert checked.plain > 0


def test_values_it_does_not_take_as_they_are_are_validated() -> None:
    """A dict for a nested model, an out-of-range count or an unknown key is validated (and
    refused or converted as validation does), never stored as given."""
    base = {"source": "persistence.leads", "query_filters": None, "retrieved_at": NOW}
    converted = construct.metadata_of({**base, "total_count": 1, "error": {"type": "E"} | {
        "message": "m"
    }})  # fmt: skip
    assert converted.error is not None and converted.error.type == "E"
    for bad in ({"total_count": -1}, {"total_count": 1, "limit": 0}, {"total_count": True}):
        if bad.get("total_count") is True:
            assert not construct.plain_metadata({**base, **bad})
            continue
        with pytest.raises(ValueError):
            construct.metadata_of({**base, **bad})
    assert not construct.plain_metadata({**base, "total_count": 1, "cache": "maybe"})
