"""The memory backend's ``word_similarity`` equals pg_trgm's on a real PostgreSQL server, value
for value (both are ``float4``), on random short strings of letters, digits, accented letters,
spaces, punctuation and underscores."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from persistence.search.trigram import similarity, word_similarity
from tests.conftest import PostgresDatabase

ALPHABET = "abcdeXYZ019 éÉßñ-_.,'@"
SHORT = st.text(alphabet=ALPHABET, max_size=10)
LONGER = st.text(alphabet=ALPHABET, max_size=40)


def _float4(value: float) -> float:
    result: float = struct.unpack("f", struct.pack("f", value))[0]
    return result


@pytest.fixture(scope="module")
def trgm(postgres_db: PostgresDatabase) -> Iterator[Any]:
    import psycopg

    postgres_db.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    with psycopg.connect(postgres_db.admin_dsn, autocommit=True) as conn:
        yield conn


class TestWordSimilarityMatchesPgTrgm:
    @settings(max_examples=400)
    @given(needle=SHORT, haystack=LONGER)
    @example(needle="Globx", haystack="Globex Industries")
    @example(needle="word", haystack="two words")
    @example(needle="aa", haystack="a a aa aaa")
    @example(needle="", haystack="")
    def test_random_strings(self, trgm: Any, needle: str, haystack: str) -> None:
        row = trgm.execute("SELECT word_similarity(%s, %s)", (needle, haystack)).fetchone()
        assert word_similarity(needle, haystack) == _float4(row[0])

    def test_threshold_is_the_server_default(self, trgm: Any) -> None:
        (value,) = trgm.execute("SHOW pg_trgm.word_similarity_threshold").fetchone()
        assert float(value) == 0.6


class TestSimilarityMatchesPgTrgm:
    """Spelling correction's candidate rule (``similarity`` at least 0.3) is pg_trgm's ``%``
    on PostgreSQL and :func:`similarity` in memory: equal values, equal candidates."""

    @settings(max_examples=400)
    @given(a=st.text(alphabet="abcdeflmnorst", max_size=12), b=SHORT)
    @example(a="word", b="two words")
    @example(a="canncel", b="cancel")
    @example(a="", b="")
    def test_random_strings(self, trgm: Any, a: str, b: str) -> None:
        row = trgm.execute("SELECT similarity(%s, %s), %s %% %s", (a, b, a, b)).fetchone()
        assert similarity(a, b) == _float4(row[0])
        # pg_trgm's default similarity_threshold is the correction's 0.3
        assert (similarity(a, b) >= 0.3) is row[1]
