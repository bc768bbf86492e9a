"""One adapter over any LangChain-style ``Embeddings`` (``embed_query``/``embed_documents``,
optionally their ``a``-prefixed async twins).

Vectors come back L2-normalised as tuples of floats, so cosine similarity is a dot product on every
backend. The adapter records what a stored vector must match (``model_id``, ``dimension``,
``normalized``): a stored vector from another model or of another dimension is a
:class:`~persistence.errors.InvalidQueryError`, never a silent wrong ranking. Query vectors are
cached per text; ``on_call`` (e.g. the agent's rate limiter) is called before every model call
that the cache does not answer. An exception the model raises (a network error, a text it cannot
encode) becomes a :class:`~persistence.errors.BackendError` (``backend="embeddings"``), so a search
fails typed.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from cachetools import LRUCache

from persistence.errors import BackendError, InvalidQueryError, PersistenceError

__all__ = ["Embedder", "Vector", "normalize"]

Vector = tuple[float, ...]
_QUERY_CACHE_SIZE = 1_024


def normalize(values: Sequence[float]) -> Vector:
    """``values`` scaled to unit length; a zero or non-finite vector is refused (it has no
    direction, and NaN would rank arbitrarily)."""
    try:
        floats = tuple(float(v) for v in values)
    except (TypeError, ValueError):
        raise InvalidQueryError("an embedding is not a sequence of numbers") from None
    if not all(math.isfinite(v) for v in floats):
        raise InvalidQueryError("an embedding has a NaN or infinite component")
    norm = math.sqrt(math.fsum(v * v for v in floats))
    if norm == 0.0:
        raise InvalidQueryError("an embedding is the zero vector; it has no direction to rank by")
    return tuple(v / norm for v in floats)


class Embedder:
    """``embeddings`` with a model id, a fixed dimension, normalisation and a query cache."""

    def __init__(
        self,
        embeddings: Any,
        *,
        model_id: str | None = None,
        on_call: Callable[[], None] | None = None,
    ) -> None:
        if not callable(getattr(embeddings, "embed_query", None)):
            raise TypeError(
                "embeddings must have embed_query/embed_documents (LangChain Embeddings)"
            )
        self.embeddings = embeddings
        self.model_id = model_id or _model_id(embeddings)
        self.normalized = True
        self._dimension: int | None = None
        self._on_call = on_call
        self._queries: LRUCache[str, Vector] = LRUCache(_QUERY_CACHE_SIZE)

    @property
    def dimension(self) -> int:
        """The model's dimension (asked of the model once, by embedding a probe, if unknown)."""
        if self._dimension is None:
            self.embed_query("dimension")
        assert self._dimension is not None
        return self._dimension

    def embed_query(self, text: str) -> Vector:
        cached = self._queries.get(text)
        if cached is not None:
            return cached
        self._meter()
        with self._model_call():
            values = self.embeddings.embed_query(text)
        vector = self._checked(values)
        self._queries[text] = vector
        return vector

    async def aembed_query(self, text: str) -> Vector:
        cached = self._queries.get(text)
        if cached is not None:
            return cached
        native = getattr(self.embeddings, "aembed_query", None)
        if native is None:
            return self.embed_query(text)
        self._meter()
        with self._model_call():
            values = await native(text)
        vector = self._checked(values)
        self._queries[text] = vector
        return vector

    def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        if not texts:
            return []
        self._meter()
        with self._model_call():
            vectors = self.embeddings.embed_documents(list(texts))
        return [self._checked(v) for v in vectors]

    def embed_rows(self, texts: Sequence[str]) -> list[Vector | None]:
        """Like :meth:`embed_documents`, but a row whose text embeds to a zero or non-finite
        vector gets ``None`` (it has no direction; the semantic leg ranks it nowhere) instead of
        failing the whole batch. A dimension other than the model's is still an
        :class:`~persistence.errors.InvalidQueryError`."""
        if not texts:
            return []
        self._meter()
        with self._model_call():
            embedded = self.embeddings.embed_documents(list(texts))
        if len(embedded) != len(texts):
            raise BackendError(
                f"the embedding model {self.model_id!r} returned {len(embedded)} vectors for "
                f"{len(texts)} texts",
                backend="embeddings",
                operation="embed",
            )
        vectors: list[Vector | None] = []
        for values in embedded:
            try:
                vector = normalize(values)
            except InvalidQueryError:
                vectors.append(None)
            else:
                vectors.append(self._dimensioned(vector))
        return vectors

    def check_stored(self, *, model_id: str, dimension: int) -> None:
        """Refuse stored vectors made by another model or of another dimension."""
        if model_id != self.model_id or dimension != self.dimension:
            raise InvalidQueryError(
                f"stored vectors were made by {model_id!r} ({dimension} dimensions) but the "
                f"search embeds with {self.model_id!r} ({self.dimension} dimensions); rebuild "
                "the vectors or configure the same model"
            )

    @contextlib.contextmanager
    def _model_call(self) -> Iterator[None]:
        try:
            yield
        except PersistenceError:
            raise
        except Exception as exc:
            raise BackendError(
                f"the embedding model {self.model_id!r} failed: {type(exc).__name__}",
                backend="embeddings",
                operation="embed",
            ) from exc

    def _meter(self) -> None:
        if self._on_call is not None:
            self._on_call()

    def _checked(self, values: Sequence[float]) -> Vector:
        return self._dimensioned(normalize(values))

    def _dimensioned(self, vector: Vector) -> Vector:
        if self._dimension is None:
            self._dimension = len(vector)
        elif len(vector) != self._dimension:
            raise InvalidQueryError(
                f"the embedding model returned {len(vector)} dimensions, not {self._dimension}"
            )
        return vector

    def __repr__(self) -> str:
        return f"Embedder({self.model_id!r})"


def _model_id(embeddings: Any) -> str:
    for attribute in ("model_id", "model", "model_name"):
        value = getattr(embeddings, attribute, None)
        if isinstance(value, str) and value:
            return f"{type(embeddings).__name__}:{value}"
    return type(embeddings).__name__
