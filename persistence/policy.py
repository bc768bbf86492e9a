"""Access policy: which tables may be read or written, and optionally which columns.

Columns are open unless the policy restricts them: ``columns`` names the columns of given tables,
and ``default_columns`` ("only these columns anywhere") applies to every table ``columns`` does
not name, so a table nobody thought of exposes nothing but the defaults (default-deny).

Names are matched **exactly**: no case folding, trimming, quoting or schema prefix. A name that is
not a plain identifier is refused before any allow-list look-up, so ``"LEADS"``, ``" leads"``,
``"public.leads"`` and look-alike Unicode never reach a backend.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from persistence.errors import ColumnNotAllowedError, ConfigurationError, TableNotAllowedError
from persistence.query import is_identifier

__all__ = ["BUSINESS_TABLES", "GOVERNANCE_TABLES", "AccessPolicy"]

#: The tables an operational agent may read.
BUSINESS_TABLES: frozenset[str] = frozenset(
    {
        "campaigns",
        "clients",
        "conversations",
        "leads",
        "messages",
        "sequences",
        "staging_leads",
        "inquiries",
    }
)
#: Tables that define who the business serves: never writable, not even by ``PersistenceAgent``.
GOVERNANCE_TABLES: frozenset[str] = frozenset({"clients", "campaigns"})


def _names(values: Iterable[str], what: str) -> frozenset[str]:
    if isinstance(values, str | bytes):
        # frozenset("leads") would allow the tables "l", "e", "a", "d" and "s".
        raise ConfigurationError(f"{what} must be a collection of names, not a single {values!r}")
    names = frozenset(values)
    bad = sorted(repr(n) for n in names if not is_identifier(n))
    if bad:
        raise ConfigurationError(f"{what} holds names that are not identifiers: {', '.join(bad)}")
    return names


@dataclass(frozen=True)
class AccessPolicy:
    """Allow-lists for reads and writes; ``columns`` optionally restricts columns per table.

    ``default_columns`` is the column allow-list of every table ``columns`` does not name
    (``frozenset()``: such tables expose no column at all); ``None`` leaves them unrestricted.
    ``AccessPolicy.read_only()`` is what the facade uses: every business table readable, nothing
    writable. Immutable, so safe to share between threads.

    >>> policy = AccessPolicy.read_only(
    ...     columns={"leads": {"id", "email"}}, default_columns={"id", "name"}
    ... )
    >>> sorted(policy.allowed_columns("clients"))
    ['id', 'name']
    """

    read_tables: frozenset[str]
    write_tables: frozenset[str] = frozenset()
    columns: Mapping[str, frozenset[str]] | None = field(default=None)
    default_columns: frozenset[str] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "read_tables", _names(self.read_tables, "read_tables"))
        object.__setattr__(self, "write_tables", _names(self.write_tables, "write_tables"))
        if self.columns is not None:
            columns = {
                _table: _names(cols, f"columns[{_table!r}]")
                for _table, cols in self.columns.items()
            }
            # Read-only view: the policy a facade exposes cannot be widened by its holder.
            object.__setattr__(self, "columns", MappingProxyType(columns))
        if self.default_columns is not None:
            object.__setattr__(
                self, "default_columns", _names(self.default_columns, "default_columns")
            )

    @classmethod
    def read_only(
        cls,
        tables: Iterable[str] = BUSINESS_TABLES,
        columns: Mapping[str, Iterable[str]] | None = None,
        default_columns: Iterable[str] | None = None,
    ) -> AccessPolicy:
        """Read ``tables``; write nothing. ``columns`` and ``default_columns`` as for the class."""
        cols = (
            None
            if columns is None
            else {t: _names(c, f"columns[{t!r}]") for t, c in columns.items()}
        )
        defaults = None if default_columns is None else _names(default_columns, "default_columns")
        return cls(_names(tables, "tables"), frozenset(), cols, defaults)

    @classmethod
    def writer(cls, tables: Iterable[str] = BUSINESS_TABLES) -> AccessPolicy:
        """Read ``tables``; write them too, except the governance tables."""
        readable = _names(tables, "tables")
        return cls(readable, readable - GOVERNANCE_TABLES)

    def check_read(self, table: object, operation: str = "read") -> str:
        """Return ``table`` if it may be read, else raise ``TableNotAllowedError``."""
        return self._check_table(table, self.read_tables, operation)

    def check_write(self, table: object, operation: str = "write") -> str:
        """Return ``table`` if it may be written, else raise ``TableNotAllowedError``."""
        if isinstance(table, str) and table in GOVERNANCE_TABLES:
            raise TableNotAllowedError(
                f"{operation} on governance table {table!r} is never allowed",
                table=table,
                operation=operation,
            )
        return self._check_table(table, self.write_tables, operation)

    def allowed_columns(self, table: str) -> frozenset[str] | None:
        """The columns of ``table`` the policy allows; ``None`` when it does not restrict them.

        A table ``columns`` does not name gets ``default_columns``.
        """
        named = None if self.columns is None else self.columns.get(table)
        return self.default_columns if named is None else named

    def check_columns(self, table: str, columns: Iterable[str], operation: str = "read") -> None:
        """Raise ``ColumnNotAllowedError`` for a malformed column or one outside the policy."""
        allowed = self.allowed_columns(table)
        for column in columns:
            if not is_identifier(column):
                raise ColumnNotAllowedError(
                    f"column {column!r} is not a valid identifier",
                    table=table,
                    column=str(column),
                    operation=operation,
                )
            if allowed is not None and column not in allowed:
                raise ColumnNotAllowedError(
                    f"column {column!r} of {table!r} is not allowed by the access policy",
                    table=table,
                    column=column,
                    operation=operation,
                )

    @staticmethod
    def _check_table(table: object, allowed: frozenset[str], operation: str) -> str:
        if not is_identifier(table):
            raise TableNotAllowedError(
                f"table name {table!r} is not a valid identifier; expected one of "
                f"{', '.join(sorted(allowed)) or '(none)'}",
                table=str(table),
                operation=operation,
            )
        assert isinstance(table, str)
        if table not in allowed:
            raise TableNotAllowedError(
                f"{operation} on table {table!r} is not allowed; allowed: "
                f"{', '.join(sorted(allowed)) or '(none)'}",
                table=table,
                operation=operation,
            )
        return table
