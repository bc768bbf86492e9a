"""Reformulations: the design's order, only where they apply, never leaving no filter."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from persistence import MemoryStore, Op, create_persistence_agent, create_read_only_facade
from rag_agent import Condition, RAGAgent, RAGSettings, build_tools
from rag_agent.pipeline.reformulation import relaxations, shorten_company_suffix
from rag_agent.understanding.conditions import key_conditions, query_filters_view
from rag_agent.untrusted import unwrap_boundary

#: The deterministic reformulations, in the design's order.
ORDER = ("drop_email", "shorten_company_suffix", "drop_company")


def steps(filters: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``relaxations`` of the conditions of filter keys, each step shown as ``query_filters``."""
    return [
        (reason, query_filters_view(relaxed))
        for reason, relaxed in relaxations(key_conditions(filters, "rules"))
    ]


class TestReformulations:
    """``relaxations`` yields relaxed conditions in order."""

    def test_full_order(self) -> None:
        """drop_email, then shorten_company_suffix, then drop_company, each relaxing the last."""
        email = Condition("email", Op.IEQ, "a@x.io")
        company = Condition("company_name", Op.ICONTAINS, "Acme Inc.")
        client = Condition("client_id", Op.EQ, 7)
        shortened = Condition("company_name", Op.ICONTAINS, "Acme")
        assert list(relaxations((email, company, client))) == [
            ("drop_email", (company, client)),
            ("shorten_company_suffix", (shortened, client)),
            ("drop_company", (client,)),
        ]

    def test_steps_apply_only_where_they_can(self) -> None:
        """No email and no suffix: only drop_company is tried."""
        assert steps({"company": "Acme", "id": 3}) == [("drop_company", {"id": 3})]

    @pytest.mark.parametrize(
        "filters", [{"email": "a@x.io"}, {"company": "Acme"}, {"id": 1}, {"client_id": 2}, {}]
    )
    def test_never_leaves_no_filter(self, filters: dict[str, Any]) -> None:
        """A lone condition is never dropped."""
        assert all(relaxed for _, relaxed in relaxations(key_conditions(filters, "rules")))

    def test_lone_company_is_shortened_not_dropped(self) -> None:
        """A lone company with a suffix is shortened, then kept."""
        assert steps({"company": "Globex Corporation"}) == [
            ("shorten_company_suffix", {"company": "Globex"})
        ]

    @given(
        st.dictionaries(
            st.sampled_from(["id", "email", "company", "client_id"]),
            st.text(min_size=1, max_size=20),
        )
    )
    def test_property_never_empty_and_ordered(self, filters: dict[str, Any]) -> None:
        """For any conditions, no step is empty and steps follow the design's order."""
        found = list(relaxations(key_conditions(filters, "rules")))
        assert all(relaxed for _, relaxed in found)
        reasons = [reason for reason, _ in found]
        assert reasons == [r for r in ORDER if r in reasons]


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


class TestRelaxationsKeepTheQuestion:
    def test_an_identifying_condition_is_never_dropped_for_a_broader_one(self) -> None:
        """Company and a status: the suffix may go, the company may not (only the status would
        be left, answering "qualified leads" for "qualified leads at Nowhere Ltd")."""
        conditions = (
            Condition("status", Op.EQ, "qualified"),
            Condition("company_name", Op.ICONTAINS, "Nowhere Ltd"),
        )
        assert [reason for reason, _ in relaxations(conditions)] == ["shorten_company_suffix"]

    def test_an_email_goes_only_when_another_identifying_condition_stays(self) -> None:
        """E-mail and a date range: nothing is relaxed; e-mail and a company: the e-mail goes."""
        dated = (
            Condition("email", Op.IEQ, "nobody@x.io"),
            Condition("created_at", Op.GTE, "2020-01-01"),
        )
        assert list(relaxations(dated)) == []
        with_company = (*dated, Condition("company_name", Op.ICONTAINS, "Acme"))
        assert next(reason for reason, _ in relaxations(with_company)) == "drop_email"

    def test_a_callers_explicit_condition_is_never_dropped(self) -> None:
        """A tool's e-mail or company is what was asked: it is not dropped (a suffix may still be
        shortened)."""
        conditions = (
            Condition("email", Op.IEQ, "nobody@x.io", "tool"),
            Condition("company_name", Op.ICONTAINS, "Acme Corp", "tool"),
        )
        assert [reason for reason, _ in relaxations(conditions)] == ["shorten_company_suffix"]


class TestRelaxedRuns:
    def test_no_run_answers_a_broader_question_than_asked(self, store: MemoryStore) -> None:
        """A status plus an unknown company finds nothing rather than every qualified lead; a
        tool's unknown e-mail with a date finds nothing rather than every lead since then."""
        writer = create_persistence_agent(kind="memory", store=store)
        writer.batch(
            "leads",
            [
                {"email": f"p{i}@acme.io", "status": "qualified", "company_name": "Acme"}
                for i in range(5)
            ],
        )
        agent = RAGAgent(
            create_read_only_facade(kind="memory", store=store), settings=RAGSettings()
        )
        free = agent.run("qualified leads at Nonexistent Widgets Ltd", return_json=True)
        assert free["metadata"]["total_count"] == 0 and free["records"] == []
        tool = build_tools(agent, content="full")[0].invoke(
            {"email": "nobody@nowhere.example", "created_after": "2020-01-01"}
        )
        envelope = json.loads(unwrap_boundary(tool))
        assert envelope["metadata"]["total_count"] == 0 and envelope["records"] == []
