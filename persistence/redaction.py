"""PII redaction in the facade, with provenance a holder of the original data can still verify.

A :class:`RedactionPolicy` names, per table and column (or per column in every table), how a
value leaves the facade:

* ``mask`` (``mask:full``): ``"***"``; ``mask:email``: ``"j***@acme.io"``; ``mask:phone``: the last
  two digits, ``"***67"``; ``mask:initials``: ``"J. D."``. A partial mask that would still hold the
  whole value (a one-letter name, a two-digit phone) falls back to ``"***"``, so a masked value
  never contains the original. ``None`` stays ``None`` and ``""`` stays ``""``.
* ``hash``: a keyed pseudonym, ``"hash:"`` and 24 hex digits of HMAC-SHA256 over the value; the
  same value gives the same pseudonym in every table under one key, so a reader can tell which
  rows share a value, but without the key nobody can test a guess against it.
* ``drop``: the column is left out of the row.
* ``keep``: no redaction (to exempt one table's column from a rule for every table).

Rows of :meth:`~persistence.ReadOnlyPersistenceFacade.read` (related rows included) and of
``search`` come out redacted as :class:`RedactedRow`: a ``dict`` of the values as returned, whose
``redaction`` (a :class:`RowRedaction`) says which fields were redacted and how, and carries:

* ``source_hash``: HMAC-SHA256, under the policy's key, of ``["row", table, original_row]`` in
  canonical JSON (:mod:`persistence.values.canonical`): the original row's own columns, before any
  redaction;
* per redacted field a ``commitment``: HMAC-SHA256 of ``["field", table, original_id, column,
  value]``, so one field can be checked without the rest of the row.

The envelope's ``row_hash`` stays the SHA-256 of the record *as returned* (anyone can verify it);
``source_hash`` and the commitments are keyed because a plain hash of a low-entropy value (an
e-mail at a known company, a phone number) is reversed by trying the candidates. So only a
holder of the original data and the key can check them (:meth:`RedactionPolicy.verify`,
:meth:`RedactionPolicy.verify_field`). The key comes from ``key=`` or ``RAG_REDACTION_KEY``;
without one a random key is drawn per policy, so pseudonyms and commitments hold for that process
only (a warning says so once).

Redacted columns answer exact look-ups only: a filter on one may use ``eq``, ``ieq``, ``neq``,
``in`` or ``is_null`` (a caller may look up a value it already knows), while ranges, substring
patterns, ordering, grouping and ``min``/``max``/``sum``/``avg`` over it are refused with
``ColumnNotAllowedError``: each would let a caller recover the value a character or a bit at a
time. Columns the access policy denies never reach redaction at all.
"""

from __future__ import annotations

import hmac
import re
import secrets
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, Literal

from pydantic import SecretStr

from persistence.errors import ColumnNotAllowedError, ConfigurationError
from persistence.logs import get_logger
from persistence.query import Filter, Op, Order, Page, is_identifier
from persistence.relations import RelatedRows
from persistence.secrets import register_secret
from persistence.values.canonical import canonical_json, canonical_value

__all__ = [
    "EXACT_OPERATORS",
    "FULL_MASK",
    "FieldRedaction",
    "RedactedRow",
    "RedactionPolicy",
    "RowRedaction",
    "redaction_spec",
]

log = get_logger("persistence.redaction")

Method = Literal["mask", "hash", "drop"]
#: What a fully masked value reads as.
FULL_MASK = "***"
#: The operators a filter on a redacted column may use: exact look-ups of a known value.
EXACT_OPERATORS = frozenset({Op.EQ, Op.IEQ, Op.NEQ, Op.IN, Op.IS_NULL})
_SPECS = frozenset(
    {"mask", "mask:full", "mask:email", "mask:phone", "mask:initials", "hash", "drop", "keep"}
)
_WORD = re.compile(r"[^\W_]+")
_DIGITS = re.compile(r"\d")
_PSEUDONYM_HEX = 24
_warned = threading.Event()


@dataclass(frozen=True, slots=True)
class FieldRedaction:
    """How one field was redacted: ``method`` (``mask``, ``hash``, ``drop``), the mask's
    ``style`` (``full``, ``email``, ``phone``, ``initials``; ``None`` otherwise) and the keyed
    ``commitment`` to the original value."""

    method: Method
    style: str | None
    commitment: str


@dataclass(frozen=True, slots=True)
class RowRedaction:
    """What redaction did to one row: its fields by column, and the keyed hash of the original."""

    fields: Mapping[str, FieldRedaction]
    source_hash: str


class RedactedRow(dict[str, Any]):
    """A row as it left the facade (redacted values), with ``redaction`` saying what was done.

    A plain ``dict`` to every reader; copies made with ``copy``/``deepcopy``/pickle keep the note.
    """

    __slots__ = ("redaction",)

    def __init__(self, values: Mapping[str, Any], redaction: RowRedaction) -> None:
        super().__init__(values)
        self.redaction = redaction

    def __copy__(self) -> RedactedRow:
        return RedactedRow(self, self.redaction)

    def __deepcopy__(self, memo: dict[int, Any]) -> RedactedRow:
        import copy

        return RedactedRow(copy.deepcopy(dict(self), memo), self.redaction)

    def __reduce__(self) -> tuple[Any, ...]:
        return (RedactedRow, (dict(self), self.redaction))


def redaction_spec(spec: str) -> tuple[Method | Literal["keep"], str | None]:
    """``"mask:email"`` as ``("mask", "email")``; ``ConfigurationError`` for an unknown spec."""
    if not isinstance(spec, str) or spec not in _SPECS:
        raise ConfigurationError(
            f"unknown redaction {spec!r}; expected one of {', '.join(sorted(_SPECS))}"
        )
    method, _, style = spec.partition(":")
    if method == "mask":
        return "mask", style or "full"
    return method, None  # type: ignore[return-value]


def _mask(value: Any, style: str) -> Any:
    if value is None:
        return None
    text = value if isinstance(value, str) else str(canonical_value(value))
    if text == "":
        return ""
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        style = "full"  # structured values (json, arrays, dates) are masked whole
    masked = FULL_MASK
    if style == "email":
        local, at, domain = text.rpartition("@")
        if at and local and domain:
            masked = f"{local[0]}***@{domain}"
    elif style == "phone":
        digits = _DIGITS.findall(text)
        if len(digits) > 2:
            masked = FULL_MASK + "".join(digits[-2:])
    elif style == "initials":
        words = _WORD.findall(text)[:4]
        if words:
            masked = " ".join(f"{word[0].upper()}." for word in words)
    # A partial mask of a short value may still spell it out ("7" -> "***7"): mask it whole.
    return FULL_MASK if text in masked else masked


class RedactionPolicy:
    """Per table and column redaction rules and the key of its pseudonyms and commitments.

    ``rules`` maps a table to ``{column: spec}``; ``default`` gives ``{column: spec}`` for every
    table (a table's own rule wins; ``"keep"`` exempts a column). Specs: ``mask``,
    ``mask:full``, ``mask:email``, ``mask:phone``, ``mask:initials``, ``hash``, ``drop``,
    ``keep``. Immutable and thread-safe.

    >>> policy = RedactionPolicy(
    ...     {"leads": {"phone": "mask:phone"}}, default={"email": "mask:email"}, key="k" * 16
    ... )
    >>> row = policy.redact_row("leads", {"id": 1, "email": "jane@acme.io", "phone": "+1 0167"})
    >>> dict(row)
    {'id': 1, 'email': 'j***@acme.io', 'phone': '***67'}
    """

    __slots__ = ("_ephemeral", "_mac", "_others", "_rules", "_tables")

    def __init__(
        self,
        rules: Mapping[str, Mapping[str, str]] | None = None,
        *,
        default: Mapping[str, str] | None = None,
        key: bytes | str | SecretStr | None = None,
    ) -> None:
        self._rules = MappingProxyType(
            {
                _name(table, "table"): _column_rules(columns, table)
                for table, columns in (rules or {}).items()
            }
        )
        default_rules = _column_rules(default or {}, "*")
        if isinstance(key, SecretStr):
            key = key.get_secret_value()
        if isinstance(key, str):
            if key:
                register_secret(key)
            key = key.encode("utf-8")
        if key is not None and (not isinstance(key, bytes) or len(key) < 16):
            raise ConfigurationError(
                "the redaction key (key= or RAG_REDACTION_KEY) must be at least 16 bytes",
                variable="RAG_REDACTION_KEY",
            )
        self._ephemeral = key is None
        # Keyed once; each commitment copies it (the key schedule is most of a short HMAC).
        self._mac = hmac.new(key if key is not None else secrets.token_bytes(32), None, "sha256")
        # Each table's effective rules, computed once: its own over the defaults, less "keep".
        self._tables = MappingProxyType(
            {table: _effective(default_rules, own) for table, own in self._rules.items()}
        )
        self._others = _effective(default_rules, {})

    @classmethod
    def parse(cls, text: str, *, key: bytes | str | SecretStr | None = None) -> RedactionPolicy:
        """A policy from ``RAG_REDACT``'s form: ``table.column=spec`` items separated by commas,
        ``*`` as the table for every table, e.g. ``"*.email=mask:email,leads.notes=drop"``."""
        rules: dict[str, dict[str, str]] = {}
        for item in filter(None, (part.strip() for part in text.split(","))):
            target, equals, spec = item.partition("=")
            table, dot, column = target.strip().partition(".")
            if not (equals and dot):
                raise ConfigurationError(
                    f"redaction rule {item!r} is not table.column=spec", variable="RAG_REDACT"
                )
            rules.setdefault(table, {})[column] = spec.strip()
        default = rules.pop("*", {})
        return cls(rules, default=default, key=key)

    @property
    def ephemeral_key(self) -> bool:
        """Whether the key was drawn at random (commitments verify in this process only)."""
        return self._ephemeral

    def columns(self, table: str) -> Mapping[str, tuple[Method, str | None]]:
        """The redacted columns of ``table``: column -> (method, mask style)."""
        return self._tables.get(table, self._others)

    def specs(self, table: str, allowed: Iterable[str] | None = None) -> Mapping[str, str]:
        """The redacted columns of ``table`` (among ``allowed``, if given) and their specs."""
        shown = None if allowed is None else frozenset(allowed)
        return MappingProxyType(
            {
                column: method if style is None else f"{method}:{style}"
                for column, (method, style) in self.columns(table).items()
                if shown is None or column in shown
            }
        )

    def applies(self, table: str) -> bool:
        """Whether any column of ``table`` is redacted."""
        return bool(self.columns(table))

    # -- guarding queries --------------------------------------------------------------------

    def check_query(
        self, table: str, filters: Iterable[Filter], order: Iterable[Order], operation: str
    ) -> None:
        """Refuse a filter other than an exact look-up, or an ordering, on a redacted column."""
        redacted = self.columns(table)
        for flt in filters:
            if flt.column in redacted and flt.op not in EXACT_OPERATORS:
                raise _refused(table, flt.column, f"a {flt.op.value!r} filter", operation)
        for item in order:
            if item.column in redacted:
                raise _refused(table, item.column, "ordering", operation)

    def check_aggregate(
        self, table: str, group_by: Iterable[str], measured: Iterable[tuple[str, str]]
    ) -> None:
        """Refuse grouping by a redacted column or a metric other than ``count_distinct`` of one
        (group keys and min/max/sum/avg would hand its values out)."""
        redacted = self.columns(table)
        for column in group_by:
            if column in redacted:
                raise _refused(table, column, "grouping", "aggregate")
        for function, column in measured:
            if column in redacted and function != "count_distinct":
                raise _refused(table, column, f"{function!r}", "aggregate")

    # -- redacting rows ----------------------------------------------------------------------

    def redact_page(self, table: str, page: Page) -> Page:
        """``page`` with its rows (and their related rows) redacted."""
        return replace(page, rows=[self.redact_row(table, row) for row in page.rows])

    def redact_rows(self, table: str, rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """``rows`` of ``table`` redacted (related rows by their own table's rules)."""
        return [self.redact_row(table, row) for row in rows]

    def redact_row(self, table: str, row: Mapping[str, Any]) -> dict[str, Any]:
        """One row as it may leave the facade: a :class:`RedactedRow` when a rule applied."""
        values = {
            key: RelatedRows(self.redact_rows(value.table, value), table=value.table, cut=value.cut)
            if type(value) is RelatedRows
            else value
            for key, value in row.items()
        }
        rules = {c: rule for c, rule in self.columns(table).items() if c in row}
        if not rules:
            return values
        own = {k: v for k, v in row.items() if type(v) is not RelatedRows}
        row_id = row.get("id")
        fields: dict[str, FieldRedaction] = {}
        for column, (method, style) in rules.items():
            value = row[column]
            fields[column] = FieldRedaction(
                method, style, self._commit("field", table, row_id, column, value)
            )
            if method == "drop":
                del values[column]
            elif method == "hash":
                values[column] = None if value is None else self.pseudonym(value)
            else:
                values[column] = _mask(value, style or "full")
        self._warn_ephemeral()
        note = RowRedaction(MappingProxyType(fields), self._commit("row", table, own))
        return RedactedRow(values, note)

    def pseudonym(self, value: Any) -> str:
        """The ``hash`` method's pseudonym of ``value`` under this policy's key."""
        return "hash:" + self._commit("hash", value)[:_PSEUDONYM_HEX]

    # -- verifying ---------------------------------------------------------------------------

    def verify(
        self,
        table: str,
        original: Mapping[str, Any],
        fields: Mapping[str, Any],
        source_hash: str,
        redacted: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> bool:
        """Whether ``fields`` (a record's fields, as a model or parsed JSON) and its
        ``source_hash`` (and ``redacted`` notes, when given) come from ``original`` under this
        policy: the original hashes to ``source_hash``, redacting it gives exactly ``fields``,
        and every note's method and commitment match."""
        own = {k: v for k, v in original.items() if type(v) is not RelatedRows}
        if not hmac.compare_digest(self._commit("row", table, own), str(source_hash)):
            return False
        again = self.redact_row(table, own)
        if canonical_value(dict(again)) != canonical_value(dict(fields)):
            return False
        if redacted is None:
            return True
        expected = getattr(again, "redaction", None)
        notes = {} if expected is None else expected.fields
        if set(notes) != set(redacted):
            return False
        return all(
            notes[column].method == note.get("method")
            and hmac.compare_digest(notes[column].commitment, str(note.get("commitment")))
            for column, note in redacted.items()
        )

    def verify_field(
        self, table: str, row_id: Any, column: str, value: Any, commitment: str
    ) -> bool:
        """Whether ``value`` is the original of ``column`` in row ``row_id`` of ``table``."""
        expected = self._commit("field", table, row_id, column, value)
        return hmac.compare_digest(expected, str(commitment))

    def _commit(self, *parts: Any) -> str:
        mac = self._mac.copy()
        mac.update(canonical_json(list(parts)))
        return mac.hexdigest()

    def _warn_ephemeral(self) -> None:
        if self._ephemeral and not _warned.is_set():
            _warned.set()
            log.warning(
                "persistence.redaction.ephemeral_key",
                hint="no RAG_REDACTION_KEY: pseudonyms and commitments hold for this process only",
            )

    def __repr__(self) -> str:
        tables = {t: dict(self.columns(t)) for t in self._rules}
        return f"RedactionPolicy(default={dict(self.columns('*'))!r}, tables={tables!r})"


def _effective(
    default: Mapping[str, tuple[str, str | None]], own: Mapping[str, tuple[str, str | None]]
) -> Mapping[str, tuple[Method, str | None]]:
    merged = {**default, **own}
    return MappingProxyType(
        {column: rule for column, rule in merged.items() if rule[0] != "keep"}  # type: ignore[misc]
    )


def _name(value: object, what: str) -> str:
    if not is_identifier(value) and not (what == "table" and value == "*"):
        raise ConfigurationError(f"redaction rule names {what} {value!r}, not an identifier")
    assert isinstance(value, str)
    return value


def _column_rules(
    columns: Mapping[str, str], table: object
) -> Mapping[str, tuple[Method | Literal["keep"], str | None]]:
    if not isinstance(columns, Mapping):
        raise ConfigurationError(f"redaction rules of {table!r} must map columns to specs")
    return MappingProxyType(
        {_name(column, "column"): redaction_spec(spec) for column, spec in columns.items()}
    )


def _refused(table: str, column: str, what: str, operation: str) -> ColumnNotAllowedError:
    return ColumnNotAllowedError(
        f"column {column!r} of {table!r} is redacted: {what} on it is not allowed (only exact "
        f"look-ups: {', '.join(sorted(op.value for op in EXACT_OPERATORS))})",
        table=table,
        column=column,
        operation=operation,
    )
