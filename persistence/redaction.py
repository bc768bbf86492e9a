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

Ranges, substring patterns, ordering, grouping and ``min``/``max``/``sum``/``avg`` over a
redacted column are always refused with ``ColumnNotAllowedError``: each would let a caller
recover the value a character or a bit at a time. Exact look-ups (``eq``, ``ieq``, ``neq``,
``in``, ``is_null``) are an oracle too: exact filters and counts recovered a masked phone number
in seven calls, by trying the candidates the mask leaves. So ``lookups`` says which redacted
columns answer them:

* ``"hash"`` (the default): only ``hash`` columns, whose pseudonyms already tell equal values
  apart; a ``mask`` or ``drop`` column refuses every filter. A caller who knows a value can
  still test it against a ``hash`` column (that is what a pseudonym is for); use ``"none"``
  where that is too much.
* ``"none"``: no redacted column answers any filter.
* ``"all"``: every redacted column answers exact look-ups (the behaviour before this setting).

``RAG_REDACT_LOOKUPS`` sets it from the environment. Columns the access policy denies never
reach redaction at all.

Rules fail closed: two rules for the same column of ``RAG_REDACT`` (``leads.phone=mask`` then
``leads.phone=keep``) take the strictest (``drop`` > ``mask:full`` > ``hash`` > a partial mask >
``keep``), and a facade refuses, at start, a rule naming a table it does not read or a column
its backend does not have (a typo would otherwise leave the real column in clear).
"""

from __future__ import annotations

import hmac
import re
import secrets
import threading
from collections.abc import Callable, Iterable, Mapping
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
    "LOOKUPS",
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
#: Which redacted columns answer exact look-ups (see the module doc).
Lookups = Literal["hash", "none", "all"]
LOOKUPS: tuple[str, ...] = ("hash", "none", "all")
# How much each spec hides, for conflicting rules: the strictest wins.
_STRICTNESS = {
    "keep": 0,
    "mask:email": 1,
    "mask:phone": 1,
    "mask:initials": 1,
    "hash": 2,
    "mask": 3,
    "mask:full": 3,
    "drop": 4,
}
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

    __slots__ = ("_default", "_ephemeral", "_lookups", "_mac", "_others", "_rules", "_tables")

    def __init__(
        self,
        rules: Mapping[str, Mapping[str, str]] | None = None,
        *,
        default: Mapping[str, str] | None = None,
        key: bytes | str | SecretStr | None = None,
        lookups: Lookups = "hash",
    ) -> None:
        if lookups not in LOOKUPS:
            raise ConfigurationError(
                f"redaction lookups must be one of {', '.join(LOOKUPS)}, not {lookups!r}",
                variable="RAG_REDACT_LOOKUPS",
            )
        self._lookups = lookups
        self._rules = MappingProxyType(
            {
                _name(table, "table"): _column_rules(columns, table)
                for table, columns in (rules or {}).items()
            }
        )
        default_rules = _column_rules(default or {}, "*")
        self._default = default_rules
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
    def parse(
        cls,
        text: str,
        *,
        key: bytes | str | SecretStr | None = None,
        lookups: Lookups = "hash",
    ) -> RedactionPolicy:
        """A policy from ``RAG_REDACT``'s form: ``table.column=spec`` items separated by commas,
        ``*`` as the table for every table, e.g. ``"*.email=mask:email,leads.notes=drop"``.

        Two rules for the same ``table.column`` take the strictest spec, never the last: a
        ``keep`` appended to a list cannot undo a ``mask``.
        """
        rules: dict[str, dict[str, str]] = {}
        for item in filter(None, (part.strip() for part in text.split(","))):
            target, equals, spec = item.partition("=")
            table, dot, column = target.strip().partition(".")
            if not (equals and dot):
                raise ConfigurationError(
                    f"redaction rule {item!r} is not table.column=spec", variable="RAG_REDACT"
                )
            spec = spec.strip()
            redaction_spec(spec)  # an unknown spec is an error before any comparison
            columns = rules.setdefault(table, {})
            earlier = columns.get(column)
            if earlier is None or _STRICTNESS[spec] > _STRICTNESS[earlier]:
                columns[column] = spec
        default = rules.pop("*", {})
        return cls(rules, default=default, key=key, lookups=lookups)

    @property
    def lookups(self) -> Lookups:
        """Which redacted columns answer exact look-ups: ``hash``, ``none`` or ``all``."""
        return self._lookups

    def allows_lookups(self, table: str, column: str) -> bool:
        """Whether a redacted ``column`` of ``table`` answers exact look-ups (a column no rule
        redacts answers every filter)."""
        rule = self.columns(table).get(column)
        if rule is None or self._lookups == "all":
            return True
        return self._lookups == "hash" and rule[0] == "hash"

    def check_columns(
        self, readable: Iterable[str], known: Callable[[str], frozenset[str] | None]
    ) -> None:
        """Refuse rules naming what does not exist: a table outside ``readable``, a column
        ``known(table)`` lacks (``None``: the backend cannot tell, not checked), or a ``*``
        column no readable table has. ``ConfigurationError`` listing every such name."""
        tables = frozenset(readable)
        wrong = [f"table {t!r} (not readable)" for t in sorted(set(self._rules) - tables)]
        # An empty set is a table the backend knows nothing of yet: it cannot tell either.
        columns_of = {t: known(t) or None for t in sorted(tables)}
        for table, own in sorted(self._rules.items()):
            have = columns_of.get(table)
            if have is not None:
                wrong += [f"{table}.{c}" for c in sorted(set(own) - have)]
        if all(have is not None for have in columns_of.values()):
            everywhere = set().union(*(h for h in columns_of.values() if h is not None))
            wrong += [f"*.{c}" for c in sorted(set(self._default) - everywhere)]
        _refuse_unknown(wrong)

    def check_table(self, table: str, known: frozenset[str] | None) -> None:
        """Refuse rules of ``table`` itself naming a column outside ``known`` (the backend's
        columns, learned on the table's first read where the catalog costs I/O)."""
        own = self._rules.get(table)
        if own and known:
            _refuse_unknown([f"{table}.{c}" for c in sorted(set(own) - known)])

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
        """Refuse a filter other than an exact look-up, any filter on a column that answers no
        look-up (:attr:`lookups`), or an ordering, on a redacted column."""
        redacted = self.columns(table)
        for flt in filters:
            if flt.column not in redacted:
                continue
            if not self.allows_lookups(table, flt.column):
                raise _refused(table, flt.column, "any filter", operation, lookups=self._lookups)
            if flt.op not in EXACT_OPERATORS:
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


def _refuse_unknown(wrong: list[str]) -> None:
    if wrong:
        raise ConfigurationError(
            "redaction rules name what the database does not have: "
            + ", ".join(wrong[:10])
            + (f" and {len(wrong) - 10} more" if len(wrong) > 10 else "")
            + " (a misspelt rule would leave the real column in clear)",
            variable="RAG_REDACT",
        )


def _refused(
    table: str, column: str, what: str, operation: str, *, lookups: str | None = None
) -> ColumnNotAllowedError:
    allowed = (
        f"no filter (redaction lookups={lookups!r}, RAG_REDACT_LOOKUPS)"
        if lookups is not None
        else f"only exact look-ups: {', '.join(sorted(op.value for op in EXACT_OPERATORS))}"
    )
    return ColumnNotAllowedError(
        f"column {column!r} of {table!r} is redacted: {what} on it is not allowed ({allowed})",
        table=table,
        column=column,
        operation=operation,
    )
