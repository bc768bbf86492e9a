"""The column rules' early returns read what the rules read without them: ``_writers`` on a
table with no value the writer's words mean, and ``_unknown_values`` on a text naming no
category column, leave the reading as the rule's full scan leaves it (the scans are kept here as
they were written before the early returns, and compared on every table of both schemas)."""

from __future__ import annotations

import functools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from persistence import Op, create_read_only_facade
from persistence.vocabulary import SchemaVocabulary, stem
from rag_agent.understanding.rules import columns
from rag_agent.understanding.rules.lexicon import Lexicon
from rag_agent.understanding.rules.reading import Reading, plural
from rag_agent.understanding.rules.sample_vocabulary import sample_vocabulary
from tests.data import second_schema


def _writers_scanned(reading: Reading, lexicon: Lexicon) -> None:
    for match in reading.finditer(columns._WRITER_RE, words=columns._WRITER_WORDS):
        senses = lexicon.values.get((stem("incoming" if match["in"] else "outgoing"),))
        if senses and len({s.column for s in senses}) == 1:
            reading.add(senses[0].column, Op.EQ, senses[0].value)
            reading.claim(*match.span())


def _unknown_values_scanned(reading: Reading, lexicon: Lexicon) -> None:
    tokens = reading.words.tokens
    at = reading.words.positions
    for column, phrase in lexicon.category_stems:
        if not phrase:
            continue
        for i in at.get(phrase[0], ()):
            length = len(phrase)
            if tuple(t.stem for t in tokens[i : i + length]) != phrase or i + length >= len(tokens):
                continue
            word = tokens[i + length]
            gap = reading.text[tokens[i + length - 1].end : word.start]
            if gap.strip(" :=") or word.text in columns._NOT_A_VALUE or not word.text.isalpha():
                continue
            known = ", ".join(str(v) for v in (column.values or ())[:12])
            reason = f"{word.text!r} is not a {column.name} of {plural(lexicon.table)} ({known})"
            reading.ignore(tokens[i].start, word.end, reason)
            return


@functools.cache
def _vocabularies() -> dict[str, SchemaVocabulary]:
    store = second_schema.memory_store()
    second_schema.load_memory(store)
    second = SchemaVocabulary.learn(create_read_only_facade(kind="memory", store=store))
    return {"sample": sample_vocabulary(), "second": second}


def _tables() -> list[tuple[str, str]]:
    return [(schema, table) for schema, v in _vocabularies().items() for table in v.tables]


@functools.cache
def _words(schema: str, table: str) -> list[str]:
    """The table's column names and values, the writer's words, and others."""
    words = {"from", "by", "we", "our", "us", "sent", "wrote", "customers", "clients", "leads",
             "replies", "messages", "incoming", "outgoing", "status", "stage", "is", "won", "x",
             ":", "=", "no", "new", "7", "Acme", "é", "'s", "the", "we sent", "from us",
             "our replies", "sent by us", "from customers", "by the leads"}  # fmt: skip
    found = _vocabularies()[schema].table(table)
    for column in found.columns.values() if found is not None else ():
        words.add(column.name.replace("_", " "))
        words.update(str(v) for v in (column.values or ())[:20])
    return sorted(words)


def _text(schema: str, table: str) -> st.SearchStrategy[str]:
    words = st.sampled_from(_words(schema, table))
    glue = st.sampled_from([" ", " ", "", ", ", ": ", "="])
    return st.lists(st.tuples(glue, words), max_size=10).map(
        lambda pairs: "".join(g + w for g, w in pairs).strip()
    )


def _state(reading: Reading) -> tuple[object, ...]:
    return (reading.text, list(reading.conditions), list(reading.ignored), reading.said)


@pytest.mark.parametrize(("schema", "table"), _tables())
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_the_column_rules_early_returns_change_nothing(
    schema: str, table: str, data: st.DataObject
) -> None:
    text = data.draw(_text(schema, table))
    case = data.draw(st.sampled_from([str.strip, str.lower, str.upper, str.title]))
    text = case(text) or "x"
    vocabulary = _vocabularies()[schema]
    # A synonym may give the table a value only one of the writer's words means.
    values = [w for w in _words(schema, table) if w.isalpha() and w.islower()]
    synonyms = data.draw(
        st.one_of(
            st.none(),
            st.builds(
                lambda word, value: {word: (value,)},
                st.sampled_from(["incoming", "outgoing"]),
                st.sampled_from(values),
            ),
        )
    )
    for new, old in (
        (columns._writers, _writers_scanned),
        (columns._unknown_values, _unknown_values_scanned),
    ):
        read = Reading(text, table, vocabulary, synonyms)
        scanned = Reading(text, table, vocabulary, synonyms)
        new(read, read.lexicon)
        old(scanned, scanned.lexicon)
        assert _state(read) == _state(scanned), (new.__name__, text)


def test_the_writer_words_are_read_where_a_table_has_their_values() -> None:
    """The early return does not hide the rule: on the sample's messages it still reads."""
    reading = Reading("messages from customers", "messages", sample_vocabulary())
    columns._writers(reading, reading.lexicon)
    assert [(c.column, c.value) for c in reading.conditions] == [("direction", "inbound")]
    assert re.fullmatch(r"messages \x00+", reading.text)
