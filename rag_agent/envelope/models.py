"""The envelope's pydantic models: metadata, records and the provenance each record carries."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Fallback = Literal["agent", "reformulation", "suppressed", "disabled"]


def _unset(value: object) -> bool:
    return value is None


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ErrorInfo(_Frozen):
    """Why a run produced no (or only partial) data: the error's type name and a message."""

    type: str = Field(description="The exception class name, e.g. 'TableNotAllowedError'.")
    message: str = Field(description="A human-readable explanation.")


class ReformulationAttempt(_Frozen):
    """One reformulated query: why it was tried, its filters and how many rows it matched."""

    reason: Literal["drop_email", "shorten_company_suffix", "similar_company", "drop_company"]
    filters: dict[str, Any]
    result_count: int = Field(ge=0)


class AppliedFilter(_Frozen):
    """One condition the query applied, with the value as the column's type read it."""

    column: str
    op: Literal["eq", "ieq", "neq", "gt", "gte", "lt", "lte", "in", "is_null", "icontains", "ilike"]
    value: Any = Field(description="The value after coercion to the column's type.")
    source: Literal["rules", "llm", "tool", "reformulation", "context"] = Field(
        description=(
            "Who understood it: the rule parser, the LLM extraction, a tool's arguments, a "
            "reformulation that replaced the value (a similar company name), or the "
            "conversation (the rows of an earlier answer a follow-up refers to)."
        )
    )


class IgnoredPart(_Frozen):
    """A part of the request that was understood but not applied, and why."""

    text: str = Field(description="The words (or condition) not applied.")
    reason: str = Field(description="Why it was not applied.")


class AggregateGroup(_Frozen):
    """One group of an aggregate: its key values and its metric values, in canonical JSON form
    (``Decimal``/UUID as ``str``, dates and times ISO 8601)."""

    keys: dict[str, Any] = Field(description="The group-by columns' values ({} when ungrouped).")
    values: dict[str, Any] = Field(
        description="Each metric's value by its name ('count', 'sum:score', ...); exact numbers "
        "(numeric/bigint sums, averages) as decimal strings."
    )


class Aggregates(_Frozen):
    """What an aggregate run computed: the grouping, the metrics, the groups in key order."""

    group_by: list[str] = Field(description="The columns grouped by (empty: one group).")
    metrics: list[str] = Field(description="The metrics: 'count' or '<function>:<column>'.")
    groups: list[AggregateGroup]
    capped: bool = Field(description="True when more groups existed than were returned.")
    total_groups: int | None = Field(
        default=None, ge=0, description="How many groups there were in all, when known."
    )


class FallbackReadInfo(_Frozen):
    """One read the agent fallback made: the table, its filters and how many rows came back."""

    table: str
    filters: dict[str, Any] = Field(description="The read's filters as {column: {op: value}}.")
    rows: int = Field(ge=0, description="Rows that read returned.")


class RedactedField(_Frozen):
    """How one field of a record was redacted before it left the facade."""

    method: Literal["mask", "hash", "drop"] = Field(
        description="mask: shown partly or as '***'; hash: a keyed pseudonym; drop: left out."
    )
    style: str | None = Field(
        default=None, description="The mask's style: full, email, phone or initials."
    )
    commitment: str = Field(
        pattern=r"^[0-9a-f]{64}$",
        description='HMAC-SHA256 under the redaction key of ["field", table, original id, '
        "column, original value] in canonical JSON: checkable only with the original and the key.",
    )


class Relevance(_Frozen):
    """Where a ranked record stands: its fused score, its place and its rank in each leg.

    It sits in the record's ``provenance`` (how the record was found), outside the hashed
    fields, so every record verifies as before; not beside the row's fields, where a column
    called ``score`` (leads have one) would collide with it.
    """

    score: float = Field(description="The fused relevance score; higher is better.")
    rank: int = Field(ge=1, description="The record's 1-based place in the whole ranking.")
    ranks: dict[str, int | None] = Field(
        description="Its 1-based rank in each leg ('keyword', 'semantic'); null where that leg "
        "did not rank it."
    )


class Provenance(_Frozen):
    """Where a record came from, when, and the hash that lets anyone verify it."""

    source: str = Field(description="'persistence.<table>': the table the row was read from.")
    row_id: Any = Field(description="The row's primary key (its 'id' field), or null.")
    row_hash: str = Field(pattern=r"^[0-9a-f]{64}$", description="SHA-256 of the canonical row.")
    retrieved_at: dt.datetime = Field(description="When the row was read (UTC).")
    raw_row: dict[str, Any] | None = Field(
        default=None,
        description="The row exactly as read (after redaction); only with include_raw=True.",
    )
    # Left out when unset: records of unredacted rows serialise exactly as before.
    redacted: dict[str, RedactedField] | None = Field(
        default=None,
        exclude_if=_unset,
        description="The fields redacted before the row left the facade, by column; row_hash is "
        "over the fields as shown.",
    )
    source_hash: str | None = Field(
        default=None,
        exclude_if=_unset,
        pattern=r"^[0-9a-f]{64}$",
        description='With redaction: HMAC-SHA256 under the redaction key of ["row", table, '
        "original row] in canonical JSON, which a holder of the original row and the key can "
        "check (RedactionPolicy.verify).",
    )
    relevance: Relevance | None = Field(
        default=None,
        exclude_if=_unset,
        description="For a ranked record: its score, place and per-leg ranks.",
    )


#: The keys of a record that are not fields of its row (and so not hashed).
OUTSIDE_ROW = frozenset({"provenance", "related", "related_truncated"})


class RankingInfo(_Frozen):
    """How ranked records were ranked: the mode that ran, the words, the legs."""

    mode: Literal["hybrid", "keyword", "semantic"] = Field(description="The mode that ran.")
    query: str = Field(description="The text the legs ranked by (request framing removed).")
    legs: list[str] = Field(description="The legs that ranked, in fusion order.")
    degraded: str | None = Field(
        default=None,
        exclude_if=_unset,
        description="What could not run and what ran instead, when not all did.",
    )
    corrections: dict[str, str] | None = Field(
        default=None,
        exclude_if=_unset,
        description="Misspelled words of the text and the table's own words the legs read "
        "instead (typed -> read as), when any was corrected.",
    )


class ContextInfo(_Frozen):
    """How a question asked in a conversation was read against the turns before it."""

    kind: Literal["fresh", "refine", "related", "item", "page"] = Field(
        description="fresh: a question of its own; refine: the previous turn's conditions plus "
        "or minus this one's; related: the rows related to the previous answer's; item: one "
        "record of the previous answer; page: the previous query's next (or previous) page."
    )
    turn: int | None = Field(
        default=None, ge=1, description="The number of the turn it built on (null when fresh)."
    )
    carried: list[str] = Field(
        default_factory=list,
        description="What it took from that turn: its conditions, as 'column op value', the "
        "rows it refers to, the topic, the count.",
    )
    dropped: list[str] = Field(
        default_factory=list,
        description="Conditions of that turn it did not keep (replaced or excluded).",
    )


class TraceStep(_Frozen):
    """One step of a run: what ran, on which table, what came back and how long it took."""

    step: str = Field(
        description="rules, extract, vocabulary, read, count, search, aggregate, fallback; "
        "inside a fallback: model (one iteration) and the tool calls by name."
    )
    ms: float = Field(ge=0, description="Wall-clock milliseconds.")
    table: str | None = Field(default=None, exclude_if=_unset)
    conditions: list[str] | None = Field(
        default=None,
        exclude_if=_unset,
        description="The conditions as 'column op' (values are never traced).",
    )
    rows: int | None = Field(default=None, exclude_if=_unset, ge=0)
    total: int | None = Field(default=None, exclude_if=_unset, ge=0)
    status: Literal["ok", "refused", "error"] = "ok"
    note: str | None = Field(
        default=None,
        exclude_if=_unset,
        description="Why it ran (a reformulation's reason) or why it was refused.",
    )
    steps: list[TraceStep] | None = Field(
        default=None, exclude_if=_unset, description="The steps inside it (a fallback's)."
    )


class TraceInfo(_Frozen):
    """What a run did, in order, with its timings (``run(..., trace=True)``)."""

    total_ms: float = Field(ge=0, description="The run's wall-clock milliseconds.")
    steps: list[TraceStep]
    omitted: int = Field(
        default=0, ge=0, description="Steps left out past the trace's bound (RAG_TRACE_MAX_STEPS)."
    )


class Citation(_Frozen):
    """A row an answer relies on: its table and id, as read."""

    table: str
    id: Any


class AnswerInfo(_Frozen):
    """The fallback model's answer: its text, and the rows it cites (each one a record of this
    envelope: a citation of a row no tool read is dropped and counted instead)."""

    text: str = Field(
        description="The model's sentence for the user (bounded in length; empty when withheld)."
    )
    citations: list[Citation] = Field(
        description="The records the answer rests on, by table and id, in the answer's order."
    )
    dropped_citations: int = Field(
        default=0, ge=0, description="Rows it cited that no tool call read (left out)."
    )
    withheld: str | None = Field(
        default=None,
        exclude_if=_unset,
        description="Why the text is not shown: an answer citing rows no tool read states what "
        "no read supports (a model misled by row text does), so only its verified records are.",
    )


class BackendInfo(_Frozen):
    """Which backend answered: its kind, and the database it read, named without any secret."""

    kind: str = Field(description="The backend's name: 'memory', 'postgres', 'supabase', ...")
    database: str | None = Field(
        default=None,
        exclude_if=_unset,
        description="PostgreSQL: the database name; Supabase: the project's host name; memory: "
        "the store's name ('sample' for the CLI's bundled sample). Never a user, password or key.",
    )


class Record(BaseModel):
    """One row's fields (as read) plus its ``provenance``; with related rows, ``related``
    (relation name -> child records) and ``related_truncated``."""

    model_config = ConfigDict(frozen=True, extra="allow")

    provenance: Provenance
    # Left out when unset: records without related rows serialise exactly as before.
    related: dict[str, list[Record]] | None = Field(
        default=None,
        exclude_if=_unset,
        description="Related rows by relation name, each a record with its own provenance; "
        "outside the hashed fields.",
    )
    related_truncated: list[str] | None = Field(
        default=None,
        exclude_if=_unset,
        description="The relations whose lists hold fewer rows than match (a per-parent or "
        "total bound cut them).",
    )


class Metadata(_Frozen):
    """What was asked, what was found, and how the answer was produced."""

    source: str = Field(description="'persistence.<table>', or 'agent' for fallback records.")
    query_filters: dict[str, Any] | None = Field(
        description=(
            "The filters of the query that produced the records (null when none): the keys id, "
            "email, company, client_id as before, and {column: {op: value}} for other conditions."
        )
    )
    retrieved_at: dt.datetime = Field(description="When the records were read (UTC).")
    total_count: int = Field(ge=0, description="Rows matching the filters, not the page length.")
    error: ErrorInfo | None = None
    fallback: Fallback | None = None
    has_more: bool | None = Field(
        default=None, description="Whether rows after this page match (false on the last page)."
    )
    next_offset: int | None = Field(
        default=None, ge=0, description="The offset of the next page, when has_more is true."
    )
    count_only: bool | None = Field(
        default=None, description="True when only the number of matches was asked for."
    )
    count_basis: str | None = Field(
        default=None,
        description=(
            "What a count with a topic counted: the rows matching the filters that mention the "
            "topic's words, or, when none does, the rows matching the filters."
        ),
    )
    related_capped: bool | None = Field(
        default=None,
        description="True when the bound on related rows in all cut at least one related list.",
    )
    total_exact: bool | None = Field(
        default=None,
        description=(
            "False when total_count is a lower bound: with exact totals off (RAG_EXACT_TOTALS=0) "
            "the matches are counted only up to the page's end plus one. Absent: exact."
        ),
    )
    summary: dict[str, Any] | None = Field(
        default=None,
        description="Per-column statistics of the returned page, when many rows match.",
    )
    cache: Literal["hit", "miss"] | None = None
    limit: int | None = Field(default=None, ge=1, description="Effective limit after clamping.")
    offset: int | None = Field(default=None, ge=0)
    filters: list[AppliedFilter] | None = Field(
        default=None, description="Each condition the query applied, and who understood it."
    )
    ignored: list[IgnoredPart] | None = Field(
        default=None, description="Parts of the request that were not applied, and why."
    )
    reformulation_attempts: list[ReformulationAttempt] | None = None
    fallback_dropped_ids: int | None = Field(
        default=None,
        ge=0,
        description="Row ids the agent fallback cited without having read them (dropped).",
    )
    fallback_reads: list[FallbackReadInfo] | None = Field(
        default=None, description="The reads the agent fallback made, in order."
    )
    aggregates: Aggregates | None = Field(
        default=None,
        description="Counts and metrics per group, for an aggregate run (records are then empty).",
    )
    ranking: RankingInfo | None = Field(
        default=None,
        description="Set when the records come back ranked by relevance to the request's topic.",
    )
    context: ContextInfo | None = Field(
        default=None,
        description="For a question asked in a conversation: how it was read against the "
        "turns before it.",
    )
    answer: AnswerInfo | None = Field(
        default=None,
        description="The fallback model's answer and its verified citations, when the agent "
        "fallback answered.",
    )
    trace: TraceInfo | None = Field(
        default=None, description="What ran and how long it took, with trace=True."
    )
    backend: BackendInfo | None = Field(
        default=None,
        description="The backend that answered (set by an agent; the same bytes on two backends "
        "would otherwise not say which one read them).",
    )
