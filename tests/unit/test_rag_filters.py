"""The rule parser: phrasings, canonical values, claimed spans, and the labelled-set accuracy."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from persistence import Filter, Op
from rag_agent.understanding.filters import (
    FILTER_KEYS,
    MAX_TEXT_LENGTH,
    filters_to_query,
    normalize_filters,
    parse_filters_from_text,
)

LABELLED = Path(__file__).resolve().parents[1] / "data" / "labelled_queries.jsonl"


def load_labelled() -> list[dict[str, Any]]:
    """The labelled queries: ``{"text": ..., "expected": {...}}`` per line."""
    with LABELLED.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


@dataclass(frozen=True)
class FieldScore:
    """Per-field scores over a labelled set."""

    field: str
    precision: float
    recall: float
    exact: float  # share of queries where the field is right (present and equal, or absent)


def score_parser(
    items: Iterable[Mapping[str, Any]], parse: Any = parse_filters_from_text
) -> dict[str, FieldScore]:
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
    """Each phrasing from the issue yields exactly the expected filters."""

    @pytest.mark.parametrize(
        ("text", "expected"),
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
    def test_phrasing(self, text: str, expected: dict[str, Any]) -> None:
        """A documented phrasing parses to exactly these filters."""
        assert parse_filters_from_text(text) == expected

    @pytest.mark.parametrize(
        "text", ["show me all leads", "top 10 leads", "look at the leads from last week", "", " "]
    )
    def test_no_filter(self, text: str) -> None:
        """Text that names no filter yields an empty dict."""
        assert parse_filters_from_text(text) == {}

    def test_client_id_is_not_also_an_id(self) -> None:
        """A span claimed as client_id is not read again as the lead id."""
        assert parse_filters_from_text("client_id=7") == {"client_id": 7}

    def test_email_domain_is_not_a_company(self) -> None:
        """The domain inside an email address is not read again as a company."""
        assert parse_filters_from_text("from bob@acme.com") == {"email": "bob@acme.com"}

    def test_keys_in_canonical_order(self) -> None:
        """Keys come out in FILTER_KEYS order whatever the order in the text."""
        found = parse_filters_from_text("company Acme, email a@b.io, client 3, id 9")
        assert list(found) == [k for k in FILTER_KEYS if k in found]

    def test_bigint_overflow_is_dropped(self) -> None:
        """An id beyond PostgreSQL's bigint is not returned as a filter."""
        assert "id" not in parse_filters_from_text("lead #99999999999999999999")

    @pytest.mark.parametrize("text", [None, 42, b"lead #1", ["lead #1"]])
    def test_non_str_gives_empty(self, text: Any) -> None:
        """Anything that is not a str yields no filters instead of raising."""
        assert parse_filters_from_text(text) == {}

    def test_only_leading_text_is_parsed(self) -> None:
        """Text past MAX_TEXT_LENGTH is ignored, bounding the parser's work."""
        text = "x " * MAX_TEXT_LENGTH + "lead #42"
        assert parse_filters_from_text(text) == {}

    def test_nul_characters_never_reach_a_value(self) -> None:
        """A NUL in the text cannot end up in a filter value."""
        found = parse_filters_from_text("leads at ac\x00me")
        assert all("\x00" not in str(v) for v in found.values())


class TestLabelledSet:
    """The labelled set (tests/data/labelled_queries.jsonl) is parsed accurately."""

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


class TestFiltersToQuery:
    """Canonical filters become literal-valued query filters."""

    def test_translation(self) -> None:
        """company → icontains, email → ieq with the address as typed, ids → eq."""
        query = filters_to_query(
            {"id": 1, "email": "a_b%c@x.io", "company": "Acme", "client_id": 2}
        )
        assert query == (
            Filter("id", Op.EQ, 1),
            Filter("email", Op.IEQ, "a_b%c@x.io"),
            Filter("company_name", Op.ICONTAINS, "Acme"),
            Filter("client_id", Op.EQ, 2),
        )

    def test_email_matches_literally_and_case_insensitively(self, store: Any) -> None:
        """The email filter matches the same address in any case, and no wildcard look-alike."""
        from persistence import create_persistence_agent, create_read_only_facade

        writer = create_persistence_agent(kind="memory", store=store)
        writer.write("leads", {"email": "A_B@X.IO"})
        writer.write("leads", {"email": "axb@x.io"})
        facade = create_read_only_facade(kind="memory", store=store)
        page = facade.read("leads", filters_to_query({"email": "a_b@x.io"}))
        assert [row["email"] for row in page.rows] == ["A_B@X.IO"]
