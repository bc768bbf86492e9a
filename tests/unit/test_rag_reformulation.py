"""Reformulations: the design's order, only where they apply, never leaving no filter."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag_agent.reformulation import REFORMULATION_ORDER, reformulations, shorten_company_suffix


class TestReformulations:
    """``reformulations`` yields relaxed filter sets in order."""

    def test_full_order(self) -> None:
        """drop_email, then shorten_company_suffix, then drop_company, each relaxing the last."""
        steps = list(reformulations({"email": "a@x.io", "company": "Acme Inc.", "client_id": 7}))
        assert steps == [
            ("drop_email", {"company": "Acme Inc.", "client_id": 7}),
            ("shorten_company_suffix", {"company": "Acme", "client_id": 7}),
            ("drop_company", {"client_id": 7}),
        ]
        assert [reason for reason, _ in steps] == list(REFORMULATION_ORDER)

    def test_steps_apply_only_where_they_can(self) -> None:
        """No email and no suffix: only drop_company is tried."""
        assert list(reformulations({"company": "Acme", "id": 3})) == [("drop_company", {"id": 3})]

    @pytest.mark.parametrize(
        "filters", [{"email": "a@x.io"}, {"company": "Acme"}, {"id": 1}, {"client_id": 2}, {}]
    )
    def test_never_leaves_no_filter(self, filters: dict[str, Any]) -> None:
        """A lone filter is never dropped."""
        assert all(relaxed for _, relaxed in reformulations(filters))

    def test_lone_company_is_shortened_not_dropped(self) -> None:
        """A lone company with a suffix is shortened, then kept."""
        assert list(reformulations({"company": "Globex Corporation"})) == [
            ("shorten_company_suffix", {"company": "Globex"})
        ]

    def test_input_is_not_mutated(self) -> None:
        """The caller's dict is left as it was."""
        filters = {"email": "a@x.io", "company": "Acme Inc"}
        list(reformulations(filters))
        assert filters == {"email": "a@x.io", "company": "Acme Inc"}

    @given(
        st.dictionaries(
            st.sampled_from(["id", "email", "company", "client_id"]),
            st.text(min_size=1, max_size=20),
        )
    )
    def test_property_never_empty_and_ordered(self, filters: dict[str, Any]) -> None:
        """For any filters, no step is empty and steps follow the design's order."""
        steps = list(reformulations(filters))
        assert all(relaxed for _, relaxed in steps)
        reasons = [reason for reason, _ in steps]
        assert reasons == [r for r in REFORMULATION_ORDER if r in reasons]


class TestShortenCompanySuffix:
    """Legal suffixes are dropped from the end of a company name."""

    @pytest.mark.parametrize(
        ("name", "short"),
        [
            ("Acme Inc.", "Acme"),
            ("Acme, Inc.", "Acme"),
            ("Acme Inc", "Acme"),
            ("Contoso Ltd", "Contoso"),
            ("Fabrikam GmbH", "Fabrikam"),
            ("Umbrella Corp.", "Umbrella"),
            ("Foo Bar LLC", "Foo Bar"),
            ("Initech Co. Ltd.", "Initech"),
        ],
    )
    def test_shortened(self, name: str, short: str) -> None:
        """A trailing legal suffix is removed."""
        assert shorten_company_suffix(name) == short

    @pytest.mark.parametrize("name", ["Acme", "Incognito Labs", "Co", "Costco"])
    def test_nothing_to_shorten(self, name: str) -> None:
        """No suffix, or a name that is only a suffix, gives None."""
        assert shorten_company_suffix(name) is None
