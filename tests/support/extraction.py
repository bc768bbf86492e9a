"""Requests and model answers for the schema-constrained LLM extraction tests."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

from rag_agent.specs import ColumnInfo, ExtractionRequest

__all__ = [
    "LEADS_COLUMNS",
    "NOW",
    "TABLES",
    "answer",
    "cond",
    "extraction_request",
    "strict_schema_problems",
]

#: A Wednesday, so "last week" is Monday 2025-04-28 to Monday 2025-05-05.
NOW = dt.datetime(2025, 5, 7, 10, 30, tzinfo=dt.UTC)
TABLES = ("campaigns", "clients", "inquiries", "leads", "staging_leads")
_TEXT_OPS = ("eq", "ieq", "neq", "in", "icontains", "ilike", "is_null")
_ORDER_OPS = ("eq", "neq", "gt", "gte", "lt", "lte", "in", "is_null")

LEADS_COLUMNS = (
    ColumnInfo("id", "integer", ("eq", "neq", "gt", "gte", "lt", "lte", "in")),
    ColumnInfo("client_id", "uuid", ("eq", "neq", "in", "is_null")),
    ColumnInfo("email", "text", _TEXT_OPS),
    ColumnInfo("company_name", "text", _TEXT_OPS),
    ColumnInfo("status", "text", _TEXT_OPS),
    ColumnInfo("score", "integer", _ORDER_OPS),
    ColumnInfo("revenue", "numeric", _ORDER_OPS),
    ColumnInfo("unsubscribed", "boolean", ("eq", "is_null")),
    ColumnInfo("created_at", "timestamptz", _ORDER_OPS),
    ColumnInfo("replied_at", "timestamptz", _ORDER_OPS),
    ColumnInfo("birthday", "date", _ORDER_OPS),
    ColumnInfo("profile", "json", ("eq",)),
    ColumnInfo("notes", "text", ()),
)


def extraction_request(
    text: str,
    *,
    table: str = "leads",
    columns: tuple[ColumnInfo, ...] = LEADS_COLUMNS,
    tables: tuple[str, ...] = TABLES,
    now: dt.datetime = NOW,
) -> ExtractionRequest:
    """An extraction request over the sample ``leads`` columns."""
    return ExtractionRequest(text=text, table=table, columns=columns, tables=tables, now=now)


def cond(column: Any, op: Any, value: Any) -> dict[str, Any]:
    """One condition as the model writes it."""
    return {"column": column, "op": op, "value": value}


def answer(
    *conditions: dict[str, Any],
    table: str | None = None,
    count_only: bool = False,
    ignored: tuple[dict[str, str], ...] = (),
) -> dict[str, Any]:
    """A whole answer in the shape of the generated schema."""
    return {
        "table": table,
        "conditions": list(conditions),
        "count_only": count_only,
        "ignored": list(ignored),
    }


def _objects(schema: Any, path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(schema, dict):
        yield path, schema
        for key, value in schema.items():
            yield from _objects(value, f"{path}/{key}")
    elif isinstance(schema, list):
        for index, value in enumerate(schema):
            yield from _objects(value, f"{path}/{index}")


def strict_schema_problems(schema: dict[str, Any]) -> list[str]:
    """What OpenAI's strict JSON-schema mode would refuse in ``schema`` (empty when none).

    Checked: the root is an object (not a union); every object schema sets
    ``additionalProperties: false`` and requires every property; no keyword strict mode lacks
    (``oneOf``, ``allOf``, ``not``, ``discriminator``, ``if``); every ``enum`` is non-empty.
    """
    problems: list[str] = []
    if schema.get("type") != "object" or "anyOf" in schema:
        problems.append("the root is not an object")
    for path, node in _objects(schema, "#"):
        for keyword in ("oneOf", "allOf", "not", "discriminator", "if"):
            if keyword in node:
                problems.append(f"{path}: {keyword}")
        if "enum" in node and not node["enum"]:
            problems.append(f"{path}: empty enum")
        if node.get("type") == "object":
            if node.get("additionalProperties") is not False:
                problems.append(f"{path}: additionalProperties is not false")
            if sorted(node.get("required", ())) != sorted(node.get("properties", {})):
                problems.append(f"{path}: not every property is required")
    return problems
