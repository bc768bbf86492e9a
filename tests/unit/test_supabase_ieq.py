"""``ieq`` over PostgREST: an ``ilike`` with every wildcard escaped, exactly, on the wire."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from persistence import Filter, MemoryBackend, MemoryStore, Op, Query
from persistence.backends.supabase.postgrest.encoding import (
    filter_params,
    ieq_pattern,
    needs_client_check,
)
from tests.support.http import ScriptedServer, backend_over, rows_response
from tests.support.postgrest import PostgrestEmulator

ROWS = [
    {"email": "Ann@Acme.IO"},
    {"email": "a*b@x.io"},
    {"email": "axb@x.io"},
    {"email": "A_B@X.IO"},
    {"email": "a%b@x.io"},
    {"email": "a\\b@x.io"},
    {"email": "STRAẞE@x.io"},
    {"email": None},
]


def emulated(store: MemoryStore, **options: int) -> ScriptedServer:
    """A recording server whose every answer comes from the PostgREST emulator over ``store``."""
    return ScriptedServer([PostgrestEmulator(store, **options)])


@pytest.fixture
def store() -> MemoryStore:
    store = MemoryStore()
    store.insert("leads", ROWS)
    return store


class TestIeqEncoding:
    """The ``ilike`` operand matches the whole value and nothing else."""

    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            ("Ann@Acme.IO", "ilike.Ann@Acme.IO"),
            ("a_b%c\\d", "ilike.a\\_b\\%c\\\\d"),
            ("a*b", "ilike.a_b"),
            ("", "ilike."),
            ('a,b.c:(d)"e', 'ilike.a,b.c:(d)"e'),
        ],
    )
    def test_exact_parameter(self, value: str, expected: str) -> None:
        """``%``, ``_`` and ``\\`` are escaped, ``*`` narrows to ``_``; nothing is quoted."""
        assert filter_params(Filter("email", Op.IEQ, value)) == ("email", expected)

    def test_no_surrounding_wildcards(self) -> None:
        """Unlike icontains, nothing is added around the literal."""
        assert ieq_pattern("ann") == "ann"

    def test_only_a_star_needs_the_client_check(self) -> None:
        """A ``*`` makes the server filter wider than ieq; any other value does not."""
        assert needs_client_check(Filter("email", Op.IEQ, "a*b"))
        assert not needs_client_check(Filter("email", Op.IEQ, "a%_\\b"))


class TestIeqRequests:
    """What goes over HTTP, and what comes back."""

    def test_one_request_with_the_escaped_value(self) -> None:
        """A read is one GET with ``email=ilike.<escaped value>`` among the usual parameters."""
        server = ScriptedServer([rows_response([{"id": 1}], "0-0/1")])
        backend_over(server).read(
            Query("leads", filters=(Filter("email", Op.IEQ, "A_B@X.IO"),), limit=10)
        )
        assert len(server.requests) == 1
        assert server.params() == [
            ("select", "*"),
            ("email", "ilike.A\\_B@X.IO"),
            ("order", "id.asc"),
            ("limit", "10"),
        ]
        assert server.requests[0].url.query == (
            b"select=%2A&email=ilike.A%5C_B%40X.IO&order=id.asc&limit=10"
        )

    def test_wildcards_in_the_value_match_only_themselves(self, store: MemoryStore) -> None:
        """Through the emulator, ``a_b`` finds ``A_B`` and not ``a%b``; ``a%b`` only ``a%b``."""
        backend = backend_over(emulated(store))

        def emails(value: str) -> list[str]:
            query = Query("leads", filters=(Filter("email", Op.IEQ, value),))
            return [row["email"] for row in backend.read(query).rows]

        assert emails("ann@acme.io") == ["Ann@Acme.IO"]
        assert emails("a_b@x.io") == ["A_B@X.IO"]
        assert emails("a%b@x.io") == ["a%b@x.io"]
        assert emails("A\\B@X.IO") == ["a\\b@x.io"]
        assert emails("straße@X.IO") == ["STRAẞE@x.io"]
        assert emails("%") == []

    def test_star_is_sent_narrowed_and_checked_here(self, store: MemoryStore) -> None:
        """``a*b`` goes out as ``a_b`` (which also finds ``axb``); the client keeps ``a*b``."""
        server = emulated(store, max_rows=2)
        backend = backend_over(server)
        flt = Filter("email", Op.IEQ, "A*B@X.IO")
        page = backend.read(Query("leads", filters=(flt,), columns=("id",), limit=5))
        assert page.rows == [{"id": 2}]
        assert page.total_count == 1
        assert backend.count("leads", [flt]) == 1
        sent = [dict(server.params(i)) for i in range(len(server.requests))]
        assert {params["email"] for params in sent} == {"ilike.A_B@X.IO"}
        # The checked column is fetched along with the projected one.
        assert sent[0]["select"] == "id,email"

    @given(value=st.text(alphabet="aAbB*%_\\@ẞß", max_size=5), limit=st.integers(0, 3))
    def test_agrees_with_memory_backend(self, value: str, limit: int) -> None:
        """For any value with wildcards, escapes and stars, pages equal the memory backend's."""
        store = MemoryStore()
        store.insert(
            "leads",
            [{"email": v} for v in ["a*b", "AXB", "a%b", "A_b", "a\\b", "*", "%", "ß", "ẞ", ""]],
        )
        query = Query("leads", filters=(Filter("email", Op.IEQ, value),), limit=limit)
        expected = MemoryBackend(store).read(query)
        got = backend_over(PostgrestEmulator(store, max_rows=2)).read(query)
        assert got == expected
