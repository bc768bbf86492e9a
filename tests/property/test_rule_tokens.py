"""The rule parser's one-pass look-ups find exactly what a plain scan finds: a phrase looked up by
its first stem (:func:`~rag_agent.understanding.rules.tokens.phrase_at`) is the longest phrase a
scan of every phrase meets, and the words kept claim by claim
(:func:`~rag_agent.understanding.rules.tokens.unclaimed`) are the words of the claimed text,
tokenised again; on generated texts, phrases and claims."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rag_agent.understanding.rules import columns
from rag_agent.understanding.rules.reading import Reading
from rag_agent.understanding.rules.sample_vocabulary import sample_vocabulary
from rag_agent.understanding.rules.tokens import (
    Token,
    Words,
    phrase_at,
    phrase_index,
    start_stems,
    tokenize,
    unclaimed,
)

# Few, related words, so that generated phrases often meet the text (stems alike: "leads"/"lead").
_WORDS = ["lead", "leads", "status", "new", "not", "inactive", "active", "won", "closed", "isn't",
          "o\u2019brien", "non-qualified", "a", "score", "x1", "Über", "ǅemal"]  # fmt: skip
_SEPARATORS = [" ", "  ", ", ", "'", "-", "_", "\x00", "'s "]
_TEXT = st.lists(st.tuples(st.sampled_from(_WORDS), st.sampled_from(_SEPARATORS)), max_size=12).map(
    lambda parts: "".join(word + sep for word, sep in parts)
)
_PHRASES = st.lists(
    st.lists(st.sampled_from(_WORDS), max_size=3).map(
        lambda words: tuple(t.stem for t in tokenize(" ".join(words)))
    ),
    max_size=8,
)


def _scanned(found: tuple[Token, ...], i: int, phrases: list[tuple[str, ...]]) -> int:
    """The plain scan: every phrase, longest first, compared at ``i``."""
    for phrase in sorted(phrases, key=len, reverse=True):
        if tuple(t.stem for t in found[i : i + len(phrase)]) == phrase:
            return len(phrase)
    return 0


@settings(max_examples=300, deadline=None)
@given(text=_TEXT, phrases=_PHRASES)
def test_indexed_phrase_is_the_scanned_phrase(text: str, phrases: list[tuple[str, ...]]) -> None:
    found = tokenize(text)
    index = phrase_index(phrases)
    for i in range(len(found) + 1):
        assert phrase_at(found, i, index) == _scanned(found, i, phrases)
    # Where a phrase may start by the index, and nowhere else.
    starts = Words(found).starts_in(index)
    # Exactly the indexes of the index's first stems, as the words' positions give them.
    at = Words(found).positions
    assert starts == sorted(i for first in index for i in at.get(first, ()))
    assert [i for i in range(len(found)) if _scanned(found, i, phrases)] == [
        i for i in starts if phrase_at(found, i, index)
    ]
    may_start = {s for t in found for s in start_stems(t.text)}
    assert Words(found).start_stems == may_start


_CLAIMS = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), max_size=5)


@settings(max_examples=300, deadline=None)
@given(text=_TEXT, claims=_CLAIMS)
def test_words_kept_claim_by_claim_are_the_claimed_texts_words(
    text: str, claims: list[tuple[int, int]]
) -> None:
    reading = Reading(text, "leads", sample_vocabulary())
    assert reading.words.tokens == tokenize(text)
    for start, end in claims:  # spans outside the text, reversed or empty included
        reading.claim(start, end)
        if start % 2:  # words read after some claims only: several claims pile up
            assert reading.words.tokens == tokenize(reading.text)
    assert reading.words.tokens == tokenize(reading.text)


@settings(max_examples=300, deadline=None)
@given(text=_TEXT, claims=st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), max_size=5))
def test_unclaimed_is_tokenised_again(text: str, claims: list[tuple[int, int]]) -> None:
    spans = [(min(a, b, len(text)), min(max(a, b), len(text))) for a, b in claims]
    masked = text
    for start, end in spans:
        masked = masked[:start] + "\x00" * (end - start) + masked[end:]
    assert unclaimed(tokenize(text), masked, spans) == tokenize(masked)


def _catalog_words() -> list[str]:
    """Words of the sample vocabulary's column names and learned values, with negating
    prefixes written onto some ("inactive", "non-qualified"): where the tables' phrases start."""
    found: set[str] = set()
    for table in sample_vocabulary().tables.values():
        for column in table.columns.values():
            found.update(column.words)
            for value in column.values or ():
                if isinstance(value, str):
                    found.update(value.replace("_", " ").split()[:2])
    prefixed = {prefix + word for word in sorted(found)[::5] for prefix in ("in", "un", "non-")}
    return sorted(found | prefixed | {"not", "with", "no", "leads", "status"})


_CATALOG_TEXT = st.lists(
    st.tuples(st.sampled_from(_catalog_words()), st.sampled_from([" ", " ", ", ", "_", "'s "])),
    max_size=10,
).map(lambda parts: "".join(word + sep for word, sep in parts))
_TABLES = sorted(sample_vocabulary().tables)


@settings(max_examples=300, deadline=None)
@given(text=_CATALOG_TEXT, table=st.sampled_from(_TABLES))
def test_the_columns_met_at_a_word_hold_every_column_read_there(text: str, table: str) -> None:
    """The columns :meth:`~.lexicon.Lexicon.met_at` gives at a word, in catalog order, hold
    every column whose name (as is, or after a negating prefix) or one-word value a walk over
    all columns meets there, so another table's report looks no further."""
    reading = Reading(text, "leads", sample_vocabulary())
    lexicon, tokens = reading.lexicon_of(table), reading.words.tokens
    for i, token in enumerate(tokens):
        met = lexicon.met_at(start_stems(token.text))
        order = list(lexicon.columns)
        assert [c.name for c in met] == sorted((c.name for c in met), key=order.index)
        senses = lexicon.values.get((token.stem,), [])
        for column in lexicon.columns.values():
            phrases = lexicon.phrase_index(column.name)
            read = (
                phrase_at(tokens, i, phrases) > 0
                or columns._flag_at(tokens, i, phrases) is not None
                or any(s.exact and s.column == column.name for s in senses)
            )
            if read:
                assert column in met, (text, table, token, column.name)


@settings(max_examples=100, deadline=None)
@given(table=st.sampled_from([*_TABLES, "unknown"]))
def test_the_triggers_besides_a_table_are_every_other_tables_triggers(table: str) -> None:
    reading = Reading("x", table, sample_vocabulary())
    others = [reading.lexicon_of(name) for name in _TABLES if name != table]
    assert reading.triggers_besides(table) == frozenset().union(*(o.triggers for o in others))
