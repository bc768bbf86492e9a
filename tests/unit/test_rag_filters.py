"""The rule parser on the four filter keys: phrasings, canonical values, claimed spans, the
labelled-set accuracy; and a caller's filter keys, checked and turned into query filters."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from persistence import Filter, Op
from rag_agent import understand
from rag_agent.understanding.conditions import FILTER_KEY_CONDITIONS, key_conditions
from rag_agent.understanding.filters import FILTER_KEYS, MAX_TEXT_LENGTH, normalize_filters

LABELLED = Path(__file__).resolve().parents[1] / "data" / "labelled_queries.jsonl"
NOW = dt.datetime(2025, 6, 18, 12, tzinfo=dt.UTC)


def load_labelled() -> list[dict[str, Any]]:
    """The labelled queries: ``{"text": ..., "expected": {...}}`` per line, ``expected`` by key
    (``id``, ``email``, ``company``, ``client_id``)."""
    with LABELLED.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def conditions(text: object) -> set[tuple[str, str, Any]]:
    """The conditions ``understand`` reads in ``text`` on ``leads``, as (column, op, value)."""
    found = understand(text, table="leads", now=NOW)  # type: ignore[arg-type]
    return {(c.column, c.op.value, c.value) for c in found.conditions}


def expected(filters: Mapping[str, Any]) -> set[tuple[str, str, Any]]:
    """The conditions the filter keys of ``filters`` stand for, as (column, op, value)."""
    return {(c.column, c.op.value, c.value) for c in key_conditions(filters, "rules")}


def by_key(text: str) -> dict[str, Any]:
    """The values ``understand`` reads in ``text`` for each filter key's condition."""
    found = understand(text, table="leads", now=NOW)
    values: dict[str, Any] = {}
    for key, (column, op) in FILTER_KEY_CONDITIONS.items():
        for condition in found.conditions:
            if (condition.column, condition.op) == (column, op):
                values.setdefault(key, condition.value)
    return values


@dataclass(frozen=True)
class FieldScore:
    """Per-field scores over a labelled set."""

    field: str
    precision: float
    recall: float
    exact: float  # share of queries where the field is right (present and equal, or absent)


def score_parser(items: Iterable[Mapping[str, Any]], parse: Any = by_key) -> dict[str, FieldScore]:
    """Precision, recall and exact-match rate per field of ``parse`` over ``items``."""
    items = list(items)
    scores: dict[str, FieldScore] = {}
    for key in FILTER_KEYS:
        tp = fp = fn = exact = 0
        for item in items:
            expected = item["expected"].get(key)
            got = parse(item["text"]).get(key)
            if got is not None and got == expected:
                tp += 1
            else:
                fp += got is not None
                fn += expected is not None
            exact += got == expected
        scores[key] = FieldScore(
            key,
            precision=tp / (tp + fp) if tp + fp else 1.0,
            recall=tp / (tp + fn) if tp + fn else 1.0,
            exact=exact / len(items),
        )
    return scores


class TestParsePhrasings:
    """Each phrasing from the issue yields exactly the expected conditions."""

    @pytest.mark.parametrize(
        ("text", "filters"),
        [
            ("find leads at acme", {"company": "acme"}),
            ("leads from Acme Inc.", {"company": "Acme Inc"}),
            ("company: Globex", {"company": "Globex"}),
            ("lead #42", {"id": 42}),
            ("client_id=7", {"client_id": 7}),
            ("EMAIL: BOB@ACME.COM", {"email": "bob@acme.com"}),
            ('leads at "Foo, Bar & Co"', {"company": "Foo, Bar & Co"}),
            ("leads at acme?!", {"company": "acme"}),
            (
                "lead 3F2A1B4C-1234-4ABC-8DEF-0123456789AB",
                {"id": "3f2a1b4c-1234-4abc-8def-0123456789ab"},
            ),
            (
                "lead #5 for client 2 at Acme with email a@acme.com",
                {"id": 5, "email": "a@acme.com", "company": "Acme", "client_id": 2},
            ),
        ],
    )
    def test_phrasing(self, text: str, filters: dict[str, Any]) -> None:
        """A documented phrasing reads exactly the conditions of these filter keys."""
        assert conditions(text) == expected(filters)

    @pytest.mark.parametrize("text", ["show me all leads", "top 10 leads", "", " "])
    def test_no_filter(self, text: str) -> None:
        """Text that names no filter yields no condition."""
        assert conditions(text) == set()

    def test_a_date_alone_names_no_filter_key(self) -> None:
        """A date range is read, and no id, e-mail, company or client beside it."""
        found = conditions("look at the leads from last week")
        assert {column for column, _, _ in found} == {"created_at"}

    def test_client_id_is_not_also_an_id(self) -> None:
        """A span claimed as client_id is not read again as the lead id."""
        assert conditions("client_id=7") == {("client_id", "eq", 7)}

    def test_email_domain_is_not_a_company(self) -> None:
        """The domain inside an email address is not read again as a company."""
        assert conditions("from bob@acme.com") == {("email", "ieq", "bob@acme.com")}

    def test_bigint_overflow_is_dropped(self) -> None:
        """An id beyond PostgreSQL's bigint is not read as a condition."""
        assert conditions("lead #99999999999999999999") == set()

    @pytest.mark.parametrize("text", [None, 42, b"lead #1", ["lead #1"]])
    def test_non_str_gives_empty(self, text: Any) -> None:
        """Anything that is not a str yields no condition instead of raising."""
        assert conditions(text) == set()

    def test_only_leading_text_is_parsed(self) -> None:
        """Text past MAX_TEXT_LENGTH is ignored, bounding the parser's work."""
        text = "x " * MAX_TEXT_LENGTH + "lead #42"
        assert conditions(text) == set()

    def test_nul_characters_never_reach_a_value(self) -> None:
        """A NUL in the text cannot end up in a condition's value."""
        found = conditions("leads at ac\x00me")
        assert all("\x00" not in str(value) for _, _, value in found)


class TestLabelledSet:
    """The labelled set (tests/data/labelled_queries.jsonl) is understood accurately: each
    filter key's condition on ``leads``, as the pipeline applies it without a model."""

    def test_set_is_large_enough(self) -> None:
        """At least 150 labelled queries, each naming only known fields."""
        items = load_labelled()
        assert len(items) >= 150
        assert all(set(item["expected"]) <= set(FILTER_KEYS) for item in items)

    def test_accuracy_per_field(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Every field reaches at least 0.97 exact match, precision and recall."""
        scores = score_parser(load_labelled())
        with capsys.disabled():
            for score in scores.values():
                print(
                    f"\n  {score.field:<10} precision={score.precision:.3f} "
                    f"recall={score.recall:.3f} exact={score.exact:.3f}",
                    end="",
                )
        for score in scores.values():
            assert score.exact >= 0.97, score
            assert score.precision >= 0.97, score
            assert score.recall >= 0.97, score

    def test_scorer_detects_errors(self) -> None:
        """The scoring helper itself counts false positives and misses."""
        items = [{"text": "a", "expected": {"company": "A"}}, {"text": "b", "expected": {}}]
        scores = score_parser(items, parse=lambda text: {"company": "B"})
        assert scores["company"].precision == 0.0
        assert scores["company"].recall == 0.0
        assert scores["company"].exact == 0.0
        assert scores["id"].exact == 1.0


class TestNormalizeFilters:
    """Filters from untrusted sources are validated into the canonical form."""

    def test_valid_values_are_canonicalised(self) -> None:
        """Numeric strings become ints, emails are lower-cased, companies trimmed."""
        raw = {"id": "42", "client_id": 7, "email": " A@X.IO ", "company": "  Acme  Inc. "}
        assert normalize_filters(raw) == {
            "id": 42,
            "email": "a@x.io",
            "company": "Acme  Inc".replace("  ", " "),
            "client_id": 7,
        }

    @pytest.mark.parametrize(
        "raw",
        [
            None,
            "id=1",
            [("id", 1)],
            {"id": True},
            {"id": -1},
            {"id": 1.5},
            {"email": "not an email"},
            {"company": ""},
            {"company": "x" * 500},
            {"company": "a\x00b"},
            {"table": "users"},
            {"id": "1; drop table leads"},
            {"id": "²"},
        ],
    )
    def test_invalid_values_drop(self, raw: Any) -> None:
        """Unknown keys and unusable values are dropped, never widened."""
        assert normalize_filters(raw) == {}

    def test_keys_in_canonical_order(self) -> None:
        """Keys come out in FILTER_KEYS order whatever the order given."""
        found = normalize_filters({"company": "Acme", "email": "a@b.io", "client_id": 3, "id": 9})
        assert list(found) == list(FILTER_KEYS)


class TestKeyConditions:
    """Canonical filter keys become literal-valued conditions (``run(filters={...})``)."""

    def test_translation(self) -> None:
        """company → icontains, email → ieq with the address as typed, ids → eq."""
        given = {"id": 1, "email": "a_b%c@x.io", "company": "Acme", "client_id": 2}
        assert tuple(c.to_filter() for c in key_conditions(given, "tool")) == (
            Filter("id", Op.EQ, 1),
            Filter("email", Op.IEQ, "a_b%c@x.io"),
            Filter("company_name", Op.ICONTAINS, "Acme"),
            Filter("client_id", Op.EQ, 2),
        )
        assert {c.source for c in key_conditions(given, "tool")} == {"tool"}

    def test_email_matches_literally_and_case_insensitively(self, store: Any) -> None:
        """The email filter matches the same address in any case, and no wildcard look-alike."""
        from persistence import create_persistence_agent, create_read_only_facade

        writer = create_persistence_agent(kind="memory", store=store)
        writer.write("leads", {"email": "A_B@X.IO"})
        writer.write("leads", {"email": "axb@x.io"})
        facade = create_read_only_facade(kind="memory", store=store)
        filters = [c.to_filter() for c in key_conditions({"email": "a_b@x.io"}, "tool")]
        page = facade.read("leads", filters)
        assert [row["email"] for row in page.rows] == ["A_B@X.IO"]
