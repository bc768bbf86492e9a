"""Seeded worlds for the adversarial, fault and load suites.

A :class:`World` is one backend (memory, PostgreSQL as the least-privilege role, or the Supabase
adapter over the in-process PostgREST emulator) holding the same seeded rows, with the read-only
facade, a ``RAGAgent`` and its LangChain tools over it, and a checksum of everything stored so a
test can prove that nothing changed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool

from persistence import (
    MemoryStore,
    ReadOnlyPersistenceFacade,
    create_persistence_agent,
    create_read_only_facade,
)
from persistence.schema import TABLE_DDL
from rag_agent import RAGAgent, RAGSettings, build_tools, row_hash
from rag_agent.untrusted import unwrap_boundary
from tests.conftest import PostgresDatabase
from tests.support.postgrest import BASE_URL, PostgrestEmulator, fake_key

BACKENDS = ("memory", "postgres", "supabase")
Row = dict[str, Any]

#: Every seeded lead has exactly these columns, so every backend knows all of them.
_BASE_LEADS: list[Row] = [
    {"client_id": 1, "email": "ann@acme.io", "company_name": "Acme Inc.", "title": "CTO"},
    {"client_id": 1, "email": "bob@acme.io", "company_name": "Acme GmbH", "title": "CEO"},
    {"client_id": 2, "email": "cy@globex.io", "company_name": "Globex", "title": "VP"},
    {"client_id": 2, "email": "di@pct.io", "company_name": "100% Real_Co", "title": "Ops"},
    {"client_id": 3, "email": "ed@paren.io", "company_name": "A*B (Holdings), Ltd.", "title": ""},
    {"client_id": 3, "email": "fa@quote.io", "company_name": 'O\'Reilly \\ "Sons"', "title": ""},
    {"client_id": 4, "email": "gi@uni.io", "company_name": "Ünïcödé ß İstanbul 🙂", "title": ""},
    {
        "client_id": 4,
        "email": "ha@semi.io",
        "company_name": "x'; DROP TABLE leads; --",
        "title": "",
    },
]

#: Settings without the environment: explicit defaults, a large enough cache.
SETTINGS = RAGSettings()


def seed_leads(stored_payloads: Sequence[str] = ()) -> list[Row]:
    """The base leads plus one lead per payload, holding it as e-mail and company name.

    Payloads no database can store (a NUL, a lone surrogate) are left out.
    """
    rows = [dict(row, score=index) for index, row in enumerate(_BASE_LEADS)]
    for payload in stored_payloads:
        if "\x00" in payload or not _encodable(payload):
            continue
        rows.append(
            {
                "client_id": 9,
                "email": payload,
                "company_name": payload,
                "title": "stored payload",
                "score": len(rows),
            }
        )
    return rows


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@dataclass
class World:
    """One backend over the seeded rows, and everything that reads it."""

    kind: str
    facade: ReadOnlyPersistenceFacade
    agent: RAGAgent
    rows: dict[int, Row]
    checksum: Callable[[], str]
    closers: list[Callable[[], None]] = field(default_factory=list)

    @property
    def tools(self) -> dict[str, BaseTool]:
        """The four LangChain tools bound to the agent, by name."""
        return {tool.name: tool for tool in build_tools(self.agent, content="full")}

    def close(self) -> None:
        """Release the agent, the facade and any HTTP client."""
        self.agent.close()
        for close in self.closers:
            close()


def _store_checksum(store: MemoryStore) -> Callable[[], str]:
    def checksum() -> str:
        state = {table: store.rows(table) for table in sorted(store.tables())}
        text = json.dumps(state, sort_keys=True, default=str, ensure_ascii=True)
        return hashlib.sha256(text.encode()).hexdigest()

    return checksum


def postgres_checksum(db: PostgresDatabase) -> Callable[[], str]:
    """A checksum of every reference table's rows, the public schema's relations and the roles."""
    parts = [
        f"(SELECT count(*) || ':' || md5(coalesce(string_agg(t::text, '|' ORDER BY id), '')) "
        f"FROM {table} AS t)"
        for table in sorted(TABLE_DDL)
    ]
    statement = (
        "SELECT concat_ws(',', "
        + ", ".join(parts)
        + ", (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        "     WHERE n.nspname = 'public'),"
        # Only this database's roles: other sessions may create and drop their own meanwhile.
        "   (SELECT string_agg(concat_ws(':', rolname, rolsuper, rolbypassrls, rolcreaterole,"
        "     rolcreatedb), ',' ORDER BY rolname) FROM pg_roles WHERE rolname IN (%s, %s)))"
    )

    def checksum() -> str:
        return str(db.execute(statement, (db.reader_role, db.writer_role))[0][0])

    return checksum


def _agent(facade: ReadOnlyPersistenceFacade, agent_options: Mapping[str, Any]) -> RAGAgent:
    options = {"settings": SETTINGS, **agent_options}
    return RAGAgent(facade, **options)


@contextmanager
def open_world(
    kind: str,
    rows: Sequence[Row],
    request: pytest.FixtureRequest,
    *,
    statement_timeout_ms: int = 1000,
    **agent_options: Any,
) -> Iterator[World]:
    """A :class:`World` of ``kind`` seeded with ``rows``; PostgreSQL comes from ``postgres_db``
    and reads with ``statement_timeout_ms`` (short: no seeded query needs more)."""
    if kind == "postgres":
        db: PostgresDatabase = request.getfixturevalue("postgres_db")
        db.truncate()
        writer = create_persistence_agent(kind="postgres", dsn=db.writer_dsn)
        try:
            db.add_clients(row.get("client_id") for row in rows)
            stored = writer.batch("leads", rows)
        finally:
            writer.close()
        facade = create_read_only_facade(
            kind="postgres", dsn=db.reader_dsn, statement_timeout_ms=statement_timeout_ms
        )
        world = World(kind, facade, _agent(facade, agent_options), {}, postgres_checksum(db))
        world.closers.append(db.truncate)
    else:
        store = MemoryStore()
        stored = create_persistence_agent(kind="memory", store=store).batch("leads", rows)
        if kind == "memory":
            facade = create_read_only_facade(kind="memory", store=store)
            closers: list[Callable[[], None]] = []
        else:
            # The emulator caps pages at 3 rows, so multi-row reads also exercise refilling.
            http = httpx.Client(transport=PostgrestEmulator(store, max_rows=3).transport())
            facade = create_read_only_facade(
                kind="supabase",
                url=BASE_URL,
                key=fake_key("anon"),
                http_client=http,
                sleep=lambda _: None,
            )
            closers = [http.close]
        world = World(kind, facade, _agent(facade, agent_options), {}, _store_checksum(store))
        world.closers.extend(closers)
    world.rows = {row["id"]: row for row in stored}
    try:
        yield world
    finally:
        world.close()


# -- calling tools the way an agent framework does ---------------------------------------------


def invoke_tool(tool: BaseTool, args: object) -> Any:
    """Invoke ``tool`` as a model's tool call (a mapping) or with raw input; return the content
    decoded from JSON. Any exception propagates: callers treat it as a failure."""
    if isinstance(args, dict):
        message = tool.invoke(
            {"name": tool.name, "args": args, "id": "call_1", "type": "tool_call"}
        )
        assert isinstance(message, ToolMessage)
        content = message.content
    else:
        content = tool.invoke(args)  # type: ignore[arg-type]
    return json.loads(unwrap_boundary(content)) if isinstance(content, str) else content


# -- what a correct answer looks like -----------------------------------------------------------

#: Error types an envelope may carry for hostile input: the library's own, typed errors.
TYPED_INPUT_ERRORS = frozenset(
    {
        "TableNotAllowedError",
        "ColumnNotAllowedError",
        "PersistencePermissionError",
        "InvalidQueryError",
        "UnsupportedOperatorError",
        "ToolInputError",
    }
)


def literal_match(row: Mapping[str, Any], filters: Mapping[str, Any] | None) -> bool:
    """Whether ``row`` satisfies ``filters`` as an envelope reports them: the pipeline's form
    (``company``, ``email``, ``id``, ``client_id``) or ``query_table``'s ``{column: {op: v}}``."""
    for key, wanted in (filters or {}).items():
        if isinstance(wanted, Mapping):
            for op, value in wanted.items():
                if not _op_match(row.get(key), op, value):
                    return False
        elif key == "company":
            name = row.get("company_name")
            if not isinstance(name, str) or str(wanted).lower() not in name.lower():
                return False
        elif key == "email":
            email = row.get("email")
            if not isinstance(email, str) or email.lower() != str(wanted).lower():
                return False
        elif str(row.get(key)) != str(wanted):
            return False
    return True


def _op_match(actual: object, op: str, value: object) -> bool:
    if op == "eq":
        return actual is not None and str(actual) == str(value)
    if op == "icontains":
        return isinstance(actual, str) and str(value).lower() in actual.lower()
    if op == "in":
        return actual is not None and str(actual) in {str(v) for v in value}  # type: ignore[attr-defined]
    return True  # other operators are not produced by these tests


def envelope_problems(
    envelope: Any, world: World, *, allowed_errors: frozenset[str] = TYPED_INPUT_ERRORS
) -> list[str]:
    """What is wrong with ``envelope``: an untyped error, a record that is not a seeded row as
    stored, a wrong hash, or a record that does not literally match the reported filters."""
    if not isinstance(envelope, dict) or "metadata" not in envelope:
        return [f"not an envelope: {str(envelope)[:200]}"]
    problems: list[str] = []
    metadata = envelope["metadata"]
    error = metadata.get("error")
    if error is not None and error.get("type") not in allowed_errors:
        problems.append(f"untyped error {error}")
    for record in envelope["records"]:
        fields = {k: v for k, v in record.items() if k != "provenance"}
        if record["provenance"]["row_hash"] != row_hash(fields):
            problems.append(f"hash mismatch for {fields}")
        stored = world.rows.get(fields.get("id"))  # type: ignore[arg-type]
        if stored is None or any(_differs(stored.get(k), v) for k, v in fields.items()):
            problems.append(f"record is not a stored row: {fields}")
        if not literal_match(fields, metadata.get("query_filters")):
            problems.append(f"record {fields.get('id')} does not match {metadata['query_filters']}")
    return problems


def _differs(stored: object, seen: object) -> bool:
    return stored != seen and str(stored) != str(seen)
