"""Doubles for search tests: a small deterministic embedding model and a generated table."""

from __future__ import annotations

import random
import zlib

from persistence import MemoryStore, create_persistence_agent
from persistence.search.bm25 import tokens

__all__ = ["TOPICS", "HashEmbeddings", "inquiries_store"]

#: Subjects and body words of the generated inquiries, one topic per row.
TOPICS = {
    "billing": ("Invoice question", "invoice payment charge refund card declined"),
    "access": ("Login problem", "password reset sign locked account login"),
    "cancel": ("Cancel subscription", "cancel stop paying subscription plan downgrade"),
    "shipping": ("Where is my order", "parcel delivery tracking courier late shipping"),
    "feature": ("Feature request", "export dashboard integration api roadmap idea"),
}
_FILLER = [
    "please",
    "thanks",
    "hello",
    "regards",
    "team",
    "today",
    "week",
    "month",
    "soon",
    "again",
]


class HashEmbeddings:
    """A bag of hashed words in 16 dimensions: deterministic, instant, and words shared mean
    vectors close. Counts its calls (``query_calls``, ``document_calls``) and the texts it
    embedded (``documents``)."""

    def __init__(self, model_id: str = "hash-16", dimension: int = 16) -> None:
        self.model_id = model_id
        self.dimension = dimension
        self.query_calls = 0
        self.document_calls = 0
        self.documents: list[str] = []

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * self.dimension
        for word in tokens(text):
            digest = zlib.crc32(word.encode("utf-8", "surrogatepass"))
            vector[digest % self.dimension] += 1.0 + (digest >> 8) % 3
        return vector

    def embed_query(self, text: str) -> list[float]:
        self.query_calls += 1
        return self._vector(text)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.document_calls += 1
        self.documents.extend(texts)
        return [self._vector(text) for text in texts]


def inquiries_store(rows: int = 5_000, seed: int = 20) -> MemoryStore:
    """A store with ``rows`` generated inquiries: row ``i`` has ``lead_id = i % 1000`` (so
    ``lead_id < 500`` keeps 50 %, ``< 100`` 10 %, ``< 10`` 1 %, ``= 7`` 0.1 %), a topic's
    subject and a body of its words mixed with filler, ``client_id = i % 3``."""
    rng = random.Random(seed)
    names = sorted(TOPICS)
    batch = []
    for i in range(rows):
        subject, words = TOPICS[names[rng.randrange(len(names))]]
        vocabulary = words.split()
        body = " ".join(
            rng.choice(vocabulary) if rng.random() < 0.4 else rng.choice(_FILLER)
            for _ in range(rng.randint(4, 14))
        )
        batch.append(
            {"id": i + 1, "lead_id": i % 1000, "client_id": i % 3, "subject": subject, "body": body}
        )
    store = MemoryStore()
    create_persistence_agent(kind="memory", store=store).batch("inquiries", batch)
    return store
