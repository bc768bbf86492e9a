"""Properties of redaction: a redacted value never holds the original, and provenance verifies
for the original row and fails for any tampered one."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from persistence import RedactedRow, RedactionPolicy
from persistence.values.canonical import canonical_json, canonical_value
from rag_agent.envelope import build_records, row_hash

KEY = "property test key, long enough"
SPECS = ("mask", "mask:full", "mask:email", "mask:phone", "mask:initials", "hash", "drop")
texts = st.text(min_size=1, max_size=40)
emails = st.builds(
    "{}@{}.{}".format,
    st.text(st.characters(categories=("L", "N")), min_size=1, max_size=12),
    st.from_regex(r"[a-z]{1,10}", fullmatch=True),
    st.sampled_from(("io", "com", "example")),
)
phones = st.from_regex(r"\+?[0-9 ()-]{1,20}", fullmatch=True)
values = st.one_of(texts, emails, phones, st.integers(), st.floats(allow_nan=False))
NOW = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)


def shown(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


# What redaction itself writes: pseudonyms ("hash:" and hex digits) and the mask ("***"). A value
# made only of these characters ("0", "a1", "*") may occur in any output by coincidence, so the
# property is asked of values holding at least one other character (every realistic e-mail,
# phone number, name or note does).
OWN_ALPHABET = frozenset("0123456789abcdef*:hs")
foreign = values.filter(lambda v: bool(set(shown(v)) - OWN_ALPHABET))


@settings(max_examples=300, deadline=None)
@given(value=foreign, spec=st.sampled_from(SPECS))
def test_redacted_output_never_contains_the_value(value: Any, spec: str) -> None:
    """Whatever the style, the redacted field, the record and its provenance (as JSON) never
    hold the original value's text."""
    policy = RedactionPolicy({"leads": {"secret": spec}}, key=KEY)
    row = policy.redact_row("leads", {"id": 0, "secret": value})
    raw = shown(value)
    if spec == "drop":
        assert "secret" not in row
    else:
        assert raw not in shown(row["secret"])
    (record,) = build_records([row], source="persistence.leads", retrieved_at=NOW)
    text = json.dumps(record.model_dump(mode="json"), ensure_ascii=False)
    # The record's own words (field, method and style names, the source, the timestamp, JSON
    # punctuation): a value that is a piece of them is no leak.
    (bare,) = build_records([{"id": 0}], source="persistence.leads", retrieved_at=NOW)
    skeleton = " ".join(
        (json.dumps(bare.model_dump(mode="json")), *SPECS, "method style commitment redacted")
    )
    if raw not in skeleton:
        assert raw not in text


rows = st.fixed_dictionaries(
    {"id": st.integers(1, 10**6)},
    optional={
        "email": emails,
        "phone": phones,
        "first_name": texts,
        "notes": texts,
        "score": st.integers(),
    },
)
rules = st.fixed_dictionaries(
    {},
    optional={
        "email": st.sampled_from(SPECS),
        "phone": st.sampled_from(SPECS),
        "first_name": st.sampled_from(SPECS),
        "notes": st.sampled_from(SPECS),
        "score": st.sampled_from(SPECS),
    },
)


@settings(max_examples=200, deadline=None)
@given(row=rows, columns=rules, data=st.data())
def test_provenance_verifies_original_and_refuses_tampering(
    row: dict[str, Any], columns: dict[str, str], data: st.DataObject
) -> None:
    """row_hash verifies over the record as shown; source_hash and the commitments verify for
    the original and fail once any original value is changed."""
    policy = RedactionPolicy({"leads": columns}, key=KEY)
    redacted = policy.redact_row("leads", row)
    record = json.loads(
        json.dumps(
            build_records([redacted], source="persistence.leads", retrieved_at=NOW)[0].model_dump(
                mode="json"
            )
        )
    )
    provenance = record.pop("provenance")
    assert row_hash(record) == provenance["row_hash"]
    present = {c for c in columns if c in row}
    if not present:
        assert not isinstance(redacted, RedactedRow) and "source_hash" not in provenance
        return
    source_hash, notes = provenance["source_hash"], provenance["redacted"]
    assert set(notes) == present
    assert policy.verify("leads", row, record, source_hash, notes)
    for column in present:
        assert policy.verify_field(
            "leads", row["id"], column, row[column], notes[column]["commitment"]
        )
    column = data.draw(st.sampled_from(sorted(row)))
    replacement = data.draw(values.filter(lambda v: v != row[column] and type(v) is not bool))
    tampered = {**row, column: replacement}
    assert not policy.verify("leads", tampered, record, source_hash, notes)
    if column in present:
        assert not policy.verify_field(
            "leads", row["id"], column, replacement, notes[column]["commitment"]
        )
    other = RedactionPolicy({"leads": columns}, key="a different key, long enough")
    assert not other.verify("leads", row, record, source_hash, notes)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text()
    | st.datetimes(timezones=st.none() | st.timezones())
    | st.dates()
    | st.uuids()
    | st.decimals(allow_nan=False),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(value=json_values)
def test_canonical_json_has_one_spelling(value: Any) -> None:
    """The fast path (orjson) writes exactly what the reference definition writes: the canonical
    values through ``json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False)``."""
    reference = json.dumps(
        canonical_value(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ).encode("utf-8")
    assert canonical_json(value) == reference


# -- configurations: rules fail closed ----------------------------------------------------------

ALL_SPECS = (*SPECS, "keep")
# How much each spec hides: conflicting rules for one column take the strictest.
STRICTNESS = {"keep": 0, "mask:email": 1, "mask:phone": 1, "mask:initials": 1, "hash": 2}
STRICTNESS |= {"mask": 3, "mask:full": 3, "drop": 4}


@given(specs=st.lists(st.sampled_from(ALL_SPECS), min_size=1, max_size=6), value=foreign)
def test_conflicting_rules_take_the_strictest(specs: list[str], value: Any) -> None:
    """However many rules name one column, in any order, the strictest applies: a ``keep``
    after a ``mask`` never brings the value back."""
    text = ",".join(f"leads.phone={spec}" for spec in specs)
    policy = RedactionPolicy.parse(text, key=KEY)
    strictest = max(STRICTNESS[spec] for spec in specs)
    rule = policy.columns("leads").get("phone")
    if strictest == 0:
        assert rule is None
        return
    method, style = rule  # type: ignore[misc]
    spec = method if style is None else f"{method}:{style}"
    assert STRICTNESS[spec] == strictest
    redacted = policy.redact_row("leads", {"id": 1, "phone": value})
    # The field as redacted, not the row's JSON: its braces, quotes and key names would hold a
    # value such as "," by coincidence.
    assert "phone" not in redacted or shown(value) not in str(redacted["phone"])


COLUMNS = st.sampled_from(("email", "phone", "title", "emial", "phnoe", "notes_x", "id"))
KNOWN = frozenset({"id", "email", "phone", "title"})


@given(
    rules=st.dictionaries(
        st.sampled_from(("leads", "leeds")), st.dictionaries(COLUMNS, st.sampled_from(SPECS))
    ),
    default=st.dictionaries(COLUMNS, st.sampled_from(SPECS), max_size=2),
)
def test_unknown_tables_and_columns_are_refused(
    rules: dict[str, dict[str, str]], default: dict[str, str]
) -> None:
    """A rule naming a table not read or a column the backend lacks is a configuration error;
    any other configuration is accepted."""
    from persistence import ConfigurationError

    policy = RedactionPolicy(rules, default=default, key=KEY)
    wrong = ("leeds" in rules) or any(
        set(columns) - KNOWN for columns in (*rules.values(), default)
    )
    try:
        policy.check_columns({"leads"}, lambda table: KNOWN if table == "leads" else None)
    except ConfigurationError as exc:
        assert wrong and exc.variable == "RAG_REDACT"
    else:
        assert not wrong
