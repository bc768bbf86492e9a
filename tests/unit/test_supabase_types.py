"""Column types over PostgREST: the OpenAPI description request, its cache, its fallbacks, and
the typed values that then go on the wire."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from persistence import (
    ColumnKind,
    Filter,
    InvalidQueryError,
    MemoryStore,
    Op,
    ReadOnlyPersistenceFacade,
    column_type,
    create_persistence_agent,
    create_read_only_facade,
)
from persistence.backends.supabase.postgrest.schema import parse_description
from persistence.schema import SUPABASE_STYLE
from tests.support.http import ScriptedServer, backend_over, rows_response
from tests.support.postgrest import BASE_URL, PostgrestEmulator, decode_query, describe, fake_key

KEY = uuid.UUID("6f1c2d3e-4b5a-4c6d-8e7f-901a2b3c4d5e")
DESCRIPTION_PATH = "/rest/v1/"


def facade_over(handler: Any, **options: Any) -> ReadOnlyPersistenceFacade:
    client = httpx.Client(transport=httpx.MockTransport(handler))
    return create_read_only_facade(
        kind="supabase",
        url=BASE_URL,
        key=fake_key("anon"),
        http_client=client,
        sleep=lambda _: None,
        **options,
    )


def paths(requests: list[httpx.Request]) -> list[str]:
    return [f"{r.method} {r.url.path}" for r in requests]


class TestDescriptionRequest:
    def test_types_are_asked_once_at_the_rest_root(self) -> None:
        """The first read asks GET /rest/v1/ once; later reads reuse the answer."""
        emulator = PostgrestEmulator(MemoryStore())
        facade = facade_over(emulator)
        facade.count("leads", [Filter("id", Op.EQ, "42")])
        facade.read("leads", [Filter("score", Op.GT, "3")])
        facade.check_filters("campaigns", [Filter("client_id", Op.EQ, "7")])
        assert paths(emulator.requests) == [
            f"GET {DESCRIPTION_PATH}",
            "GET /rest/v1/leads",
            "GET /rest/v1/leads",
        ]
        description = emulator.requests[0]
        assert description.url.query == b""
        assert description.headers["apikey"] == fake_key("anon")

    def test_values_go_on_the_wire_as_their_column_type(self) -> None:
        """A padded integer and an upper-case uuid are sent as PostgreSQL prints them."""
        emulator = PostgrestEmulator(MemoryStore(schema=SUPABASE_STYLE.types))
        facade = facade_over(emulator)
        facade.read(
            "leads",
            [
                Filter("id", Op.EQ, f" {str(KEY).upper()} "),
                Filter("employee_count", Op.IN, [" 42", 7]),
                Filter("created_at", Op.GTE, "2025-03-01"),
            ],
        )
        params = decode_query(emulator.requests[-1].url.query)
        assert ("id", f"eq.{KEY}") in params
        assert ("employee_count", 'in.("42","7")') in params
        assert ("created_at", "gte.2025-03-01T00:00:00+00:00") in params

    def test_an_uncoercible_value_sends_no_read(self) -> None:
        """A value that cannot be its column's type is refused after the description alone."""
        emulator = PostgrestEmulator(MemoryStore(schema=SUPABASE_STYLE.types))
        facade = facade_over(emulator)
        with pytest.raises(InvalidQueryError, match=r"leads\.id is uuid; '42' is not a uuid"):
            facade.read("leads", [Filter("id", Op.EQ, "42")])
        assert paths(emulator.requests) == [f"GET {DESCRIPTION_PATH}"]

    def test_a_refused_description_falls_back_and_is_not_asked_again(self) -> None:
        """A key the description is refused to: no types, values as given, asked only once."""
        store = MemoryStore()
        create_persistence_agent(kind="memory", store=store).write("leads", {"email": "a@x.io"})
        emulator = PostgrestEmulator(store, describe=False)
        facade = facade_over(emulator)
        assert facade.column_types("leads") == {}
        assert facade.check_filters("leads", [Filter("id", Op.EQ, "1")]) == (
            Filter("id", Op.EQ, "1"),
        )
        assert facade.count("leads", [Filter("id", Op.EQ, "1")]) == 1
        assert paths(emulator.requests).count(f"GET {DESCRIPTION_PATH}") == 1

    def test_a_lost_connection_is_not_cached(self) -> None:
        """A network failure answers 'cannot tell' now and asks again on the next call."""
        document = describe(MemoryStore())
        server = ScriptedServer([httpx.ConnectError("refused"), httpx.Response(200, json=document)])
        backend = backend_over(server, retries=0)
        assert backend.column_types("leads") is None
        types = backend.column_types("leads")
        assert types is not None and types["id"] == column_type("bigint")
        assert backend.column_types("leads") is types
        assert len(server.requests) == 2

    @pytest.mark.parametrize(
        "reply",
        [
            httpx.Response(200, content=b"<html>gateway</html>"),
            httpx.Response(200, json=[{"id": 1}]),
            httpx.Response(404, json={"code": "PGRST125", "message": "no"}),
        ],
        ids=["not-json", "rows", "not-found"],
    )
    def test_an_unreadable_answer_means_cannot_tell(self, reply: httpx.Response) -> None:
        """Anything but a description gives None, cached: reads go on as before."""
        server = ScriptedServer([reply, rows_response([], "*/0")])
        backend = backend_over(server)
        assert backend.column_types("leads") is None
        assert backend.column_types("clients") is None
        assert len(server.requests) == 1


class TestParseDescription:
    def test_formats_map_to_kinds(self) -> None:
        """PostgREST's formats, enums, arrays and missing formats map to column kinds."""
        document = {
            "definitions": {
                "leads": {
                    "properties": {
                        "id": {"format": "uuid", "type": "string"},
                        "seen": {"format": "timestamp with time zone", "type": "string"},
                        "score": {"format": "integer", "type": "integer"},
                        "stage": {"format": "lead_stage", "type": "string", "enum": ["a"]},
                        "tags": {"format": "text[]", "type": "array"},
                        "blob": {"type": "string"},
                    }
                }
            }
        }
        parsed = parse_description(document)
        assert parsed is not None
        kinds = {c: t.kind for c, t in parsed["leads"].items()}
        assert kinds == {
            "id": ColumnKind.UUID,
            "seen": ColumnKind.TIMESTAMPTZ,
            "score": ColumnKind.INTEGER,
            "stage": ColumnKind.TEXT,
            "tags": ColumnKind.OTHER,
            "blob": ColumnKind.OTHER,
        }

    @pytest.mark.parametrize("document", [[], {"paths": {}}, {"definitions": []}, None])
    def test_a_document_without_definitions_is_none(self, document: object) -> None:
        """A document with no definitions object is not a description."""
        assert parse_description(document) is None

    def test_the_emulator_spells_types_as_postgrest(self) -> None:
        """The emulator's description uses PostgREST's long type names, read back the same."""
        store = MemoryStore(schema=SUPABASE_STYLE.types)
        document = describe(store)
        leads = document["definitions"]["leads"]["properties"]
        assert leads["created_at"]["format"] == "timestamp with time zone"
        assert leads["last_contacted_at"]["format"] == "timestamp without time zone"
        parsed = parse_description(document)
        assert parsed is not None
        assert dict(parsed["leads"]) == dict(store.column_types("leads"))
