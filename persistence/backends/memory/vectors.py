"""Row vectors of the memory backend's semantic leg: one matrix per table and model.

A :class:`VectorCache` per store holds, for each (table, model id, dimension), a
:class:`_Matrix`: every embedded row's vector in one contiguous single-precision matrix (what
pgvector stores; half the memory of doubles), a row id → slot map, and per slot the hash of the
text embedded. A search hashes its filtered rows' texts, embeds only the rows whose text is new
or changed, in batches of :data:`EMBED_BATCH` (so the first search over a large table never holds
more than one batch of the model's output), and computes cosines over its rows' slots, chunk by
chunk, without rebuilding the matrix. When the table's version moves, the slots of deleted rows
are freed (and the matrix compacted once half of it is free).

Bounded: the matrices of one store take at most :data:`MAX_VECTOR_BYTES` (their allocated
capacity counted); the least recently searched matrix goes first, and rows that still do not fit
are embedded for the search, batch by batch, and not kept. Without numpy the same layout is a
flat ``array('f')``, and cosines a Python loop.
"""

from __future__ import annotations

import array
import hashlib
import itertools
import operator
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import ModuleType
from typing import Any

from persistence.search.bm25 import tokens
from persistence.search.embedder import Embedder, Vector
from persistence.search.spelling import CountedVocabulary, is_vocabulary_word

__all__ = [
    "EMBED_BATCH",
    "MAX_VECTOR_BYTES",
    "Cosines",
    "VectorCache",
    "counted_vocabulary",
    "numpy_or_none",
    "vector_cache",
]

#: The most bytes of row vectors one store keeps (single precision, allocated capacity): 512 MiB,
#: about 520,000 vectors of 256 dimensions.
MAX_VECTOR_BYTES = 512 * 2**20
#: Rows embedded per model call: bounds the model's output held at once.
EMBED_BATCH = 2_048
#: Rows whose cosines are computed at once (the chunk copied out of the matrix).
_CHUNK = 8_192
_FLOAT = 4  # bytes of a stored component


def numpy_or_none() -> ModuleType | None:
    """numpy when installed (it comes with the ``semantic`` extra), else ``None``."""
    try:
        import numpy
    except ImportError:  # pragma: no cover - numpy comes with the semantic extra
        return None
    return numpy


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class _Matrix:
    """One table's vectors for one model: slots, their row ids and the hashes of their texts.

    Every method is called with :attr:`lock` held."""

    def __init__(self, dim: int, np: ModuleType | None) -> None:
        self.dim = dim
        self.np = np
        self.lock = threading.RLock()
        self.slots: dict[Any, int] = {}
        self.ids: list[Any] = []  # slot -> row id, None when free
        self.digests: list[bytes | None] = []
        self.free: list[int] = []
        self.blank: set[int] = set()  # slots whose text has no direction (no vector)
        self.version: int | None = None
        # Moves whenever a slot may hold another vector than before (freed, moved, rewritten):
        # a search's slots are then looked up again.
        self.generation = 0
        self.values: Any = np.zeros((0, dim), np.float32) if np is not None else array.array("f")
        self.capacity = 0

    @property
    def nbytes(self) -> int:
        return self.capacity * self.dim * _FLOAT

    def __len__(self) -> int:
        return len(self.slots)

    def forget(self, present: set[Any]) -> None:
        """Free the slots of rows no longer in the table; compact once half are free."""
        gone = [k for k in self.slots if k not in present]
        if gone:
            self.generation += 1
        for key in gone:
            slot = self.slots.pop(key)
            self.ids[slot] = self.digests[slot] = None
            self.blank.discard(slot)
            self.free.append(slot)
        if self.free and len(self.free) * 2 >= len(self.ids):
            self._compact()

    def _compact(self) -> None:
        live = [s for s, key in enumerate(self.ids) if key is not None]
        if self.np is not None:
            self.values[: len(live)] = self.values[live]
        else:
            d = self.dim
            self.values[: len(live) * d] = array.array(
                "f", itertools.chain.from_iterable(self.values[s * d : (s + 1) * d] for s in live)
            )
        moved = {old: new for new, old in enumerate(live)}
        self.blank = {moved[s] for s in self.blank}
        self.ids = [self.ids[s] for s in live]
        self.digests = [self.digests[s] for s in live]
        self.slots = {key: slot for slot, key in enumerate(self.ids)}
        self.free = []
        self._resize(len(live))

    def _resize(self, capacity: int) -> None:
        if self.np is not None:
            grown = self.np.zeros((capacity, self.dim), self.np.float32)
            kept = min(capacity, self.capacity)
            grown[:kept] = self.values[:kept]
            self.values = grown
        elif capacity < self.capacity:
            del self.values[capacity * self.dim :]
        else:
            self.values.extend(itertools.repeat(0.0, (capacity - self.capacity) * self.dim))
        self.capacity = capacity

    def slot_for(self, key: Any, wanted: int, room: Callable[[int], int]) -> int | None:
        """The slot of row ``key`` (a new one if it has none; the matrix grows toward ``wanted``
        more slots within ``room(bytes)``); ``None`` when the bound leaves no room."""
        slot = self.slots.get(key)
        if slot is not None:
            return slot
        if not self.free and len(self.ids) == self.capacity:
            grow = max(wanted, self.capacity // 4, 1) * self.dim * _FLOAT
            granted = room(grow) // (self.dim * _FLOAT)
            if granted <= 0:
                return None
            self._resize(self.capacity + granted)
        if self.free:
            slot = self.free.pop()
            self.ids[slot] = key
        else:
            slot = len(self.ids)
            self.ids.append(key)
            self.digests.append(None)
        self.slots[key] = slot
        return slot

    def store(self, slot: int, digest: bytes, vector: Vector | None) -> bool:
        """Record ``vector`` (``None``: a text without direction, ranked nowhere) in ``slot``;
        whether the slot now holds a vector."""
        if self.digests[slot] not in (None, digest):
            self.generation += 1
        self.digests[slot] = digest
        if vector is None:
            self.blank.add(slot)
            return False
        self.blank.discard(slot)
        if self.np is not None:
            self.values[slot] = vector
        else:
            self.values[slot * self.dim : (slot + 1) * self.dim] = array.array("f", vector)
        return True

    def resolve(
        self, ids: Sequence[Any], digests: Sequence[bytes], texts: Sequence[str]
    ) -> tuple[dict[int, int], list[int]]:
        """The slot of each position whose text is stored (position → slot), and the positions
        with a text but no stored vector for it (rows without text have none)."""
        stored: dict[int, int] = {}
        missing: list[int] = []
        get, held, blank = self.slots.get, self.digests, self.blank
        for position, (key, digest) in enumerate(zip(ids, digests, strict=True)):
            slot = get(key)
            if slot is not None and held[slot] == digest:
                if slot not in blank:
                    stored[position] = slot
            elif texts[position].strip():
                missing.append(position)
        return stored, missing

    def vector(self, slot: int) -> Vector:
        if self.np is not None:
            return tuple(self.values[slot].astype(self.np.float64).tolist())
        return tuple(self.values[slot * self.dim : (slot + 1) * self.dim])

    def dots(self, slots: Sequence[int], query: Vector) -> list[float]:
        """``query`` · the vector of each slot, in double precision (each row's products summed
        in the same order wherever its slot is, so equal vectors get equal cosines)."""
        np = self.np
        if np is None:
            d, values = self.dim, self.values
            return [_dot(query, values[s * d : (s + 1) * d]) for s in slots]
        q = np.asarray(query, dtype=np.float64)
        index = np.asarray(slots, dtype=np.intp)
        out = np.empty(len(index), dtype=np.float64)
        for start in range(0, len(index), _CHUNK):
            out[start : start + _CHUNK] = _products(self.values[index[start : start + _CHUNK]], q)
        result: list[float] = out.tolist()
        return result

    def dots_of(self, vectors: Sequence[Vector], query: Vector) -> list[float]:
        """:meth:`dots` of vectors not stored (rounded to single precision as if they were)."""
        np = self.np
        if np is None:
            return [_dot(query, array.array("f", v)) for v in vectors]
        block = np.asarray(vectors, dtype=np.float32).reshape(len(vectors), self.dim)
        result: list[float] = _products(block, np.asarray(query, dtype=np.float64)).tolist()
        return result


def _dot(query: Vector, vector: Sequence[float]) -> float:
    return float(sum(map(operator.mul, query, vector)))


def _products(block: Any, query: Any) -> Any:
    """Each single-precision row of ``block`` times ``query``, summed in double precision (numpy's
    pairwise sum along the row: the same order for a row wherever it sits)."""
    wide = block.astype(query.dtype)
    wide *= query
    return wide.sum(axis=1)


class Cosines:
    """The vectors of one search's rows: :meth:`__call__` gives the cosine of every row that has
    a vector with a query (rows beyond the bound are embedded again on each call)."""

    def __init__(
        self,
        matrix: _Matrix,
        found: tuple[dict[int, int], list[int], int],
        keys: tuple[list[Any], list[bytes], Sequence[str]],
        embedder: Embedder,
    ) -> None:
        self._matrix = matrix
        # position -> slot; positions embedded per use (beyond the bound); the matrix's
        # generation these slots are valid in.
        self._stored, self._transient, self._generation = found
        self._keys = keys  # row ids, text hashes, texts
        self._texts = keys[2]
        self._embedder = embedder

    def _current(self) -> dict[int, int]:
        """The slots, looked up again if another search freed, moved or rewrote any (called
        with the matrix's lock held)."""
        if self._generation != self._matrix.generation:
            self._stored, lost = self._matrix.resolve(*self._keys)
            self._transient = sorted({*self._transient, *lost})
            self._generation = self._matrix.generation
        return self._stored

    def _embedded(self) -> Iterator[list[tuple[int, Vector | None]]]:
        for start in range(0, len(self._transient), EMBED_BATCH):
            batch = self._transient[start : start + EMBED_BATCH]
            vectors = self._embedder.embed_rows([self._texts[p] for p in batch])
            yield list(zip(batch, vectors, strict=True))

    def __call__(self, query: Vector) -> list[tuple[float, int]]:
        """(cosine, position) for every row with a vector (all unit length: dot products)."""
        with self._matrix.lock:
            stored = self._current()
            dots = self._matrix.dots(list(stored.values()), query)
        scored = list(zip(dots, stored, strict=True))
        for batch in self._embedded():
            present = [(p, v) for p, v in batch if v is not None]
            found = self._matrix.dots_of([v for _, v in present], query) if present else []
            scored.extend(zip(found, (p for p, _ in present), strict=True))
        return scored

    def vector(self, position: int) -> Vector:
        """The vector of the row at ``position`` (one that has one)."""
        with self._matrix.lock:
            slot = self._current().get(position)
            if slot is not None:
                return self._matrix.vector(slot)
        (vector,) = self._embedder.embed_rows([self._texts[position]])
        assert vector is not None
        return tuple(array.array("f", vector))


def counted_vocabulary(texts: Iterable[str]) -> CountedVocabulary:
    """The words of ``texts`` (one per row) and how many rows hold each."""
    counts: dict[str, int] = {}
    for text in texts:
        for word in set(tokens(text)):
            if is_vocabulary_word(word):
                counts[word] = counts.get(word, 0) + 1
    return CountedVocabulary(counts)


class VectorCache:
    """Row vectors of one store, a matrix per table and model (its id and dimension; see the
    module docstring).

    A row whose text changed (an update through :class:`~persistence.PersistenceAgent` or any
    other write to the store) no longer matches its hash and is embedded again by the next search
    that ranks it, and only it; a write moves the table's version, and the next search frees the
    slots of deleted rows. Another model (or dimension) has its own matrix, so a model change
    re-embeds instead of ranking with foreign vectors.

    Thread-safe: each matrix has a lock, taken to look up, store and read vectors; embedding runs
    outside it (two searches may embed the same new row twice, and both store the same vector).
    Per-store search state other than vectors (the spelling vocabulary) belongs here too.
    """

    def __init__(self, store: Any, max_bytes: int = MAX_VECTOR_BYTES) -> None:
        self._store = weakref.ref(store)
        self._lock = threading.Lock()
        self._max_bytes = max_bytes
        self._np = numpy_or_none()
        # Least recently searched first.
        self._matrices: dict[tuple[str, str, int], _Matrix] = {}
        self._vocabularies: dict[tuple[str, tuple[str, ...]], tuple[int, CountedVocabulary]] = {}

    def vocabulary(
        self, table: str, columns: tuple[str, ...], texts: Callable[[], Iterable[str]]
    ) -> CountedVocabulary:
        """The words of ``table``'s rows (``texts()``: each row's ``columns`` joined) and how
        many rows hold each, counted once per version of the table."""
        store = self._store()
        version = store.version(table) if store is not None else -1
        key = (table, columns)
        with self._lock:
            known = self._vocabularies.get(key)
        if known is not None and known[0] == version:
            return known[1]
        vocabulary = counted_vocabulary(texts())
        with self._lock:
            self._vocabularies[key] = (version, vocabulary)
        return vocabulary

    def __len__(self) -> int:
        """How many rows have a slot, over every matrix."""
        with self._lock:
            matrices = list(self._matrices.values())
        return sum(len(m) for m in matrices)

    @property
    def nbytes(self) -> int:
        """The bytes of vectors allocated, over every matrix (at most ``max_bytes``)."""
        with self._lock:
            return sum(m.nbytes for m in self._matrices.values())

    def cosines(
        self,
        table: str,
        rows: Sequence[Mapping[str, Any]],
        texts: Sequence[str],
        embedder: Embedder,
        dim: int,
    ) -> Cosines:
        """The vectors of ``rows`` (their ``texts`` embedded by ``embedder``, ``dim``
        dimensions), embedding only rows whose text is not stored for this model."""
        key = (table, embedder.model_id, dim)
        matrix = self._matrix(key)
        self._forget_deleted(table, matrix)
        ids = [row.get("id") for row in rows]
        digests = [_digest(text) for text in texts]
        with matrix.lock:
            stored, missing = matrix.resolve(ids, digests, texts)
            generation = matrix.generation
        transient: list[int] = []
        for start in range(0, len(missing), EMBED_BATCH):
            batch = missing[start : start + EMBED_BATCH]
            fresh = embedder.embed_rows([texts[p] for p in batch])
            room = self._room_for(key, matrix)
            with matrix.lock:
                for offset, (position, vector) in enumerate(zip(batch, fresh, strict=True)):
                    wanted = len(missing) - start - offset
                    slot = matrix.slot_for(ids[position], wanted, room)
                    if slot is None:
                        transient.append(position)
                        continue
                    if matrix.store(slot, digests[position], vector):
                        stored[position] = slot
        # A slot rewritten, freed or moved meanwhile (here or by another search) is looked up
        # again before use (Cosines._current).
        found = (stored, transient, generation)
        return Cosines(matrix, found, (ids, digests, texts), embedder)

    def _matrix(self, key: tuple[str, str, int]) -> _Matrix:
        with self._lock:
            matrix = self._matrices.pop(key, None)
            if matrix is None:
                matrix = _Matrix(key[2], self._np)
            self._matrices[key] = matrix  # most recently searched last
            return matrix

    def _room_for(self, key: tuple[str, str, int], matrix: _Matrix) -> Callable[[int], int]:
        def room(wanted: int) -> int:
            """Bytes ``matrix`` may grow by (up to ``wanted``), evicting the least recently
            searched other matrices first."""
            with self._lock:
                if self._matrices.get(key) is not matrix:
                    return 0  # evicted while this search filled it: keep nothing more
                used = sum(m.nbytes for m in self._matrices.values())
                for other_key, other in list(self._matrices.items()):
                    if used + wanted <= self._max_bytes:
                        break
                    if other is not matrix:
                        del self._matrices[other_key]
                        used -= other.nbytes
                return max(0, min(wanted, self._max_bytes - used))

        return room

    def _forget_deleted(self, table: str, matrix: _Matrix) -> None:
        store = self._store()
        if store is None:
            return
        version = store.version(table)
        with matrix.lock:
            if matrix.version == version:
                return
        present = store._ids(table)
        with matrix.lock:
            matrix.forget(present)
            matrix.version = version


_caches: weakref.WeakKeyDictionary[Any, VectorCache] = weakref.WeakKeyDictionary()
_caches_lock = threading.Lock()


def vector_cache(store: Any) -> VectorCache:
    """The row-vector cache of ``store`` (a ``MemoryStore``), made on first use; shared by every
    backend over that store, so a writer's and a reader's facade see the same vectors."""
    with _caches_lock:
        cache = _caches.get(store)
        if cache is None:
            cache = _caches[store] = VectorCache(store)
        return cache
