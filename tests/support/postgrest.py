"""An in-process PostgREST for ``httpx.MockTransport``, evaluating requests on a ``MemoryStore``.

It parses PostgREST's URL grammar **strictly** — the subset the Supabase adapter may use — and
answers as PostgREST does (``Content-Range``, ``Prefer: count=``, 206/416 statuses, error JSON).
Anything outside that subset (``and=`` logic trees, an ``or=`` of anything but ``wfts``
conditions, websearch syntax in a ``wfts`` value, unknown operators, an unterminated
``in`` list, a bad ``order``...) is a PostgREST-shaped 400, so a request that round-trips here
was encoded the way PostgREST reads it. Grammar rules mirrored (PostgREST's query-string parser):

* ``col=[not.]op.value``: for scalar operators the value is the rest of the text, verbatim;
* ``in.(e1,e2)``: an element is ``"..."`` (``\\`` escapes any character; the closing quote must
  be followed by ``,`` or ``)``) or bare text up to ``,``/``)``;
* ``like``/``ilike``: every ``*`` becomes ``%`` before SQL's LIKE (``\\`` escapes ``%``/``_``);
  ``ilike`` folds both sides as PostgreSQL's ``lower()`` does in a UTF-8 database;
* ``is.null|not_null|true|false``; ``order=col[.asc|.desc][.nullsfirst|.nullslast],...``;
* ``wfts.word``: every word of the value among the column's words (case-folded, no stemming);
  ``or=(col.wfts."word",...)``: any of them;
* ``/rpc/<name>``: the ``functions=`` given (:class:`RpcFunction`), over ``GET`` only, with a
  400 for any parameter that is not an argument (PostgREST would apply it after the function).

``max_rows`` emulates the server's row cap (``db-max-rows``): responses are silently truncated.
``aggregates`` emulates ``db-aggregates-enabled`` (off by default, as on PostgREST): off, a
``select`` with an aggregate function is refused with ``PGRST123``; on, it is served
(:mod:`tests.support.postgrest_aggregates`).

``GET /rest/v1/`` answers the OpenAPI description PostgREST serves there, built from the store's
typed schema (``definitions.<table>.properties.<column>.format`` in PostgREST's spelling of the
type), unless ``describe=False`` (a Supabase project refusing it to the key: 401). A filter's
literal is read as its column's type, as PostgreSQL reads an ``unknown`` literal (``22P02`` when
it cannot be); an untyped column reads it as the type of the value it is compared with.

Example::

    emulator = PostgrestEmulator(MemoryStore(), max_rows=1000)
    client = httpx.Client(transport=httpx.MockTransport(emulator))
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import unquote_plus

import httpx

from persistence import BackendError, InvalidQueryError, MemoryStore
from persistence.relations import Relation
from persistence.schema import REFERENCE
from persistence.values.like import compile_like, fold_case
from persistence.values.types import ColumnKind, ColumnType, coerce_value
from tests.support import postgrest_aggregates
from tests.support.postgrest_embed import Embed, EmbedError, parse_select, resolve

__all__ = [
    "BASE_URL",
    "EmulatorError",
    "PostgrestEmulator",
    "RpcFunction",
    "decode_query",
    "describe",
    "fake_key",
    "parse_in_list",
    "parse_logic_tree",
]

BASE_URL = "https://emulated.supabase.test"
_REST_PREFIX = "/rest/v1/"
_IDENT = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_SCALAR_OPS = {"eq", "neq", "gt", "gte", "lt", "lte", "like", "ilike"}
_RESERVED = {"select", "order", "limit", "offset", "columns", "on_conflict"}
Row = dict[str, Any]
Verdict = bool | None  # SQL's three-valued logic: None is NULL


def fake_key(role: str = "anon") -> str:
    """An unsigned JWT-shaped API key with the given ``role`` claim."""

    def part(data: Mapping[str, object]) -> str:
        raw = json.dumps(data, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part({'role': role, 'iss': 'test'})}.sig"


class EmulatorError(Exception):
    """A request PostgREST would refuse; carries the status and the error document."""

    def __init__(self, status: int, code: str, message: str, details: str | None = None):
        super().__init__(message)
        self.status = status
        self.body = {"code": code, "message": message, "details": details, "hint": None}


def _parse_error(message: str, details: str | None = None) -> EmulatorError:
    return EmulatorError(400, "PGRST100", message, details)


def decode_query(raw: bytes | str) -> list[tuple[str, str]]:
    """The ``(key, value)`` pairs of a raw query string, decoded as PostgREST's server does."""
    text = raw.decode("ascii") if isinstance(raw, bytes) else raw
    if not text:
        return []
    pairs = []
    for item in text.split("&"):
        key, sep, value = item.partition("=")
        if not sep:
            raise _parse_error(f"query parameter {key!r} has no value")
        pairs.append((unquote_plus(key), unquote_plus(value)))
    return pairs


def parse_in_list(text: str) -> list[str]:
    """The elements of an ``in.`` operand, read exactly as PostgREST's list grammar reads it."""
    if not text.startswith("("):
        raise _parse_error("failed to parse filter", f"expected '(' in {text!r}")
    pos, items = 1, []
    while True:
        if pos < len(text) and text[pos] == '"':
            pos += 1
            chars: list[str] = []
            while True:
                if pos >= len(text):
                    raise _parse_error("failed to parse filter", "unterminated quoted value")
                char = text[pos]
                if char == "\\":
                    if pos + 1 >= len(text):
                        raise _parse_error("failed to parse filter", "dangling escape")
                    chars.append(text[pos + 1])
                    pos += 2
                elif char == '"':
                    pos += 1
                    break
                else:
                    chars.append(char)
                    pos += 1
            if pos >= len(text) or text[pos] not in ",)":
                raise _parse_error("failed to parse filter", "quoted value not followed by , or )")
            items.append("".join(chars))
        else:
            end = pos
            while end < len(text) and text[end] not in ",)":
                end += 1
            items.append(text[pos:end])
            pos = end
        if pos >= len(text):
            raise _parse_error("failed to parse filter", "unterminated in list")
        if text[pos] == ")":
            if pos != len(text) - 1:
                raise _parse_error("failed to parse filter", "text after the in list")
            return items
        pos += 1  # the comma


# PostgREST's OpenAPI ``format`` for the types whose catalog name differs from its spelling.
_FORMATS = {
    "timestamptz": "timestamp with time zone",
    "timestamp": "timestamp without time zone",
    "time": "time without time zone",
    "varchar": "character varying",
    "char": "character",
}
_JSON_TYPES = {
    ColumnKind.INTEGER: "integer",
    ColumnKind.NUMERIC: "number",
    ColumnKind.FLOAT: "number",
    ColumnKind.BOOLEAN: "boolean",
}


def describe(store: MemoryStore, relations: Sequence[Relation] = ()) -> dict[str, Any]:
    """The Swagger 2.0 document PostgREST serves at its root, for ``store``'s tables; a column
    that ``relations`` make a foreign key carries PostgREST's note in its ``description``."""
    notes = {
        (r.child_table, r.child_column): "Note:\nThis is a Foreign Key to "
        f"`{r.parent_table}.{r.parent_column}`.<fk table='{r.parent_table}' "
        f"column='{r.parent_column}'/>"
        for r in relations
    }

    def prop(table: str, column: str, ctype: ColumnType) -> dict[str, Any]:
        described: dict[str, Any] = {
            "format": _FORMATS.get(ctype.name, ctype.name),
            "type": _JSON_TYPES.get(ctype.kind, "string"),
        }
        if ctype.labels is not None:  # PostgREST lists an enum's labels, in pg_enum order
            described["enum"] = list(ctype.labels)
        if (table, column) in notes:
            described["description"] = notes[(table, column)]
        return described

    definitions = {
        table: {
            "type": "object",
            "properties": {
                column: prop(table, column, ctype)
                for column, ctype in store.column_types(table).items()
            },
        }
        for table in sorted(store.tables())
    }
    return {"swagger": "2.0", "info": {"title": "emulated PostgREST"}, "definitions": definitions}


def _typed_literal(literal: str, ctype: ColumnType, column: str) -> object:
    """``literal`` read as a ``ctype`` column's value (PostgreSQL's cast of an unknown literal);
    ``column`` is ``table.column``."""
    table, _, name = column.partition(".")
    try:
        return coerce_value(literal, ctype, table=table, column=name)
    except InvalidQueryError as exc:
        raise EmulatorError(
            400, "22P02", f'invalid input syntax for type {ctype.name}: "{literal}"'
        ) from exc


def _coerce(literal: str, sample: object, column: str) -> object:
    """``literal`` read as the type of ``sample`` (what PostgreSQL does with ``::unknown``)."""
    try:
        if isinstance(sample, bool):
            lowered = literal.lower()
            if lowered in {"true", "t"}:
                return True
            if lowered in {"false", "f"}:
                return False
            raise ValueError(literal)
        if isinstance(sample, int):
            return int(literal)
        if isinstance(sample, float):
            return float(literal)
        if isinstance(sample, decimal.Decimal):
            return decimal.Decimal(literal)
        if isinstance(sample, dt.datetime):
            return dt.datetime.fromisoformat(literal)
        if isinstance(sample, dt.date):
            return dt.date.fromisoformat(literal)
        if isinstance(sample, uuid.UUID):
            return uuid.UUID(literal)
    except (ValueError, decimal.InvalidOperation) as exc:
        raise EmulatorError(
            400,
            "22P02",
            f'invalid input syntax for type {type(sample).__name__}: "{literal}"',
            f"column {column}",
        ) from exc
    return literal


def _compare(op: str, left: object, right: object) -> bool:
    try:
        if op == "eq":
            return bool(left == right)
        if op == "neq":
            return bool(left != right)
        if op == "gt":
            return bool(left > right)  # type: ignore[operator]
        if op == "gte":
            return bool(left >= right)  # type: ignore[operator]
        if op == "lt":
            return bool(left < right)  # type: ignore[operator]
        return bool(left <= right)  # type: ignore[operator]
    except TypeError:
        return False


Condition = Callable[[Row], Verdict]


def _typed(literal: str, ctype: ColumnType | None, column: str) -> tuple[object] | None:
    """``(value,)`` for a typed column (read once, as the server does), ``None`` for an
    untyped one (read per row, as the type of the row's value)."""
    if ctype is None or ctype.kind is ColumnKind.OTHER:
        return None
    return (_typed_literal(literal, ctype, column),)


def _condition(
    table: str, column: str, expression: str, ctype: ColumnType | None = None
) -> Condition:
    negate = False
    if expression.startswith("not."):
        negate, expression = True, expression[4:]
    op, sep, operand = expression.partition(".")
    if not sep:
        raise _parse_error("failed to parse filter", f"{column}={expression}")
    test: Condition
    if op in {"like", "ilike"}:
        pattern = operand.replace("*", "%")
        like = compile_like(fold_case(pattern) if op == "ilike" else pattern)

        def test(row: Row) -> Verdict:
            value = row.get(column)
            if value is None:
                return None
            if not isinstance(value, str):
                raise EmulatorError(
                    400,
                    "42883",
                    f"operator does not exist: {type(value).__name__} ~~* unknown",
                )
            text = fold_case(value) if op == "ilike" else value
            return like.matches(text)

    elif op in _SCALAR_OPS:
        typed = _typed(operand, ctype, f"{table}.{column}")

        def test(row: Row) -> Verdict:
            value = row.get(column)
            if value is None:
                return None
            right = _coerce(operand, value, f"{table}.{column}") if typed is None else typed[0]
            return _compare(op, value, right)

    elif op == "in":
        elements = parse_in_list(operand)
        # PostgREST reads in.() and in.("") as the empty list.
        typed_elements = (
            [] if elements == [""] else [_typed(e, ctype, f"{table}.{column}") for e in elements]
        )

        def test(row: Row) -> Verdict:
            value = row.get(column)
            if value is None:
                return None
            if elements == [""]:
                return False
            return any(
                _compare("eq", value, _coerce(e, value, f"{table}.{column}") if t is None else t[0])
                for e, t in zip(elements, typed_elements, strict=True)
            )

    elif op == "wfts":
        words = _websearch_words(operand)

        def test(row: Row) -> Verdict:
            value = row.get(column)
            if value is None:
                return None
            held = set(_TEXT_WORD.findall(str(value).casefold()))
            return all(word in held for word in words)

    elif op == "is":
        wanted = operand.lower()
        if wanted not in {"null", "not_null", "true", "false"}:
            raise _parse_error("failed to parse filter", f"is.{operand}")

        def test(row: Row) -> Verdict:
            value = row.get(column)
            if wanted == "null":
                return value is None
            if wanted == "not_null":
                return value is not None
            return value is (wanted == "true")

    else:
        raise _parse_error("failed to parse filter", f"unknown operator {op!r}")

    if not negate:
        return test
    return lambda row: None if (v := test(row)) is None else not v


_TEXT_WORD = re.compile(r"[^\W_]+")


def _websearch_words(operand: str) -> list[str]:
    """The words of a ``wfts`` value; any of websearch_to_tsquery's syntax (quotes, a leading
    ``-``, the word ``or``) is refused: the adapter must send plain words only."""
    words = _TEXT_WORD.findall(operand.casefold())
    if '"' in operand or operand.lstrip().startswith("-") or "or" in words:
        raise _parse_error("websearch syntax reached the server", operand)
    return words


def parse_logic_tree(text: str) -> list[tuple[str, str]]:
    """The ``(column, op.value)`` conditions of a flat ``or=(...)`` tree: each ``col.op.value``
    with the value bare (up to ``,``/``)``) or ``"..."`` (``\\`` escapes any character)."""
    tree = re.compile(r"([a-z_][a-z0-9_]{0,62})\.([a-z]+)\.")
    if not text.startswith("("):
        raise _parse_error("failed to parse logic tree", text)
    pos, found = 1, []
    while True:
        head = tree.match(text, pos)
        if head is None:
            raise _parse_error("failed to parse logic tree", text)
        value, pos = _tree_value(text, head.end())
        found.append((head.group(1), f"{head.group(2)}.{value}"))
        if pos >= len(text):
            raise _parse_error("failed to parse logic tree", "unterminated tree")
        if text[pos] == ")":
            if pos != len(text) - 1:
                raise _parse_error("failed to parse logic tree", "text after the tree")
            return found
        pos += 1  # the comma


def _tree_value(text: str, pos: int) -> tuple[str, int]:
    """One value of a logic tree from ``pos``, and the position after it."""
    if pos < len(text) and text[pos] == '"':
        chars, pos = [], pos + 1
        while pos < len(text) and text[pos] != '"':
            if text[pos] == "\\":
                pos += 1
                if pos >= len(text):
                    raise _parse_error("failed to parse logic tree", "dangling escape")
            chars.append(text[pos])
            pos += 1
        if pos >= len(text):
            raise _parse_error("failed to parse logic tree", "unterminated quoted value")
        return "".join(chars), pos + 1
    end = pos
    while end < len(text) and text[end] not in ",)":
        end += 1
    return text[pos:end], end


def _order_key(
    column: str, descending: bool, nulls_first: bool, labels: tuple[str, ...] | None = None
) -> Callable[[Row], Any]:
    # An enum orders by declaration, as PostgreSQL orders it: by the label's position.
    position = {label: index for index, label in enumerate(labels or ())}

    def key(row: Row) -> Any:
        value = row.get(column)
        if isinstance(value, str) and value in position:
            value = position[value]
        # Python sorts True after False; reverse=True flips that, so place NULLs explicitly.
        is_null = value is None
        null_rank = (not is_null) if nulls_first != descending else is_null
        if is_null:
            return (null_rank, "", 0)
        kind = "" if isinstance(value, int | float | decimal.Decimal) else type(value).__name__
        return (null_rank, kind, value)

    return key


def _json_default(value: object) -> object:
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    raise TypeError(type(value).__name__)


def _any(conditions: list[Condition]) -> Condition:
    def test(row: Row) -> Verdict:
        verdicts = [c(row) for c in conditions]
        if any(v is True for v in verdicts):
            return True
        return None if any(v is None for v in verdicts) else False

    return test


class RpcFunction:
    """A function the emulator serves at ``/rpc/<name>``: ``arguments`` its parameter names,
    ``body`` what it answers for the decoded parameters, ``comment`` its ``COMMENT``."""

    def __init__(
        self,
        arguments: frozenset[str],
        body: Callable[[dict[str, str]], list[Row]],
        comment: str | None = None,
    ):
        self.arguments = arguments
        self.body = body
        self.comment = comment

    def described(self) -> dict[str, str]:
        """The path's operation as PostgREST describes it: the comment's first line in
        ``summary``, the rest in ``description``."""
        if self.comment is None:
            return {}
        summary, _, rest = self.comment.partition("\n")
        return {"summary": summary, "description": rest} if rest else {"summary": summary}

    def __call__(self, params: dict[str, str]) -> list[Row]:
        return self.body(params)


class PostgrestEmulator:
    """Callable as an ``httpx.MockTransport`` handler; see the module docstring.

    ``requests`` records every request received, in order. ``relations`` are the foreign keys
    embedding follows and the description notes (the reference schema's by default).
    """

    def __init__(
        self,
        store: MemoryStore,
        *,
        max_rows: int | None = None,
        describe: bool = True,
        aggregates: bool = False,
        relations: Sequence[Relation] = REFERENCE.relations,
        functions: Mapping[str, RpcFunction] | None = None,
    ) -> None:
        self.store = store
        self.functions = dict(functions or {})
        self.aggregates = aggregates
        self.max_rows = max_rows
        self.describe = describe
        self.relations = tuple(relations)
        self.requests: list[httpx.Request] = []

    def transport(self) -> httpx.MockTransport:
        """A transport that answers with this emulator."""
        return httpx.MockTransport(self)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        try:
            return self._handle(request)
        except EmulatorError as exc:
            return httpx.Response(exc.status, json=exc.body)
        except EmbedError as exc:
            return httpx.Response(exc.status, json=EmulatorError(400, exc.code, exc.message).body)

    # --- request parsing ---------------------------------------------------------------------

    def _table(self, request: httpx.Request) -> str:
        path = request.url.path
        if not path.startswith(_REST_PREFIX):
            raise EmulatorError(404, "PGRST125", f"invalid path {path!r}")
        table = path[len(_REST_PREFIX) :]
        if not _IDENT.fullmatch(table) or table not in self.store.tables():
            raise EmulatorError(
                404,
                "PGRST205",
                f"Could not find the table 'public.{table}' in the schema cache",
            )
        return table

    def _column(self, table: str, name: str) -> str:
        if not _IDENT.fullmatch(name):
            raise _parse_error("failed to parse select parameter", name)
        if name not in self.store.columns(table):
            raise EmulatorError(400, "42703", f"column {table}.{name} does not exist")
        return name

    def _handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == _REST_PREFIX and request.method == "GET":
            return self._description()
        if request.url.path.startswith(_REST_PREFIX + "rpc/"):
            return self._rpc(request, request.url.path[len(_REST_PREFIX + "rpc/") :])
        table = self._table(request)
        params = decode_query(request.url.query)
        prefer = {
            token.strip().partition("=")[0]: token.strip().partition("=")[2]
            for token in request.headers.get("prefer", "").split(",")
            if token.strip()
        }
        special: dict[str, str] = {}
        conditions: list[Condition] = []
        embedded: dict[str, list[tuple[str, str]]] = {}
        for key, value in params:
            if key == "or":
                alternatives = []
                for name, expression in parse_logic_tree(value):
                    if not expression.startswith("wfts."):
                        # The adapter's one logic tree: the search's OR of full-text words.
                        raise _parse_error("only wfts alternatives are in the adapter's grammar")
                    column = self._column(table, name)
                    ctype = self.store.column_types(table).get(column)
                    alternatives.append(_condition(table, column, expression, ctype))
                conditions.append(_any(alternatives))
                continue
            if key in {"and", "not.or", "not.and"}:
                raise _parse_error("logic trees are outside the adapter's grammar", key)
            if "." in key:  # a parameter of an embedded resource: checked once it is resolved
                path, _, name = key.rpartition(".")
                embedded.setdefault(path, []).append((name, value))
                continue
            if key in _RESERVED:
                if key in special:
                    raise _parse_error(f"duplicate {key} parameter")
                special[key] = value
                continue
            column = self._column(table, key)
            ctype = self.store.column_types(table).get(column)
            conditions.append(_condition(table, column, value, ctype))
        if request.method in {"GET", "HEAD"}:
            return self._read(request, table, special, conditions, prefer, embedded)
        if embedded:
            raise _parse_error("embedded parameters are for reads", next(iter(embedded)))
        if request.method == "POST":
            return self._write(request, table, special, prefer)
        if request.method == "DELETE":
            return self._delete(table, special, conditions, prefer)
        raise EmulatorError(405, "PGRST117", f"Unsupported HTTP method: {request.method}")

    def _rpc(self, request: httpx.Request, name: str) -> httpx.Response:
        function = self.functions.get(name)
        if function is None:
            raise EmulatorError(404, "PGRST202", f"Could not find the function public.{name}")
        if request.method != "GET":
            # The emulator serves functions read-only, as PostgREST's GET does.
            raise EmulatorError(405, "PGRST101", "functions are served over GET only here")
        params = dict(decode_query(request.url.query))
        extra = set(params) - function.arguments
        if extra:
            # PostgREST would read these as filters on the function's result (after its LIMIT).
            raise _parse_error("a filter was sent after a function", ", ".join(sorted(extra)))
        try:
            rows = function(params)
        except EmulatorError:
            raise
        except (ValueError, KeyError, TypeError) as exc:
            raise EmulatorError(400, "22P02", f"invalid input: {exc}") from exc
        return httpx.Response(200, content=json.dumps(rows, default=_json_default).encode())

    def _description(self) -> httpx.Response:
        if not self.describe:
            raise EmulatorError(401, "PGRST301", "the API description needs a secret key")
        document = describe(self.store, self.relations)
        document["paths"] = {
            "/": {},
            **{
                f"/rpc/{name}": {"get": function.described()}
                for name, function in self.functions.items()
            },
        }
        return httpx.Response(
            200,
            json=document,
            headers={"Content-Type": "application/openapi+json; charset=utf-8"},
        )

    def _matching(self, table: str, conditions: list[Condition]) -> list[Row]:
        return [row for row in self.store.rows(table) if all(c(row) is True for c in conditions)]

    def _projection(self, table: str, select: str | None) -> list[str] | None:
        if select is None or select == "*":
            return None
        return [self._column(table, name) for name in select.split(",")]

    def _sorted(self, table: str, rows: list[Row], order: str | None) -> list[Row]:
        if order is None:
            return rows
        for term in reversed(order.split(",")):
            name, *modifiers = term.split(".")
            self._column(table, name)
            descending, nulls_first = False, None
            for modifier in modifiers:
                if modifier in {"asc", "desc"}:
                    descending = modifier == "desc"
                elif modifier in {"nullsfirst", "nullslast"}:
                    nulls_first = modifier == "nullsfirst"
                else:
                    raise _parse_error("failed to parse order", term)
            if nulls_first is None:
                nulls_first = descending  # PostgreSQL's default placement
            ctype = self.store.column_types(table).get(name)
            labels = None if ctype is None else ctype.labels
            rows = sorted(
                rows, key=_order_key(name, descending, nulls_first, labels), reverse=descending
            )
        return rows

    @staticmethod
    def _count(special: dict[str, str], name: str) -> int | None:
        if name not in special:
            return None
        text = special[name]
        if not text.isdigit():
            raise _parse_error(f"failed to parse {name} parameter", text)
        return int(text)

    def _read(
        self,
        request: httpx.Request,
        table: str,
        special: dict[str, str],
        conditions: list[Condition],
        prefer: dict[str, str],
        embedded: Mapping[str, list[tuple[str, str]]],
    ) -> httpx.Response:
        for key in ("columns", "on_conflict"):
            if key in special:
                raise _parse_error(f"{key} is not valid on a read")
        if postgrest_aggregates.is_aggregate_select(special.get("select")):
            return self._aggregate(table, special, conditions)
        columns, embeds = parse_select(special.get("select") or "*")
        columns = None if columns is None else [self._column(table, c) for c in columns]
        self._check_paths(embeds, embedded)
        matched = self._sorted(table, self._matching(table, conditions), special.get("order"))
        offset = self._count(special, "offset") or 0
        limit = self._count(special, "limit")
        if self.max_rows is not None:
            limit = self.max_rows if limit is None else min(limit, self.max_rows)
        mode = prefer.get("count")
        if mode is not None and mode not in {"exact", "planned", "estimated"}:
            mode = None  # PostgREST ignores preferences it does not know (lenient handling)
        total = len(matched) if mode else None
        window = matched[offset : None if limit is None else offset + limit]
        if total is not None and offset > total:
            return httpx.Response(
                416,
                headers={"Content-Range": f"*/{total}"},
                json={
                    "code": "PGRST103",
                    "message": "Requested range not satisfiable",
                    "details": f"An offset of {offset} was requested, but there are only "
                    f"{total} rows.",
                    "hint": None,
                },
            )
        shown = "*" if total is None else str(total)
        content_range = f"{offset}-{offset + len(window) - 1}/{shown}" if window else f"*/{shown}"
        status = 206 if total is not None and len(window) < total else 200
        rows = [self._shown(table, row, columns, embeds, "", embedded) for row in window]
        content = b"" if request.method == "HEAD" else json.dumps(rows, default=_json_default)
        return httpx.Response(
            status,
            headers={"Content-Range": content_range, "Content-Type": "application/json"},
            content=content,
        )

    def _aggregate(
        self, table: str, special: dict[str, str], conditions: list[Condition]
    ) -> httpx.Response:
        if not self.aggregates:
            raise EmulatorError(400, "PGRST123", "Use of aggregate functions is not allowed")
        items = postgrest_aggregates.parse_aggregate_select(
            special["select"], lambda item: _parse_error("failed to parse select parameter", item)
        )
        for item in items:
            if item.column is not None:
                self._column(table, item.column)
        types = dict(self.store.column_types(table))
        rows, grouped = postgrest_aggregates.run(self._matching(table, conditions), items, types)
        order = special.get("order")
        if order is not None:
            for term in order.split(","):
                if term.split(".")[0] not in grouped:
                    raise _parse_error("ordering by an aggregate is not supported", term)
            by_key = {item.column: item.key for item in items if item.function is None}
            renamed = [{col: row[key] for col, key in by_key.items()} | row for row in rows]
            rows = (
                [{k: r[k] for k in rows[0]} for r in self._sorted(table, renamed, order)]
                if rows
                else rows
            )
        offset = self._count(special, "offset") or 0
        limit = self._count(special, "limit")
        if self.max_rows is not None:
            limit = self.max_rows if limit is None else min(limit, self.max_rows)
        window = rows[offset : None if limit is None else offset + limit]
        return httpx.Response(
            200,
            headers={"Content-Type": "application/json"},
            content=postgrest_aggregates.encode_json(window),
        )

    @staticmethod
    def _check_paths(embeds: list[Embed], embedded: Mapping[str, list[tuple[str, str]]]) -> None:
        paths = set()

        def walk(level: list[Embed], at: str) -> None:
            for embed in level:
                paths.add(f"{at}{embed.key}")
                walk(embed.embeds, f"{at}{embed.key}.")

        walk(embeds, "")
        for path in embedded:
            if path not in paths:
                raise _parse_error("a parameter names no embedded resource", path)

    def _shown(
        self,
        table: str,
        row: Row,
        columns: list[str] | None,
        embeds: list[Embed],
        at: str,
        embedded: Mapping[str, list[tuple[str, str]]],
    ) -> Row:
        """``row``'s columns and, under each embed's key, its children (filtered, ordered and
        limited by the parameters of that path)."""
        shown = {c: row.get(c) for c in (columns or self.store.columns(table))}
        for embed in embeds:
            relation = resolve(table, embed, self.relations)
            child = relation.child_table
            path = f"{at}{embed.key}"
            special: dict[str, str] = {}
            conditions: list[Condition] = []
            for name, value in embedded.get(path, []):
                if name in _RESERVED:
                    special[name] = value
                else:
                    column = self._column(child, name)
                    ctype = self.store.column_types(child).get(column)
                    conditions.append(_condition(child, column, value, ctype))
            key = row.get(relation.parent_column)
            children = [
                c
                for c in self._matching(child, conditions)
                if key is not None and c.get(relation.child_column) == key
            ]
            children = self._sorted(child, children, special.get("order"))
            limit = self._count(special, "limit")
            children = children[: None if limit is None else limit]
            inner = (
                None if embed.columns is None else [self._column(child, c) for c in embed.columns]
            )
            shown[embed.key] = [
                self._shown(child, c, inner, embed.embeds, f"{path}.", embedded) for c in children
            ]
        return shown

    def _write(
        self, request: httpx.Request, table: str, special: dict[str, str], prefer: dict[str, str]
    ) -> httpx.Response:
        try:
            body = json.loads(request.content)
        except ValueError as exc:
            raise EmulatorError(400, "PGRST102", "Empty or invalid json") from exc
        items = body if isinstance(body, list) else [body]
        if not all(isinstance(item, dict) for item in items):
            raise EmulatorError(400, "PGRST102", "Empty or invalid json")
        if "columns" in special:
            columns = [self._column(table, c) for c in special["columns"].split(",")]
        else:
            columns = list(items[0]) if items else []
        for item in items:
            for key in item:
                if key not in self.store.columns(table):
                    raise EmulatorError(
                        400,
                        "PGRST204",
                        f"Could not find the '{key}' column of '{table}' in the schema cache",
                    )
        missing_default = prefer.get("missing") == "default"
        rows: list[Row] = []
        for item in items:
            row: Row = {}
            for column in columns:
                if column in item:
                    row[column] = item[column]
                elif not missing_default:
                    row[column] = None
            rows.append(row)
        try:
            if prefer.get("resolution") == "merge-duplicates":
                conflict = self._column(table, special.get("on_conflict", "id"))
                stored = self.store.upsert(table, rows, conflict)
            else:
                stored = self.store.insert(table, rows)
        except BackendError as exc:
            raise EmulatorError(
                409, "23505", "duplicate key value violates unique constraint"
            ) from exc
        except InvalidQueryError as exc:
            raise EmulatorError(400, "22P02", f"invalid input syntax: {exc}") from exc
        if prefer.get("return") == "representation":
            return httpx.Response(201, content=json.dumps(stored, default=_json_default))
        return httpx.Response(201)

    def _delete(
        self,
        table: str,
        special: dict[str, str],
        conditions: list[Condition],
        prefer: dict[str, str],
    ) -> httpx.Response:
        columns = self._projection(table, special.get("select"))
        doomed = self._matching(table, conditions)
        ids = {row["id"] for row in doomed}
        self.store.delete(table, lambda row: row.get("id") in ids)
        if prefer.get("return") == "representation":
            rows = [
                {c: row.get(c) for c in (columns or self.store.columns(table))} for row in doomed
            ]
            return httpx.Response(200, content=json.dumps(rows, default=_json_default))
        return httpx.Response(204)
