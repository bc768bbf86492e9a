"""Every corpus line as the company of "inquiries from …" and "messages from … about refund":
the lookups through clients, leads and conversations take it only as a filter value or a search
text, the envelope is clean (no error, only key conditions), and the data is unchanged; a line
stored as a company's name is found literally. On memory and on PostgreSQL (reader role)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from persistence import MemoryStore, create_persistence_agent, create_read_only_facade
from rag_agent import RAGAgent
from rag_agent.settings import RAGSettings
from rag_agent.understanding.rules import names
from tests.conftest import PostgresDatabase, corpus_lines

SCHEMA = json.loads(
    (Path(__file__).parents[2] / "docs" / "envelope.schema.json").read_text(encoding="utf-8")
)
#: Built once: validating 2,000 envelopes with a validator built per call takes minutes.
VALIDATOR = jsonschema.validators.validator_for(SCHEMA)(SCHEMA)
NOW = dt.datetime(2025, 6, 18, 12, tzinfo=dt.UTC)
TABLES = ("clients", "leads", "conversations", "messages", "inquiries")
#: The conditions a run may apply here: the linked keys, and the rules' own columns.
ALLOWED = {"client_id", "lead_id", "conversation_id", "subject", "body", "direction"}
LINKED = {"client_id", "lead_id", "conversation_id"}
#: Every PG_STEP-th line on PostgreSQL (all of them on memory).
PG_STEP = 20


def _quoted(line: str) -> str | None:
    """``line`` quoted as the rules read a whole name, or ``None`` when no quote fits."""
    if len(line) > 120 or "\n" in line:
        return None
    for quote in ('"', "'"):
        if quote not in line:
            return f"{quote}{line}{quote}"
    return None


@pytest.fixture(scope="module")
def payloads() -> list[str]:
    return corpus_lines()


def _read_whole(line: str) -> bool:
    quoted = _quoted(line)
    found = None if quoted is None else names.find_company(f"from {quoted}")
    return found is not None and found.value == line


@pytest.fixture(scope="module")
def stored(payloads: list[str]) -> list[str]:
    """A few lines that are also companies' names (so literal matches exist): lines the rules
    read whole as a quoted name."""
    return [line for line in payloads if _read_whole(line)][::97][:6]


def _rows(stored: list[str]) -> dict[str, list[dict[str, Any]]]:
    # Client i + 1 and lead i + 1 are named stored[i - 1]; client 1 and lead 1 are Globex.
    names = ["Globex", *stored]
    n = len(names)
    return {
        "clients": [{"id": i, "name": name} for i, name in enumerate(names, 1)],
        "leads": [
            {"id": i, "client_id": i, "company_name": name} for i, name in enumerate(names, 1)
        ],
        "conversations": [{"id": i, "lead_id": i} for i in range(1, n + 1)],
        "messages": [
            {"id": i, "conversation_id": i, "body": f"refund request {i}"} for i in range(1, n + 1)
        ],
        "inquiries": [
            {"id": i, "client_id": i, "lead_id": i, "subject": f"refund {i}"}
            for i in range(1, n + 1)
        ],
    }


def _texts(line: str) -> list[tuple[str, str]]:
    name = _quoted(line) or line
    return [
        ("inquiries", f"inquiries from {name}"),
        ("messages", f"messages from {name} about refund"),
    ]


def _problems(agent: RAGAgent, payloads: list[str], stored: list[str]) -> list[str]:
    ids = {name: i for i, name in enumerate(["Globex", *stored], 1)}
    problems = []
    for line in payloads:
        for table, text in _texts(line):
            data = agent.run(text, table=table, return_json=True)
            invalid = next(iter(VALIDATOR.iter_errors(data)), None)
            if invalid is not None:
                problems.append(f"{text[:80]!r}: invalid envelope: {invalid.message[:80]}")
                continue
            meta = data["metadata"]
            if "error" in meta:
                problems.append(f"{text[:80]!r}: {meta['error']}")
            for found in meta.get("filters") or []:
                column, value = found["column"], found["value"]
                if column not in ALLOWED:
                    problems.append(f"{text[:80]!r}: condition on {column}")
                elif column in LINKED and not all(isinstance(v, int) for v in value):
                    problems.append(f"{text[:80]!r}: {column} in {value!r:.60}")
            if line in ids:
                key = ids[line]
                linked = [f["value"] for f in meta.get("filters") or [] if f["column"] in LINKED]
                if linked != [[key]]:
                    problems.append(f"{text[:80]!r}: stored name read as {linked!r:.60}")
    return problems


class TestHostileCompanyOnMemory:
    def test_every_line_is_only_a_value(self, payloads: list[str], stored: list[str]) -> None:
        """Every line as the company: a clean envelope, key conditions only, data unchanged;
        a stored name is found literally, through the clients or the leads it names."""
        store = MemoryStore()
        for table, rows in _rows(stored).items():
            store.insert(table, rows)
        facade = create_read_only_facade("memory", store=store)
        before = {table: (facade.count(table), facade.data_version(table)) for table in TABLES}
        agent = RAGAgent(facade, settings=RAGSettings(), now=lambda: NOW)
        assert _problems(agent, payloads, stored) == []
        assert {t: (facade.count(t), facade.data_version(t)) for t in TABLES} == before


_STATE = " UNION ALL ".join(
    f"SELECT '{table}', count(*)::text || md5(coalesce(string_agg(t::text, '|' ORDER BY id), ''))"
    f" FROM {table} AS t"
    for table in TABLES
)


@pytest.fixture
def postgres_agent(postgres_clean: PostgresDatabase, stored: list[str]) -> Iterator[RAGAgent]:
    postgres_clean.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    rows = _rows(stored)
    for client in rows["clients"]:
        postgres_clean.execute(
            "INSERT INTO clients (id, name) VALUES (%s, %s)", (client["id"], client["name"])
        )
    with create_persistence_agent(kind="postgres", dsn=postgres_clean.writer_dsn) as writer:
        for table in TABLES[1:]:
            writer.batch(table, rows[table])
    with create_read_only_facade("postgres", dsn=postgres_clean.reader_dsn) as facade:
        yield RAGAgent(facade, settings=RAGSettings(), now=lambda: NOW)


@pytest.mark.postgres
class TestHostileCompanyOnPostgres:
    def test_every_line_is_only_a_value(
        self,
        postgres_agent: RAGAgent,
        postgres_clean: PostgresDatabase,
        payloads: list[str],
        stored: list[str],
    ) -> None:
        """The same on PostgreSQL through the reader role, for every twentieth line and the stored
        ones (each run is a dozen statements): no line becomes SQL (every table and the schema
        unchanged), every envelope is clean."""
        before = postgres_clean.execute(_STATE)
        schema = postgres_clean.execute(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public'"
        )
        lines = [*payloads[::PG_STEP], *stored]
        assert _problems(postgres_agent, lines, stored) == []
        assert postgres_clean.execute(_STATE) == before
        assert (
            postgres_clean.execute(
                "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = 'public'"
            )
            == schema
        )
