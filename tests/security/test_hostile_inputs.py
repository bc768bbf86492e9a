"""Hostile input through every entry point, on memory, PostgreSQL and the Supabase adapter.

Every line of the shared SQL-injection corpus, plus our own cases (identifier tricks, LIKE and
PostgREST metacharacters, 1 MB values, Unicode look-alikes, NUL bytes, lone surrogates as
non-UTF-8 input decodes to), goes through ``facade.read``, ``RAGAgent.run`` and each LangChain
tool. The outcome must be a literal match or a typed error: never an exception out of a tool or
``run()``, never a row that does not literally match, and the stored data unchanged.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from persistence import (
    ColumnNotAllowedError,
    Filter,
    InvalidQueryError,
    Op,
    QueryTimeoutError,
    TableNotAllowedError,
)
from persistence.query import MAX_IN_VALUES, MAX_TEXT_VALUE_LENGTH
from persistence.values.like import fold_case
from rag_agent.untrusted import unwrap_boundary
from tests.conftest import corpus_lines
from tests.faults.worlds import (
    BACKENDS,
    TYPED_INPUT_ERRORS,
    World,
    envelope_problems,
    invoke_tool,
    open_world,
    seed_leads,
)
from tests.security.test_allow_list import BYPASS_COLUMNS, BYPASS_TABLES

MEGABYTE = 1_000_000
METACHARACTERS = [
    "%", "_", "\\", "*", "%%", "_%", "a%", "%a", "\\%", "\\\\", "*acme*", "acme%", "acm_",
    "(", ")", ",", ".", ":", '"', "'", "`", "or=(id.gt.0)", "&select=*", "eq.acme", "not.is.null",
    "%25", "%2C", "+", "#", "?", "/", "..", "acme),id.gt.(0", 'x")', "\\u0000", "$1", "$$",
    "E'\\x41'", "U&'\\0041'", ":name", "?|", "@>", "::text",
]  # fmt: skip
UNICODE = [
    " ", "\t", "\n", "\r\n", "\u200b", "ａｃｍｅ", "аcme", "ACME", "AcMe", "ß", "İstanbul",
    "🙂", "\u202eemca", "\ufeffacme", "ünïcödé", "Ünïcödé ß İstanbul 🙂",
]  # fmt: skip
NUL_AND_UNDECODABLE = ["acme\x00", "\x00", "a\x00' OR 1=1 --", "\udcff", "caf\udce9", "\ud800x"]
HUGE = ["a" * MEGABYTE, "%" * MEGABYTE, "acme " + "_" * MEGABYTE, "'" * MEGABYTE]
OWN_CASES = [*METACHARACTERS, *UNICODE, *NUL_AND_UNDECODABLE, *HUGE]
IDENTIFIER_TRICKS = [
    *BYPASS_TABLES, *BYPASS_COLUMNS, "public.\"leads\"", "leads AS l", "(select 1)", "leads\u200b",
    "LEADS\x00", "lead\udcffs", "pg_catalog.pg_authid", "leads where 1=1", "id desc", "-id",
]  # fmt: skip
STORED_SAMPLE_STEP = 37  # every 37th corpus line is also stored as data, so literal hits exist


@pytest.fixture(scope="module")
def corpus() -> list[str]:
    """Every corpus line."""
    return corpus_lines()


@pytest.fixture(scope="module")
def values(corpus: list[str]) -> list[str]:
    """Every corpus line and every own case: the hostile values."""
    return [*corpus, *OWN_CASES]


@pytest.fixture(scope="module", params=BACKENDS)
def world(request: pytest.FixtureRequest, corpus: list[str]) -> Iterator[World]:
    """One backend seeded with the base leads and a sample of payloads stored as data."""
    rows = seed_leads([*corpus[::STORED_SAMPLE_STEP], *METACHARACTERS, *UNICODE])
    with open_world(request.param, rows, request) as world:
        yield world


@pytest.fixture
def unchanged(world: World) -> Iterator[None]:
    """The stored data is the same after the test as before it."""
    before = world.checksum()
    yield
    assert world.checksum() == before


def _holds(op: Op, column: str, value: str, row: dict[str, Any]) -> bool:
    if op is Op.ICONTAINS:
        return value.lower() in str(row[column]).lower()
    if op is Op.IEQ:
        return row[column] is not None and fold_case(row[column]) == fold_case(value)
    return bool(row[column] == value)


def expected_ids(world: World, predicate: Callable[[dict[str, Any]], bool]) -> list[int]:
    """Ids of the seeded rows ``predicate`` selects, in id order."""
    return sorted(row_id for row_id, row in world.rows.items() if predicate(row))


def unstorable(value: str, world: World) -> bool:
    """A value no store can take (a NUL, a lone surrogate), or longer than a filter value may be
    (``MAX_TEXT_VALUE_LENGTH``, refused before any backend is asked)."""
    too_long = len(value) > MAX_TEXT_VALUE_LENGTH
    return too_long or "\x00" in value or any("\ud800" <= c <= "\udfff" for c in value)


def allowed(value: str) -> frozenset[str]:
    """Error types an envelope may carry for ``value``: a timeout only for 1 MB inputs."""
    if len(value) >= MEGABYTE:
        return TYPED_INPUT_ERRORS | {"QueryTimeoutError"}
    return TYPED_INPUT_ERRORS


def typed_refusal(call: Callable[[], object], *errors: type[Exception]) -> str | None:
    """``None`` if ``call`` raised one of ``errors``, else what happened instead."""
    try:
        result = call()
    except errors:
        return None
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc)[:120]}"
    return f"returned {str(result)[:120]}"


@pytest.mark.usefixtures("unchanged")
class TestFacadeRead:
    def test_values_match_literally_or_are_refused(self, world: World, values: list[str]) -> None:
        """Each input, as an icontains or (alternately) eq value, selects exactly the rows holding
        it literally, or is refused as InvalidQueryError when no store could hold it."""
        problems: list[str] = []
        hits = 0
        for index, value in enumerate(values):
            op, column = ((Op.ICONTAINS, "company_name"), (Op.EQ, "email"), (Op.IEQ, "email"))[
                index % 3
            ]
            try:
                page = world.facade.read("leads", [Filter(column, op, value)], columns=["id"])
            except InvalidQueryError:
                if not unstorable(value, world):
                    problems.append(f"{op.value} {value[:60]!r} refused")
                continue
            except QueryTimeoutError:
                # A 1 MB pattern of escaped wildcards can outrun the statement timeout: that
                # timeout is the defence, and its typed error the expected outcome.
                if len(value) < MEGABYTE:
                    problems.append(f"{op.value} {value[:60]!r} timed out")
                continue
            except Exception as exc:
                problems.append(f"{op.value} {value[:60]!r}: {type(exc).__name__}: {exc}")
                continue
            want = expected_ids(world, functools.partial(_holds, op, column, value))
            got = sorted(row["id"] for row in page.rows)
            hits += bool(got)
            if got != want or page.total_count != len(want):
                problems.append(f"{op.value} {value[:60]!r}: got {got}, want {want}")
        assert problems == []
        assert hits > 20  # the stored payloads and metacharacters were found, literally

    def test_values_as_identifiers_are_refused(self, world: World, values: list[str]) -> None:
        """Each input as a table, column or sort key is refused before the backend."""
        problems = []
        for name in [*values, *IDENTIFIER_TRICKS]:
            read, count = world.facade.read, world.facade.count
            outcomes = {
                "table": typed_refusal(functools.partial(read, name), TableNotAllowedError),
                "count": typed_refusal(functools.partial(count, name), TableNotAllowedError),
                "column": typed_refusal(
                    functools.partial(read, "leads", columns=[name]),
                    ColumnNotAllowedError,
                    InvalidQueryError,
                ),
                "order": typed_refusal(
                    functools.partial(read, "leads", order=[name]),
                    ColumnNotAllowedError,
                    InvalidQueryError,
                ),
            }
            problems += [f"{k} {name[:60]!r}: {v}" for k, v in outcomes.items() if v]
        assert problems == []

    def test_longest_in_list(self, world: World, corpus: list[str]) -> None:
        """A ``MAX_IN_VALUES``-element ``in`` list selects exactly its literal members (over
        PostgREST, when the GET URL cannot hold it, it is InvalidQueryError); one more value is
        always refused, before any backend is asked."""
        members = [*corpus, *METACHARACTERS, *(f"nobody{i}@x.io" for i in range(MAX_IN_VALUES))]
        members = list(
            dict.fromkeys(m for m in members if "\x00" not in m and len(m) <= MAX_TEXT_VALUE_LENGTH)
        )[:MAX_IN_VALUES]
        flt = Filter("email", Op.IN, tuple(members))
        try:
            page = world.facade.read("leads", [flt], columns=["id"])
        except InvalidQueryError as exc:
            assert world.kind == "supabase" and "PostgREST URL" in str(exc)
        else:
            wanted = set(members)
            assert sorted(r["id"] for r in page.rows) == expected_ids(
                world, lambda r: r["email"] in wanted
            )
            assert page.total_count > 20
        with pytest.raises(InvalidQueryError, match=f"at most {MAX_IN_VALUES}"):
            Filter("email", Op.IN, (*members, "one too many"))


@pytest.mark.usefixtures("unchanged")
class TestRun:
    def test_free_text_never_raises_and_never_widens(self, world: World, values: list[str]) -> None:
        """run() answers every input (raw, as a company, as an e-mail) with a checked envelope."""
        problems: list[str] = []
        for value in values:
            for text in (value, f"leads at {value}", f"lead with email {value}"):
                try:
                    envelope = world.agent.run(text, return_json=True)
                except Exception as exc:  # the contract under test: this must never happen
                    problems.append(f"run({text[:60]!r}) raised {type(exc).__name__}: {exc}")
                    continue
                found = envelope_problems(envelope, world, allowed_errors=allowed(value))
                problems += [f"{text[:60]!r}: {p}" for p in found]
        assert problems == []

    def test_hostile_table_names_are_typed_errors(self, world: World, values: list[str]) -> None:
        """run(table=...) with any hostile name is TableNotAllowedError in the envelope."""
        problems = []
        for name in [*values, *IDENTIFIER_TRICKS]:
            envelope = world.agent.run("leads at acme", table=name, return_json=True)
            error = envelope["metadata"].get("error") or {}
            if error.get("type") != "TableNotAllowedError" or envelope["records"]:
                problems.append(f"{name[:60]!r}: {envelope['metadata']}")
        assert problems == []

    @pytest.mark.parametrize(
        "arguments",
        [
            {"text": b"leads at acme"},
            {"text": None},
            {"text": ["leads at acme"]},
            {"text": "leads at acme", "limit": -1},
            {"text": "leads at acme", "limit": "10; DROP TABLE leads"},
            {"text": "leads at acme", "limit": True},
            {"text": "leads at acme", "include_raw": "yes"},
        ],
    )
    def test_malformed_arguments_are_typed_errors(
        self, world: World, arguments: dict[str, Any]
    ) -> None:
        """Non-text input and bad page arguments give InvalidQueryError, not an exception."""
        arguments = dict(arguments)
        text = arguments.pop("text")
        envelope = world.agent.run(text, return_json=True, **arguments)
        assert envelope["metadata"]["error"]["type"] == "InvalidQueryError"
        assert envelope["records"] == []

    def test_an_offset_past_any_table_is_an_empty_page_or_a_typed_error(self, world: World) -> None:
        """An offset beyond 64 bits never reaches a driver as an overflow."""
        envelope = world.agent.run("leads at acme", offset=2**70, return_json=True)
        assert envelope["records"] == []
        assert envelope_problems(envelope, world) == []


def _tool_cases(value: str) -> dict[str, list[object]]:
    """Per tool, its arguments carrying ``value`` in every position a caller controls."""
    return {
        "query_leads": [
            {"query": value},
            {"company": value},
            {"email": value, "company": "acme"},
            {"id": value},
            {"status": value, "title": value},
            {"company": "acme", "created_after": value, "score_min": 1},
            {"created_before": value, "count_only": True},
            value,
        ],
        "query_table": [
            {"table": "leads", "filters": [{"column": "company_name", "op": "icontains", "value": value}]},  # noqa: E501
            {"table": "leads", "filters": {"email": value}},
            {"table": "leads", "filters": [{"column": "email", "op": "in", "value": [value, "ann@acme.io"]}]},  # noqa: E501
            {"table": value},
            {"table": "leads", "columns": [value]},
            {"table": "leads", "order": value, "filters": {"client_id": 1}},
            {"table": "leads", "filters": [{"column": value, "op": "eq", "value": 1}]},
            {"table": "leads", "filters": [{"column": "email", "op": "ieq", "value": value}]},
            {"table": "leads", "ranges": [{"column": "created_at", "gte": value, "lt": value}]},
            {"table": "leads", "ranges": [{"column": value, "gt": 1}], "count_only": True},
            {"table": "leads", "filters": [{"column": "id", "op": "eq", "value": value}]},
            value,
        ],
        "rag_agent": [
            {"query": value},
            {"query": "leads at acme", "table": value},
            {"metadata": {"filters": [{"column": "company_name", "op": "icontains",
                                       "value": value}], "source": value}},
            {"metadata": {"filters": [{"column": "title", "op": "ieq", "value": value}]}},
            {"metadata": {"filters": [{"column": value, "op": "gte", "value": value}]}},
            value,
        ],
        "deliver_data": [{"data": value, "destination": value}],
    }  # fmt: skip


def tool_problems(world: World, index: int, value: str) -> list[str]:
    """What is wrong with each tool's answer to ``value`` (in the argument position the input's
    ``index`` picks): a raise, an envelope failing its checks, a delivery that was not refused."""
    problems = []
    for name, cases in _tool_cases(value).items():
        args = cases[index % len(cases)]
        try:
            answer = invoke_tool(world.tools[name], args)
        except Exception as exc:  # the contract under test: this must never happen
            problems.append(f"{name} {str(args)[:80]} raised {type(exc).__name__}: {exc}")
            continue
        if name == "deliver_data":
            if answer != {"status": "DISABLED"}:
                problems.append(f"deliver_data answered {answer}")
            continue
        found = envelope_problems(answer, world, allowed_errors=allowed(value))
        problems += [f"{name} {str(args)[:80]}: {p}" for p in found]
    return problems


@pytest.mark.usefixtures("unchanged")
class TestTools:
    def test_every_tool_answers_every_input(self, world: World, values: list[str]) -> None:
        """Each tool answers each input with a checked envelope (deliver_data: DISABLED).

        Every input goes through every tool once; the argument position it takes turns with the
        input's index, so each position sees an even share of the corpus.
        """
        problems = [p for i, value in enumerate(values) for p in tool_problems(world, i, value)]
        assert problems == []
        assert {len(_tool_cases(value)) for value in values} == {4}  # every input, four tools

    def test_hostile_identifiers_are_refused_by_query_table(self, world: World) -> None:
        """query_table refuses every identifier trick as table, column and filter column."""
        tool = world.tools["query_table"]
        problems = []
        for name in IDENTIFIER_TRICKS:
            for args in (
                {"table": name},
                {"table": "leads", "columns": [name]},
                {"table": "leads", "filters": {name: "x"}},
            ):
                error = invoke_tool(tool, args)["metadata"].get("error") or {}
                if error.get("type") not in {
                    "TableNotAllowedError", "ColumnNotAllowedError", "InvalidQueryError",
                    "ToolInputError",
                }:  # fmt: skip
                    problems.append(f"{args}: {error}")
        assert problems == []


def _nested(depth: int) -> dict[str, Any]:
    root: dict[str, Any] = {}
    node = root
    for _ in range(depth):
        node["a"] = {}
        node = node["a"]
    return root


def _shapes() -> list[tuple[str, object]]:
    """Payload shapes no schema expects: deep, cyclic, binary, huge."""
    cyclic: dict[str, Any] = {"table": "leads"}
    cyclic["filters"] = cyclic
    cyclic_list: list[Any] = ["leads"]
    cyclic_list.append(cyclic_list)
    fan: dict[str, Any] = {}
    fan["x"] = fan["y"] = fan["z"] = fan  # each level fans out three ways
    return [
        ("nested 5000 deep", _nested(5000)),
        ("nested filters", {"table": "leads", "filters": _nested(5000)}),
        ("nested company", {"company": _nested(2000), "query": "leads at acme"}),
        ("nested JSON text", '{"a":' * 100_000 + "1" + "}" * 100_000),
        ("nested list text", "[" * 100_000),
        ("unbalanced braces", "{" * 100_000),
        ("cyclic mapping", cyclic),
        ("cyclic list", {"table": "leads", "filters": cyclic_list}),
        ("fan-out cycle", {"table": "leads", "filters": fan}),
        ("bytes", b"leads at acme"),
        ("non-UTF-8 bytes", b"\xff\xfe\xfd leads"),
        ("bytes values", {"table": "leads", "filters": {"email": b"\xff"}, "company": b"\xc3("}),
        ("non-string keys", {1: "a", (2, 3): "b"}),
        ("1 MB JSON", '{"query": "' + "a" * MEGABYTE + '"}'),
        ("100k filters", {"table": "leads", "filters": [{"column": "id", "op": "eq", "value": 1}] * 100_000}),  # noqa: E501
        ("a set", {"leads", "acme"}),
        ("a float", float("nan")),
    ]  # fmt: skip


@pytest.mark.usefixtures("unchanged")
class TestToolPayloadShapes:
    @pytest.mark.parametrize(
        "tool_name", ["query_leads", "query_table", "rag_agent", "deliver_data"]
    )
    def test_malformed_payloads_are_answered(self, world: World, tool_name: str) -> None:
        """Deep, cyclic, binary and huge payloads get an envelope (or DISABLED), never raise."""
        tool = world.tools[tool_name]
        problems = []
        for label, payload in _shapes():
            try:
                answer = invoke_tool(tool, payload)
            except Exception as exc:
                problems.append(f"{label}: raised {type(exc).__name__}: {str(exc)[:100]}")
                continue
            if tool_name == "deliver_data":
                ok = answer == {"status": "DISABLED"}
                problems += [] if ok else [f"{label}: {answer}"]
            else:
                problems += [f"{label}: {p}" for p in envelope_problems(answer, world)]
        assert problems == []

    async def test_async_invocation_refuses_deep_input(self, world: World) -> None:
        """The async path refuses overly nested input the same way."""
        content = await world.tools["query_table"].ainvoke({"table": "leads", "x": _nested(5000)})
        envelope = json.loads(unwrap_boundary(content))
        assert envelope["metadata"]["error"]["type"] == "ToolInputError"
        assert "nested deeper" in envelope["metadata"]["error"]["message"]
