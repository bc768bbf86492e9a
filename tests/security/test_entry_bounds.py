"""Bounds on every argument, checked at the entry: sort keys, integer sizes, text sizes.

Each class of hostile argument goes through every entry point (facade, tools, ``run``): a call
either answers or refuses with a typed error whose message is short and names the bound, never
with a raw exception, and never after work proportional to the argument.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from persistence import (
    ColumnNotAllowedError,
    Filter,
    InvalidQueryError,
    MemoryStore,
    Op,
    Order,
    PersistenceError,
    Query,
    ReadOnlyPersistenceFacade,
    create_read_only_facade,
)
from persistence.errors import brief_repr
from persistence.query import MAX_COLUMNS, MAX_NUMBER_DIGITS, MAX_ORDER_KEYS
from rag_agent import RAGAgent, RAGSettings, create_rag_agent
from rag_agent.tools import build_tools
from rag_agent.tools.input import MAX_INPUT_CHARS, MAX_TEXT_ARGUMENT_CHARS, bounded

#: The longest error message any refusal here may carry.
MAX_MESSAGE = 300
LEAD_COLUMNS = ["id", "email", "company_name", "score", "status", "title", "created_at"]


@pytest.fixture(scope="module")
def facade(sample_store: MemoryStore) -> ReadOnlyPersistenceFacade:
    return create_read_only_facade("memory", store=sample_store)


@pytest.fixture(scope="module")
def agent(sample_store: MemoryStore) -> RAGAgent:
    return create_rag_agent(
        kind="memory", store=sample_store, llm=False, settings=RAGSettings(cache_disabled=True)
    )


@pytest.fixture(scope="module")
def tools(agent: RAGAgent) -> dict[str, Any]:
    return {tool.name: tool for tool in build_tools(agent)}


def _error(envelope: Any) -> dict[str, Any] | None:
    data = envelope if isinstance(envelope, dict) else envelope.to_json()
    error = data["metadata"].get("error")
    return error if isinstance(error, dict) else None


def _tool_error(tools: dict[str, Any], name: str, args: dict[str, Any]) -> dict[str, Any] | None:
    """The error of a tool call's envelope; the call itself must not raise."""
    message = tools[name].invoke({"name": name, "args": args, "id": "c1", "type": "tool_call"})
    return _error(message.artifact)


class TestOrderKeys:
    """Sort keys: a few, distinct; refused before any row is compared."""

    @given(
        keys=st.lists(
            st.tuples(st.sampled_from(LEAD_COLUMNS), st.booleans()), min_size=0, max_size=40
        )
    )
    def test_any_order_list(self, facade: ReadOnlyPersistenceFacade, keys: list[Any]) -> None:
        """A read sorts by up to MAX_ORDER_KEYS distinct columns; anything else is refused as
        InvalidQueryError with a short message."""
        order = [Order(column, descending) for column, descending in keys]
        distinct = len({column for column, _ in keys}) == len(keys)
        flt = [Filter("status", Op.EQ, "new")]
        if len(keys) <= MAX_ORDER_KEYS and distinct:
            page = facade.read("leads", flt, order=order, limit=3)
            assert len(page.rows) == 3
        else:
            with pytest.raises(InvalidQueryError) as caught:
                facade.read("leads", flt, order=order, limit=3)
            assert len(str(caught.value)) <= MAX_MESSAGE

    def test_query_counts_keys_before_reading_them(self) -> None:
        """An endless iterable of sort keys is refused after MAX_ORDER_KEYS + 1 of them."""

        def endless() -> Any:
            while True:
                yield "score"

        with pytest.raises(InvalidQueryError, match=f"at most {MAX_ORDER_KEYS}"):
            Query("leads", order=endless())

    @pytest.mark.parametrize("count", [MAX_ORDER_KEYS + 1, 5_000, 20_000])
    def test_query_table_refuses_many_keys(self, tools: dict[str, Any], count: int) -> None:
        """query_table answers many sort keys with an error naming the bound (the keys', or
        past 100,000 characters the whole input's)."""
        order = [f"{'-' if i % 2 else ''}{LEAD_COLUMNS[i % 7]}" for i in range(count)]
        error = _tool_error(tools, "query_table", {"table": "leads", "order": order})
        assert error is not None
        assert re.search(rf"at most ({MAX_ORDER_KEYS}|{MAX_INPUT_CHARS})\b", error["message"])

    def test_unknown_order_column(self, facade: ReadOnlyPersistenceFacade) -> None:
        """A sort key on a column the table does not have is refused."""
        with pytest.raises(ColumnNotAllowedError):
            facade.read("leads", [Filter("status", Op.EQ, "new")], order=["nope"])

    def test_repeated_columns_project_once(self) -> None:
        """Thousands of repeated column names project each column once; past MAX_COLUMNS
        distinct names the read is refused."""
        assert Query("leads", columns=["email"] * 5_000 + ["id"]).columns == ("email", "id")
        with pytest.raises(InvalidQueryError, match=str(MAX_COLUMNS)):
            Query("leads", columns=[f"c{i}" for i in range(MAX_COLUMNS + 1)])


class TestMemoryReadsLeaveTheLoop:
    def test_awaitable_reads_run_in_worker_threads(self, sample_store: MemoryStore) -> None:
        """The memory backend's awaitable reads, counts, aggregates (distinct values among
        them) and searches run off the event loop's thread, so a long one never stalls the
        loop."""
        facade = create_read_only_facade("memory", store=sample_store)
        threads: list[int] = []
        backend = facade._backend()
        for name in ("read", "count", "aggregate", "search"):
            original = getattr(backend, name)

            def noting(*args: Any, _original: Callable[..., Any] = original) -> Any:
                threads.append(threading.get_ident())
                return _original(*args)

            setattr(backend, name, noting)

        async def main() -> int:
            flt = [Filter("status", Op.EQ, "new")]
            await facade.aread("leads", flt, limit=2)
            await facade.acount("leads", flt)
            await facade.aaggregate("leads", flt, group_by=["status"])
            await facade.asearch("inquiries", "refund", k=2, mode="keyword")
            await facade.adistinct_values("leads", "status")
            return threading.get_ident()

        loop_thread = asyncio.run(main())
        assert len(threads) == 5 and loop_thread not in threads


#: Integers from one digit to well past Python's 4,300-digit printing limit.
DIGITS = st.integers(min_value=1, max_value=12_000)


def _huge(digits: int, negative: bool) -> int:
    value = 10 ** (digits - 1)
    return -value if negative else value


class TestIntegerSizes:
    """An integer of any size is a typed refusal or an answer, never a raw ValueError."""

    @given(digits=DIGITS, negative=st.booleans())
    def test_facade_entry_points(
        self, facade: ReadOnlyPersistenceFacade, digits: int, negative: bool
    ) -> None:
        value = _huge(digits, negative)
        calls: list[Callable[[], Any]] = [
            lambda: facade.read("leads", [Filter("score", Op.EQ, value)]),
            lambda: facade.count("leads", [Filter("id", Op.GTE, value)]),
            lambda: facade.search("inquiries", "refund", filters=[Filter("id", Op.LT, value)]),
            lambda: facade.aggregate("leads", [Filter("score", Op.IN, (value, 1))]),
            lambda: facade.read("leads", [Filter("status", Op.EQ, "new")], limit=value),
            lambda: facade.read("leads", [Filter("status", Op.EQ, "new")], offset=value),
            lambda: facade.distinct_values("leads", "status", limit=value),
        ]
        for call in calls:
            try:
                call()
            except PersistenceError as exc:
                assert len(str(exc)) <= MAX_MESSAGE
        if digits > MAX_NUMBER_DIGITS:
            with pytest.raises(InvalidQueryError, match=f"more than {MAX_NUMBER_DIGITS} digits"):
                Filter("score", Op.EQ, value)

    @given(digits=DIGITS, negative=st.booleans())
    def test_tools_and_run(
        self, tools: dict[str, Any], agent: RAGAgent, digits: int, negative: bool
    ) -> None:
        value = _huge(digits, negative)
        calls = [
            ("query_table", {"table": "leads", "filters": {"score": value}}),
            ("query_table", {"table": "leads", "filters": {"status": "new"}, "limit": value}),
            ("count_rows", {"table": "leads", "filters": [{"column": "id", "value": value}]}),
            ("search_table", {"table": "inquiries", "text": "refund", "filters": {"id": value}}),
            ("aggregate_table", {"table": "leads", "filters": {"score": value}}),
            ("query_leads", {"id": value}),
            ("query_leads", {"score_min": value}),
        ]
        for name, args in calls:
            error = _tool_error(tools, name, args)
            if error is not None:
                assert len(error["message"]) <= MAX_MESSAGE
            if digits > MAX_NUMBER_DIGITS:
                assert error is not None and str(MAX_NUMBER_DIGITS) in error["message"]
        for envelope in (
            agent.run("leads", filters={"id": value}, return_json=True),
            agent.run("leads at acme", limit=value, return_json=True),
            agent.read("leads", [Filter("status", Op.EQ, "new")], offset=value, return_json=True),
        ):
            error = _error(envelope)
            assert error is None or len(error["message"]) <= MAX_MESSAGE

    def test_brief_repr_never_raises(self) -> None:
        """The error messages' rendering of a value is short for any size, and never raises."""
        for value in (10**5000, -(10**20000), "x" * 10**6, list(range(10**4)), b"\x00" * 999):
            assert len(brief_repr(value)) <= 60


#: Text sizes around, and far past, the per-argument bound.
SIZES = st.one_of(
    st.integers(0, 2 * MAX_TEXT_ARGUMENT_CHARS),
    st.sampled_from([MAX_TEXT_ARGUMENT_CHARS, MAX_TEXT_ARGUMENT_CHARS + 1, 2_000_000]),
)


class TestTextSizes:
    """Every text argument is bounded at the entry, with an error naming the bound."""

    @given(size=SIZES)
    def test_tool_text_arguments(self, tools: dict[str, Any], size: int) -> None:
        text = "a" * size
        calls = [
            ("query_leads", {"email": text + "@x.io"}),
            ("query_leads", {"company": text or "a"}),
            ("query_table", {"table": "leads", "filters": {"company_name": text}}),
            ("search_table", {"table": "inquiries", "text": text or "a"}),
            ("rag_agent", {"query": text or "a"}),
            ("count_rows", {"table": text or "a"}),
            ("describe_table", {"table": text or "a"}),
        ]
        for name, args in calls:
            error = _tool_error(tools, name, args) if name != "describe_table" else None
            if name == "describe_table":
                message = tools[name].invoke(args)
                error = {"message": message} if "error" in message else None
            longest = max(len(v) for v in args.values() if isinstance(v, str))
            longest = max(longest, *(len(v) for v in args.get("filters", {}).values()), 0)
            if longest > MAX_TEXT_ARGUMENT_CHARS:
                assert error is not None and str(MAX_TEXT_ARGUMENT_CHARS) in error["message"]
            if error is not None:
                assert len(error["message"]) <= 2 * MAX_MESSAGE

    @given(size=st.integers(0, 3 * 4_096) | st.just(2_000_000))
    def test_run_question(self, agent: RAGAgent, size: int) -> None:
        """run refuses a question over RAG_MAX_QUESTION_CHARS, naming the setting."""
        limit = agent.settings.max_question_chars
        envelope = agent.run("leads at acme " + "x" * size, return_json=True)
        error = _error(envelope)
        if 14 + size > limit:
            assert error is not None and "RAG_MAX_QUESTION_CHARS" in error["message"]
            assert str(limit) in error["message"]
            assert "ranking" not in envelope["metadata"]
        else:
            assert error is None or "RAG_MAX_QUESTION_CHARS" not in error["message"]

    def test_plain_text_tool_input(self, tools: dict[str, Any]) -> None:
        """A plain-text tool input is bounded as a whole, then as a question."""
        for size, bound in ((MAX_INPUT_CHARS + 1, MAX_INPUT_CHARS), (10_000, 4_096)):
            content = tools["rag_agent"].invoke("x" * size)  # the compact view's text
            assert '"error"' in content and f"at most {bound}" in content

    def test_bounded_flags_before_formatting(self) -> None:
        """Input LangChain would format with str() (a 5,000-digit integer raises there) is
        replaced by a cheap stand-in before it is formatted."""
        for value in ({"a": 10**5000}, {"a": ["x" * 5_000]}, {"k" * 5_000: 1}):
            assert repr(bounded(value)).startswith("<")
        assert bounded({"a": 1, "b": ["x"]}) == {"a": 1, "b": ["x"]}
