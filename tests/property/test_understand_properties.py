"""Properties of ``understand``: total, deterministic, bounded, grounded, literal-valued."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from persistence import Op
from persistence.schema import TABLE_COLUMNS
from rag_agent.specs import Understanding
from rag_agent.understanding.filters import MAX_TEXT_LENGTH, understand
from rag_agent.understanding.rules import vocabulary
from rag_agent.understanding.rules.lexicon import SYNONYMS
from rag_agent.understanding.rules.sample_vocabulary import sample_vocabulary

# The sample's learned values: the rules may emit one without the text spelling it (a synonym
# or a word only it holds), never any other value.
LEARNED = sorted({
    value
    for table in sample_vocabulary().tables.values()
    for column in table.columns.values()
    for value in column.values or ()
    if isinstance(value, str)
})  # fmt: skip

NOW = dt.datetime(2025, 6, 18, 12, tzinfo=dt.UTC)
TABLES = st.one_of(st.sampled_from([None, *TABLE_COLUMNS]), st.text(max_size=10))
# Words the rules react to, so random requests reach every rule, mixed with arbitrary text.
FRAGMENTS = [
    *vocabulary.TABLE_WORDS, *LEARNED[:80], *SYNONYMS, "not", "except", "other than", "nor",
    "lead", "client", "campaign 3", "#", "id", "=", ":", "at", "from", "for", "by", "with",
    "company", "named", "about", "how many", "count", "score", "above", "between", "and",
    "at least", "steps", "CTO", "VP of", "head of", "sales", "without a", "phone", "title",
    "since", "before", "after", "in", "last", "past", "this", "week", "month", "year", "days",
    "ago", "March", "May", "Friday", "Q3", "2025", "2025-03-05", "yesterday", "we met",
    "older than", "newer than", "0", "9999", "99999",
    "Acme, Inc.", "O'Reilly", "&", "100%", "Yahoo!", "a@b.io", "o'neil+x@acme.example",
    "6f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f", "\x00", "'", '"', ",", ".", "?", "the", "logistics",
]  # fmt: skip
REQUESTS = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8)), max_size=14).map(
    " ".join
)
TEXTS = st.one_of(st.text(max_size=200), REQUESTS)
# Values the rules may emit without the text spelling them: the learned values.
CANONICAL = set(LEARNED)
OPERATORS = {Op.EQ, Op.IEQ, Op.NEQ, Op.IN, Op.GT, Op.GTE, Op.LT, Op.LTE, Op.ICONTAINS, Op.IS_NULL}


def _flat(text: str) -> str:
    return " ".join(text[:MAX_TEXT_LENGTH].replace("\x00", " ").casefold().split())


def grounded(value: Any, text: str) -> bool:
    """Whether ``value`` comes from ``text`` (or is computed, canonical or a boolean)."""
    if isinstance(value, bool | dt.datetime):
        return True
    if isinstance(value, int):
        return re.search(rf"(?<!\d)0*{value}(?!\d)", text) is not None
    if isinstance(value, tuple):
        return all(item in CANONICAL for item in value)
    if value in CANONICAL:
        return True
    flat, words = _flat(value), _flat(text)
    if flat in words:
        return True
    # Titles: "VP sales" from "vice president of sales" (only "VP" may be supplied).
    return flat.startswith("vp ") and all(word in words for word in flat.split()[1:])


def check(found: Understanding, text: str, table: str | None) -> None:
    """The invariants every understanding holds."""
    if table is not None:
        assert found.table == table  # the caller's table, known or not
    else:
        assert found.table is None or found.table in TABLE_COLUMNS
    read_table = found.table or vocabulary.DEFAULT_TABLE
    for condition in found.conditions:
        assert condition.op in OPERATORS  # never ILIKE: no text becomes a pattern
        if read_table in TABLE_COLUMNS:  # elsewhere the facade's own check decides
            assert condition.column in TABLE_COLUMNS[read_table]
        assert condition.source == "rules"
        assert grounded(condition.value, text), condition
        if isinstance(condition.value, dt.datetime):
            assert condition.value.tzinfo is dt.UTC
        assert "\x00" not in str(condition.value)
        condition.to_filter()  # a valid persistence filter
    for item in found.ignored:
        assert item.text and item.reason and "\x00" not in item.text


class TestUnderstandProperties:
    """``understand`` holds its invariants on any text."""

    @settings(max_examples=400)
    @given(TEXTS, TABLES)
    def test_never_raises_and_holds_invariants(self, text: str, table: str | None) -> None:
        """Any text gives valid, grounded, literal-valued conditions on real columns."""
        check(understand(text, table=table, now=NOW), text, table)

    @given(TEXTS, TABLES)
    def test_deterministic(self, text: str, table: str | None) -> None:
        """The same text, table and clock always give the same understanding."""
        assert understand(text, table=table, now=NOW) == understand(text, table=table, now=NOW)

    @settings(max_examples=50)
    @given(REQUESTS, st.text(min_size=1, max_size=50))
    def test_bounded_input(self, head: str, tail: str) -> None:
        """Only the first MAX_TEXT_LENGTH characters are read."""
        prefix = (head + " ") * (MAX_TEXT_LENGTH // (len(head) + 1) + 1)
        prefix = prefix[:MAX_TEXT_LENGTH]
        assert understand(prefix + tail, now=NOW) == understand(prefix, now=NOW)

    @given(st.from_type(object).filter(lambda value: not isinstance(value, str)))
    def test_non_text_reads_as_empty(self, value: Any) -> None:
        """Anything that is not a str understands nothing."""
        assert understand(value, now=NOW) == Understanding()
