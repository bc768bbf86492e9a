"""Questions generated from a random schema's vocabulary are read into the right filters: the
rules learn column names and values from the data (here, random ones), apply each value to the
column that holds it and never to another, and read numbers and flags on columns named by their
random words."""

from __future__ import annotations

import datetime as dt

from hypothesis import given, settings
from hypothesis import strategies as st

from persistence import MemoryStore, Op, create_read_only_facade
from persistence.vocabulary import SchemaVocabulary
from rag_agent.understanding.rules import understand

NOW = dt.datetime(2025, 6, 18, 12, tzinfo=dt.UTC)
#: Words that mean nothing to the rules (no table, framing, date, comparison or role word).
WORDS = [
    "amber",
    "birch",
    "cedar",
    "delta",
    "ember",
    "fjord",
    "garnet",
    "harbor",
    "indigo",
    "juniper",
    "koala",
    "lagoon",
    "maple",
    "nectar",
    "onyx",
    "pebble",
    "quartz",
    "raven",
    "saffron",
    "tundra",
    "umber",
    "violet",
    "willow",
    "yarrow",
    "zephyr",
    "cobalt",
    "dune",
    "falcon",
    "glacier",
    "heron",
    "iris",
    "jasper",
    "kelp",
    "lotus",
    "mango",
    "nimbus",
    "opal",
    "prairie",
    "quill",
    "reef",
    "sierra",
]  # a word list reads better as one string


@st.composite
def schemas(draw: st.DrawFn) -> tuple[dict[str, list[str]], str, str]:
    """Two category columns with disjoint values, a numeric and a flag column, random names."""
    words = draw(st.permutations(WORDS))
    categories = {f"{words[0]}_{words[1]}": words[2:5], f"{words[5]}": words[6:9]}
    return categories, f"{words[9]}_{words[10]}", f"is_{words[11]}"


def _vocabulary(
    categories: dict[str, list[str]], number: str, flag: str
) -> tuple[SchemaVocabulary, list[dict[str, object]]]:
    types: dict[str, str] = {"id": "bigint", number: "integer", flag: "boolean"}
    types.update({column: "text" for column in categories})
    store = MemoryStore(schema={"leads": types})
    rows = []
    for n in range(12):
        row: dict[str, object] = {"id": n + 1, number: n * 10, flag: n % 2 == 0}
        row.update({c: values[n % len(values)] for c, values in categories.items()})
        rows.append(row)
    store.insert("leads", rows)
    facade = create_read_only_facade(kind="memory", store=store)
    return SchemaVocabulary.learn(facade), rows


def _read(text: str, vocabulary: SchemaVocabulary) -> set[tuple[str, str, object]]:
    found = understand(text, table="leads", now=NOW, vocabulary=vocabulary)
    return {(c.column, Op(c.op).value, c.value) for c in found.conditions}


@settings(max_examples=40)
@given(schemas(), st.data())
def test_values_numbers_and_flags_of_a_random_schema(
    schema: tuple[dict[str, list[str]], str, str], data: st.DataObject
) -> None:
    categories, number, flag = schema
    vocabulary, _ = _vocabulary(categories, number, flag)
    column = data.draw(st.sampled_from(sorted(categories)))
    value = data.draw(st.sampled_from(categories[column]))
    words = column.replace("_", " ")

    # a value alone: the one column that holds it
    assert _read(f"{value} leads", vocabulary) == {(column, "eq", value)}
    # the column named with its value
    assert _read(f"leads whose {words} is {value}", vocabulary) == {(column, "eq", value)}
    # negated: not that value, on that column only
    assert _read(f"leads that are not {value}", vocabulary) == {(column, "neq", value)}
    # two values of the column: either
    other = next(v for v in categories[column] if v != value)
    assert _read(f"{value} or {other} leads", vocabulary) == {(column, "in", (value, other))}
    # a number on the numeric column named by its words
    limit = data.draw(st.integers(min_value=0, max_value=200))
    assert _read(f"leads with {number.replace('_', ' ')} above {limit}", vocabulary) == {
        (number, "gt", limit)
    }
    # a flag by its column's words, and its negation
    name = flag.removeprefix("is_")
    assert _read(f"{name} leads", vocabulary) == {(flag, "eq", True)}
    assert _read(f"leads that are not {name}", vocabulary) == {(flag, "eq", False)}


@settings(max_examples=25)
@given(schemas())
def test_no_value_is_applied_to_another_column(
    schema: tuple[dict[str, list[str]], str, str],
) -> None:
    """Every value any question names is applied to the column that holds it, never another."""
    categories, number, flag = schema
    vocabulary, _ = _vocabulary(categories, number, flag)
    holder = {value: column for column, values in categories.items() for value in values}
    for value, column in holder.items():
        for condition in _read(f"show me {value} leads please", vocabulary):
            assert condition[0] == column and condition[2] in (value, (value,))
