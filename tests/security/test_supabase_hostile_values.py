"""Hostile values stay values on the way to PostgREST: SQL-injection corpus and grammar characters.

Every payload is sent as an ``eq``, ``in`` and ``icontains`` value. The request must decode back
to the literal, add no parameter, never carry an ``or``/``and`` logic tree, and — evaluated by
the PostgREST emulator — select exactly the rows the memory backend selects.
"""

from __future__ import annotations

import re

import httpx
import pytest

from persistence import Filter, InvalidQueryError, MemoryStore, Op, Query
from persistence.backends.memory import MemoryBackend
from tests.conftest import corpus_lines
from tests.support.http import ScriptedServer, backend_over, rows_response
from tests.support.postgrest import PostgrestEmulator, decode_query, parse_in_list

GRAMMAR = [",", ".", ":", "(", ")", '"', "\\", "*", "%", "_", "&", "="]
COMBINATIONS = [
    "a,b",
    'x")',
    '"),or=(id.gt.0',
    "eq.1&or=(id.gt.0)",
    "\\\\\\",
    '\\"',
    "*)",
    "%_*\\",
    "acme),id.gt.(0",
    "a=b&c=d",
    "  spaced  ",
    "+plus+",
    "#frag",
    "?q=1",
    "100%",
    "é ü ∑ 🙂",
    "",
]
SAFE_QUERY = re.compile(r"[A-Za-z0-9%._~=&-]*")


@pytest.fixture(scope="module")
def payloads() -> list[str]:
    lines = [line for line in corpus_lines() if "\x00" not in line]
    return [*GRAMMAR, *COMBINATIONS, *lines]


@pytest.fixture(scope="module")
def hostile_store(payloads: list[str]) -> MemoryStore:
    store = MemoryStore()
    store.insert(
        "leads",
        [{"email": p, "company_name": f"<{p}>"} for p in dict.fromkeys(payloads)]
        + [{"email": None, "company_name": None}],
    )
    return store


_SERVER = ScriptedServer([rows_response([], "*/0")])
_BACKEND = backend_over(_SERVER)


def sent(flt: Filter) -> httpx.Request:
    _BACKEND.read(Query("leads", filters=(flt,), limit=5))
    return _SERVER.requests.pop()


def decode_icontains(pattern: str) -> str:
    """Independently read an ``icontains`` operand: ``*`` around a literal (see below)."""
    assert pattern.startswith("*") and pattern.endswith("*") and len(pattern) >= 2
    return decode_literal(pattern[1:-1])


def decode_literal(pattern: str) -> str:
    """Independently read an ``ilike`` literal: escapes are literal, ``_`` stands for ``*``."""
    out: list[str] = []
    chars = iter(pattern)
    for char in chars:
        if char == "\\":
            escaped = next(chars)
            assert escaped in "\\%_", f"unexpected escape of {escaped!r}"
            out.append(escaped)
        else:
            assert char not in "%*", f"bare wildcard {char!r} in {pattern!r}"
            out.append("*" if char == "_" else char)
    return "".join(out)


def assert_shape(request: httpx.Request, column: str) -> str:
    raw = request.url.query.decode("ascii")
    assert SAFE_QUERY.fullmatch(raw), raw
    params = decode_query(raw)
    assert [key for key, _ in params] == ["select", column, "order", "limit"]
    return params[1][1]


class TestHostileValuesOnTheWire:
    def test_eq_values_decode_to_the_literal(self, payloads: list[str]) -> None:
        """``eq`` sends the payload verbatim after ``eq.``, as one parameter."""
        for payload in payloads:
            value = assert_shape(sent(Filter("email", Op.EQ, payload)), "email")
            assert value == f"eq.{payload}", payload

    def test_in_values_decode_to_the_literals(self, payloads: list[str]) -> None:
        """``in`` lists decode, by PostgREST's list grammar, to exactly the values sent."""
        for payload in payloads:
            value = assert_shape(sent(Filter("email", Op.IN, [payload, "x"])), "email")
            assert value.startswith("in.")
            assert parse_in_list(value[3:]) == [payload, "x"], payload

    def test_icontains_values_decode_to_the_literal(self, payloads: list[str]) -> None:
        """``icontains`` escapes every LIKE metacharacter; only ``*`` becomes a wildcard."""
        for payload in payloads:
            value = assert_shape(
                sent(Filter("company_name", Op.ICONTAINS, payload)), "company_name"
            )
            assert value.startswith("ilike.")
            assert decode_icontains(value[len("ilike.") :]) == payload, payload

    def test_ieq_values_decode_to_the_literal(self, payloads: list[str]) -> None:
        """``ieq`` is an ``ilike`` with no wildcard at all: it decodes to exactly the payload."""
        for payload in payloads:
            value = assert_shape(sent(Filter("email", Op.IEQ, payload)), "email")
            assert value.startswith("ilike.")
            assert decode_literal(value[len("ilike.") :]) == payload, payload

    def test_nul_is_refused_before_any_request(self) -> None:
        """A NUL character never reaches the wire: the filter itself is refused."""
        with pytest.raises(InvalidQueryError):
            Filter("email", Op.EQ, "a\x00b")


class TestHostileValuesSelectExactly:
    def test_icontains_selects_what_memory_selects(
        self, hostile_store: MemoryStore, payloads: list[str]
    ) -> None:
        """Through the emulator, each payload as icontains matches the memory backend's rows."""
        remote = backend_over(PostgrestEmulator(hostile_store))
        local = MemoryBackend(hostile_store)
        for payload in payloads[:300]:  # every grammar character plus a broad corpus slice
            query = Query("leads", filters=(Filter("company_name", Op.ICONTAINS, payload),))
            assert remote.read(query).rows == local.read(query).rows, payload

    def test_eq_ieq_and_in_select_what_memory_selects(self, payloads: list[str]) -> None:
        """Each payload as eq and in selects exactly the row holding it, among its neighbours;
        as ieq, the same rows as memory."""
        unique = list(dict.fromkeys(payloads))
        for start in range(0, len(unique), 60):  # small stores keep the scan cheap
            chunk = unique[start : start + 60]
            store = MemoryStore()
            store.insert("leads", [{"email": p} for p in chunk] + [{"email": None}])
            remote = backend_over(PostgrestEmulator(store))
            local = MemoryBackend(store)
            for payload in chunk:
                for flt in (
                    Filter("email", Op.EQ, payload),
                    Filter("email", Op.IN, [payload, "nobody@x.io"]),
                ):
                    query = Query("leads", filters=(flt,), columns=("id",))
                    expected = local.read(query)
                    assert len(expected.rows) == 1
                    assert remote.read(query).rows == expected.rows, payload
                # Payloads that differ only in case match each other: at least this one.
                query = Query("leads", filters=(Filter("email", Op.IEQ, payload),), columns=("id",))
                expected = local.read(query)
                assert expected.rows
                assert remote.read(query).rows == expected.rows, payload
