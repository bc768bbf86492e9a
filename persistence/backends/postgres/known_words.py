"""Words a table's spelling pass left as typed, remembered in process, so that a search text
made only of such words skips the spelling pass: no probe of the words table, no lookup
(:func:`~persistence.backends.postgres.words.words_to_look_up`).

A word some row holds is never corrected (:mod:`persistence.search.spelling`), nor one the words
table offered no correction for (each word is corrected by its own candidates alone), so a text
whose every looked-up word is known needs no vocabulary at all. Only words the words table
answered are kept, for :data:`KNOWN_WORD_SECONDS` each, at most :data:`MAX_KNOWN_WORDS` per table
and set of columns (the oldest go first); a correction is never kept. A stale entry can only
leave a word as typed that a fresh lookup might have corrected (the word left every row, or a
word one edit from it entered enough rows, within that time): never a correction, so never a
word of rows the reader may not see. For the same time such a text gets no note when the words
table has since become unreadable (dropped, its grant revoked, row-level security on).

Thread-safe: one lock guards the entries.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence

__all__ = ["KNOWN_WORD_SECONDS", "MAX_KNOWN_WORDS", "KnownWords"]

#: How long a word the words table held counts as known: ``rag-agent index`` rewrites the table.
KNOWN_WORD_SECONDS = 60.0
#: Words kept per table and set of columns: a search text's vocabulary, not the table's.
MAX_KNOWN_WORDS = 4_096


class KnownWords:
    """Words known to be in a words table, per key (the table and the columns searched)."""

    def __init__(
        self,
        *,
        seconds: float = KNOWN_WORD_SECONDS,
        limit: int = MAX_KNOWN_WORDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._seconds = seconds
        self._limit = limit
        self._clock = clock
        self._lock = threading.Lock()
        self._words: dict[Hashable, OrderedDict[str, float]] = {}

    def hold(self, key: Hashable, words: Sequence[str]) -> bool:
        """Whether every one of ``words`` is known under ``key`` (none expired)."""
        now = self._clock()
        with self._lock:
            known = self._words.get(key)
            if known is None:
                return False
            for word in words:
                seen = known.get(word)
                if seen is None or now - seen >= self._seconds:
                    return False
        return True

    def add(self, key: Hashable, words: Iterable[str]) -> None:
        """Remember ``words`` as held under ``key``, now."""
        now = self._clock()
        with self._lock:
            known = self._words.setdefault(key, OrderedDict())
            for word in words:
                known[word] = now
                known.move_to_end(word)
            while len(known) > self._limit:
                known.popitem(last=False)
