"""The bundled sample's vocabulary: what :func:`~rag_agent.understanding.rules.parser.understand`
reads with when the caller gives none (a pure call, as in the docs and the tests).

It is learned from the sample's rows exactly as an agent learns its own database's, so the
sample is one schema among others: no word of it is written into the rules.
"""

from __future__ import annotations

import functools

from persistence import MemoryStore, create_read_only_facade
from persistence.vocabulary import SchemaVocabulary

__all__ = ["sample_vocabulary", "with_sample_fallback"]


@functools.cache
def sample_vocabulary() -> SchemaVocabulary:
    """The vocabulary of the bundled sample data (learned once per process)."""
    from rag_agent.ops.sample import load_sample  # the sample's rows only when asked for

    store = MemoryStore()
    load_sample(store)
    return SchemaVocabulary.learn(create_read_only_facade(kind="memory", store=store))


@functools.lru_cache(maxsize=64)
def with_sample_fallback(vocabulary: SchemaVocabulary) -> SchemaVocabulary:
    """``vocabulary``, with the sample's words for a business table it could not learn (a
    backend that cannot describe its columns): the rules then propose the reference schema's
    columns, which the facade's own check keeps or reports, as for any table."""
    sample = sample_vocabulary()
    missing = {
        name: words for name, words in sample.tables.items() if name not in vocabulary.tables
    }
    if not missing:
        return vocabulary
    return SchemaVocabulary({**missing, **vocabulary.tables})
