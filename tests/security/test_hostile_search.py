"""Hostile text through ``facade.search`` on the memory backend: every line of the shared
SQL-injection corpus, and our own awkward cases, as search text and as a filter value, with the
hash model and the default model. The outcome is a result or a typed error, never anything else;
the stored rows are unchanged; and every row returned matches the filter."""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Iterator
from typing import Any

import pytest

from persistence import (
    BackendError,
    Filter,
    InvalidQueryError,
    MemoryStore,
    Op,
    ReadOnlyPersistenceFacade,
    create_persistence_agent,
    create_read_only_facade,
)
from tests.conftest import corpus_lines
from tests.support.search import HashEmbeddings

OWN_CASES = [
    "", " ", "\x00", "a\x00' OR 1=1 --", "\udcff", "caf\udce9", "\ud800x", "🙂" * 50,
    "%", "_", "\\", "*", "&", "|", "!", ":*", "'a' & 'b'", "a <-> b", "websearch_to_tsquery",
    "a" * 1_000, "a " * 500, "word " * 1_001, "x" * 1_001, "ＡＣＭＥ", "\u202eemca",
]  # fmt: skip
#: Errors a hostile text may legitimately cause: refused input, or the model failing typed.
TYPED = (InvalidQueryError, BackendError)
STORED_SAMPLE_STEP = 37


@functools.cache
def payloads() -> tuple[str, ...]:
    return (*corpus_lines(), *OWN_CASES)


@pytest.fixture(scope="module")
def store() -> MemoryStore:
    store = MemoryStore()
    rows = [
        {"subject": line[:200], "body": line, "lead_id": n % 5}
        for n, line in enumerate(payloads()[::STORED_SAMPLE_STEP])
    ]
    rows.append({"subject": "Ordinary", "body": "an ordinary inquiry", "lead_id": 1})
    create_persistence_agent(kind="memory", store=store).batch("inquiries", rows)
    return store


def _snapshot(store: MemoryStore) -> list[dict[str, Any]]:
    return [dict(row) for row in store.rows("inquiries")]


def _facades(store: MemoryStore) -> Iterator[tuple[str, ReadOnlyPersistenceFacade]]:
    yield "hash", create_read_only_facade(kind="memory", store=store, embeddings=HashEmbeddings())
    if importlib.util.find_spec("wordllama") is not None:
        from rag_agent.pipeline.embeddings import default_embeddings

        yield (
            "default",
            create_read_only_facade(kind="memory", store=store, embeddings=default_embeddings()),
        )


class TestHostileSearch:
    @pytest.mark.parametrize("mode", ["hybrid", "keyword", "semantic"])
    def test_search_text_never_raises_untyped(self, store: MemoryStore, mode: str) -> None:
        before = _snapshot(store)
        # The keyword mode never embeds: one model is enough there.
        facades = list(_facades(store))[: 1 if mode == "keyword" else None]
        for name, facade in facades:
            for text in payloads():
                try:
                    result = facade.search("inquiries", text, k=5, mode=mode)
                except TYPED:
                    continue
                except Exception as exc:  # pragma: no cover - the failure being tested for
                    pytest.fail(f"{name}/{mode}: {text[:80]!r} raised {type(exc).__name__}: {exc}")
                assert len(result.hits) == min(5, result.total_count)
        assert _snapshot(store) == before

    def test_as_a_filter_value_only_literal_matches_come_back(self, store: MemoryStore) -> None:
        """A payload as an equality filter returns exactly the rows holding it, whatever the
        search text."""
        facade = create_read_only_facade(kind="memory", store=store, embeddings=HashEmbeddings())
        for text in payloads()[::3]:
            try:
                result = facade.search(
                    "inquiries", "ordinary inquiry", filters=[Filter("body", Op.EQ, text)]
                )
            except TYPED:
                continue
            assert all(row["body"] == text for row in result.rows)
            assert result.total_count == facade.count("inquiries", [Filter("body", Op.EQ, text)])

    @pytest.mark.parametrize("k", [0, -1, 101, "10", 1.5, None, True])
    def test_bad_k_is_refused(self, store: MemoryStore, k: Any) -> None:
        facade = create_read_only_facade(kind="memory", store=store)
        with pytest.raises(InvalidQueryError):
            facade.search("inquiries", "ordinary", k=k)

    @pytest.mark.parametrize("mode", ["", "vector", "HYBRID ", None, 3])
    def test_bad_mode_is_refused(self, store: MemoryStore, mode: Any) -> None:
        facade = create_read_only_facade(kind="memory", store=store)
        with pytest.raises(InvalidQueryError):
            facade.search("inquiries", "ordinary", mode=mode)


class TestCorrectionsStayInsideTheFilters:
    """A spelling correction is a word of rows inside the search's filters, never of others."""

    def test_memory(self) -> None:
        from persistence import Filter, MemoryStore, Op, create_read_only_facade

        store = MemoryStore()
        hidden = [{"id": i, "subject": "zanzibar merger", "body": "zanzibar"} for i in (1, 2, 3)]
        shown = [{"id": i, "subject": "parcel late", "body": "parcel"} for i in (4, 5, 6)]
        store.insert("inquiries", hidden + shown)
        facade = create_read_only_facade("memory", store=store)
        inside = [Filter("subject", Op.EQ, "parcel late")]
        filtered = facade.search("inquiries", "zanzibr", filters=inside, k=5, mode="keyword")
        assert filtered.corrections == ()
        assert facade.search("inquiries", "parcle", filters=inside, k=5).corrections == (
            ("parcle", "parcel"),
        )
        assert facade.search("inquiries", "zanzibr", k=5).corrections == (("zanzibr", "zanzibar"),)
