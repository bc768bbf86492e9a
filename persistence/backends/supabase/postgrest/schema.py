"""Column types of a PostgREST API, read from the OpenAPI description its root serves.

``GET /rest/v1/`` answers a Swagger 2.0 document whose ``definitions.<table>.properties.<column>``
carry PostgreSQL's type name in ``format`` (``"uuid"``, ``"bigint"``, ``"timestamp with time
zone"``, an enum's name next to an ``enum`` list...). One request describes every table, so the
answer is cached for the backend's lifetime. Supabase may refuse the description to an ``anon``
key; any definite refusal or unreadable answer is cached as "cannot tell" (``None``), and the
facade then coerces nothing, as before. A lost connection or a timeout is not cached: the next
read asks again.

Thread-safety: the cache is written once and only read afterwards; a race costs one duplicate
request.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from persistence.backends.supabase.postgrest.client import Exchange, PostgrestClient
from persistence.backends.supabase.postgrest.embed import parse_relations
from persistence.errors import BackendUnavailableError, PersistenceError, QueryTimeoutError
from persistence.relations import Relation
from persistence.steps import Steps
from persistence.values.types import ColumnKind, ColumnType, column_type, enum_type

__all__ = ["ApiDescription", "parse_description", "parse_functions"]

Tables = Mapping[str, Mapping[str, ColumnType]]
_UNTOLD: Tables = MappingProxyType({})


def _property_type(prop: Any) -> ColumnType:
    if not isinstance(prop, Mapping):
        return ColumnType(ColumnKind.OTHER, "unknown")
    name = prop.get("format")
    if not isinstance(name, str) or not name:
        shown = prop.get("type")
        return ColumnType(ColumnKind.OTHER, shown if isinstance(shown, str) else "unknown")
    labels = prop.get("enum")
    if (
        isinstance(labels, list)
        and labels
        and all(type(label) is str for label in labels)
        and len(set(labels)) == len(labels)
    ):
        # PostgREST lists an enum column's labels (in pg_enum order) beside its type's name.
        return enum_type(name, labels)
    return column_type(name, category="E" if "enum" in prop else None)


def parse_description(document: Any) -> Tables | None:
    """table -> column -> :class:`ColumnType` from an OpenAPI document; ``None`` when it has
    no ``definitions`` object (not a PostgREST description)."""
    definitions = document.get("definitions") if isinstance(document, Mapping) else None
    if not isinstance(definitions, Mapping):
        return None
    tables: dict[str, Mapping[str, ColumnType]] = {}
    for table, definition in definitions.items():
        properties = definition.get("properties") if isinstance(definition, Mapping) else None
        if isinstance(table, str) and isinstance(properties, Mapping):
            tables[table] = MappingProxyType(
                {str(c): _property_type(p) for c, p in properties.items()}
            )
    return MappingProxyType(tables)


def parse_functions(document: Any) -> Mapping[str, str]:
    """The functions of the ``/rpc/<name>`` paths an OpenAPI document lists, each with its
    comment as PostgREST shows it (first line in ``summary``, the rest in ``description``)."""
    paths = document.get("paths") if isinstance(document, Mapping) else None
    if not isinstance(paths, Mapping):
        return MappingProxyType({})
    found: dict[str, str] = {}
    for path, item in paths.items():
        if not isinstance(path, str) or not path.startswith("/rpc/") or len(path) == 5:
            continue
        parts = []
        operations = item.values() if isinstance(item, Mapping) else ()
        for operation in operations:
            if isinstance(operation, Mapping):
                parts = [
                    text
                    for key in ("summary", "description")
                    if isinstance(text := operation.get(key), str)
                ]
                break
        found[path[5:]] = "\n".join(parts)
    return MappingProxyType(found)


class ApiDescription:
    """The column types a PostgREST API describes, fetched on first use and cached."""

    __slots__ = ("_client", "_functions", "_relations", "_tables")

    def __init__(self, client: PostgrestClient) -> None:
        self._client = client
        self._tables: Tables | None = None
        self._relations: tuple[Relation, ...] = ()
        self._functions: Mapping[str, str] = MappingProxyType({})

    def relations(self) -> tuple[Relation, ...]:
        """The foreign keys the description notes (none when it does not tell)."""
        if self._tables is None:
            self._fetch()
        return self._relations

    def functions(self) -> Mapping[str, str]:
        """The functions the API serves under ``/rpc/``, each with its comment (none when the
        API does not tell): an owner-installed search function is found here."""
        if self._tables is None:
            self._fetch()
        return self._functions

    def column_types(self, table: str) -> Mapping[str, ColumnType] | None:
        """``table``'s columns and types, or ``None`` when the API does not tell."""
        tables = self._tables
        if tables is None:
            tables = self._fetch()
        return tables.get(table)

    def _fetch(self) -> Tables:
        return self._client.drive(self.fetch_steps())

    def known(self) -> bool:
        """True once the description was read (or found missing for good)."""
        return self._tables is not None

    def fetch_steps(self) -> Steps[Exchange, Tables]:
        """Read the description (``GET`` on the REST root) as steps."""
        try:
            response = yield from self._client.request_steps("GET", "", "column_types", [])
            document = json.loads(response.content)
            parsed = parse_description(document)
            self._relations = parse_relations(document)
            self._functions = parse_functions(document)
        except (BackendUnavailableError, QueryTimeoutError):
            return _UNTOLD  # transient: ask again next time
        except (PersistenceError, ValueError):
            parsed = None
        self._tables = _UNTOLD if parsed is None else parsed
        return self._tables
