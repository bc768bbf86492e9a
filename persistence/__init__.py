"""A least-privilege data layer: a read-only, allow-listed facade over memory, PostgreSQL or
Supabase backends. Knows nothing about LLMs.

>>> from persistence import create_read_only_facade, Filter, Op
>>> facade = create_read_only_facade(kind="memory")
>>> facade.read("leads", [Filter("company_name", Op.ICONTAINS, "acme")]).total_count
0
"""

from persistence.aggregate import AggregateResult, DistinctValues, Group, Metric
from persistence.backends.base import Backend
from persistence.backends.memory import MemoryBackend, MemoryStore, default_store
from persistence.capabilities import Capabilities
from persistence.closing import Closing
from persistence.errors import (
    AggregatesDisabledError,
    BackendError,
    BackendUnavailableError,
    ColumnNotAllowedError,
    ConfigurationError,
    InvalidQueryError,
    PersistenceError,
    PersistencePermissionError,
    QueryTimeoutError,
    TableNotAllowedError,
    UnsupportedOperatorError,
    brief_repr,
)
from persistence.facade import PersistenceAgent, ReadOnlyPersistenceFacade
from persistence.factory import (
    create_persistence_agent,
    create_read_only_facade,
    known_kinds,
    register_backend,
)
from persistence.logs import get_logger
from persistence.policy import BUSINESS_TABLES, GOVERNANCE_TABLES, AccessPolicy
from persistence.query import Filter, Op, Order, Page, Query, is_identifier
from persistence.redaction import (
    EXACT_OPERATORS,
    FieldRedaction,
    RedactedRow,
    RedactionPolicy,
    RowRedaction,
)
from persistence.relations import (
    DEFAULT_RELATED_LIMIT,
    MAX_RELATED_LIMIT,
    RELATED_TOTAL_LIMIT,
    Include,
    RelatedRows,
    Relation,
)
from persistence.secrets import RedactingFormatter, redact_secrets, redact_text, register_secret
from persistence.settings import PersistenceSettings
from persistence.values.canonical import canonical_value, non_finite_text
from persistence.values.like import escape_like
from persistence.values.types import ColumnKind, ColumnType, column_type

__all__ = [
    "BUSINESS_TABLES",
    "DEFAULT_RELATED_LIMIT",
    "EXACT_OPERATORS",
    "GOVERNANCE_TABLES",
    "MAX_RELATED_LIMIT",
    "RELATED_TOTAL_LIMIT",
    "AccessPolicy",
    "AggregateResult",
    "AggregatesDisabledError",
    "Backend",
    "BackendError",
    "BackendUnavailableError",
    "Capabilities",
    "Closing",
    "ColumnKind",
    "ColumnNotAllowedError",
    "ColumnType",
    "ConfigurationError",
    "DistinctValues",
    "FieldRedaction",
    "Filter",
    "Group",
    "Include",
    "InvalidQueryError",
    "MemoryBackend",
    "MemoryStore",
    "Metric",
    "Op",
    "Order",
    "Page",
    "PersistenceAgent",
    "PersistenceError",
    "PersistencePermissionError",
    "PersistenceSettings",
    "Query",
    "QueryTimeoutError",
    "ReadOnlyPersistenceFacade",
    "RedactedRow",
    "RedactingFormatter",
    "RedactionPolicy",
    "RelatedRows",
    "Relation",
    "RowRedaction",
    "TableNotAllowedError",
    "UnsupportedOperatorError",
    "brief_repr",
    "canonical_value",
    "column_type",
    "create_persistence_agent",
    "create_read_only_facade",
    "default_store",
    "escape_like",
    "get_logger",
    "is_identifier",
    "known_kinds",
    "non_finite_text",
    "redact_secrets",
    "redact_text",
    "register_backend",
    "register_secret",
]
