"""Envelope assembly: rows and errors in, the one :class:`~rag_agent.envelope.Envelope` out.

Every envelope :class:`~rag_agent.RAGAgent` returns (and every tool-input error envelope of
:mod:`rag_agent.tools`) is made by :func:`assemble` from an :class:`Outcome`, the state one run
gathers on its way. Records are built here too: :func:`page_result` turns a page of rows into
records with provenance and the summary (computed once, then cached with the page), and
:func:`fallback_page` does the same for the rows the fallback read.

Thread-safety: the functions are pure; an ``Outcome`` belongs to one run, and a ``PageResult``
is frozen and shared only through copies (:meth:`Outcome.take`).
"""

from __future__ import annotations

import copy
import datetime as dt
import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from persistence import AggregateResult, Filter, InvalidQueryError, is_identifier, redact_text
from rag_agent.envelope import (
    AggregateGroup,
    Aggregates,
    AnswerInfo,
    AppliedFilter,
    BackendInfo,
    Citation,
    ContextInfo,
    Envelope,
    ErrorInfo,
    FallbackReadInfo,
    IgnoredPart,
    RankingInfo,
    Record,
    ReformulationAttempt,
    build_records,
    canonical_value,
)
from rag_agent.envelope.checked_models import applied_filter_of, envelope_of, metadata_of
from rag_agent.envelope.summary import summarize_if_truncated
from rag_agent.hooks import FallbackCall, FallbackRead, FallbackResult
from rag_agent.specs import Condition, Ignored

__all__ = [
    "MAX_ERROR_MESSAGE",
    "Outcome",
    "PageResult",
    "aggregates_info",
    "applied_filters",
    "assemble",
    "backend_info",
    "clip",
    "error_envelope",
    "error_info",
    "fallback_page",
    "ignored_parts",
    "page_result",
    "shown_filters",
    "source_of",
    "utc_now",
]

#: Error messages in envelopes are cut to this many characters.
MAX_ERROR_MESSAGE = 500
#: The fallback model's answer text is cut to this many characters.
MAX_ANSWER_TEXT = 2000
_SCALAR_TYPES = frozenset({str, int, float, bool, type(None)})


def utc_now() -> dt.datetime:
    """The current time, aware, in UTC (the default clock of ``retrieved_at``)."""
    return dt.datetime.now(dt.UTC)


def source_of(table: object) -> str:
    """``"persistence.<table>"`` for a table name, ``"persistence"`` for anything else."""
    return f"persistence.{table}" if is_identifier(table) else "persistence"


@functools.lru_cache(maxsize=64)
def backend_info(kind: str, database: str | None) -> BackendInfo:
    """``metadata.backend``: the backend's kind and the database it read (no secret in either;
    see ``ReadOnlyPersistenceFacade.backend_database``). The model is frozen, so one per
    backend serves every envelope (not validated again for each run)."""
    return BackendInfo(kind=kind, database=database)


def clip(text: str, limit: int = MAX_ERROR_MESSAGE) -> str:
    """``text`` in at most ``limit`` characters, cut at a word boundary and ended with ``…``
    when longer: a message cut mid-word reads as a different word."""
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    space = head.rfind(" ")
    # One very long word (a hash, a URL) is cut where it must be.
    if space > limit // 2:
        head = head[:space]
    return head.rstrip(" ,;:") + "…"


def error_info(exc: BaseException | str) -> ErrorInfo:
    """An exception (or a runner's error text) as the envelope's ``metadata.error``."""
    if isinstance(exc, str):
        return ErrorInfo(type="FallbackError", message=clip(exc))
    message = redact_text(str(exc)) or type(exc).__name__  # a driver may echo a DSN
    return ErrorInfo(type=type(exc).__name__, message=clip(message))


def shown_filters(filters: Iterable[Filter]) -> dict[str, dict[str, Any]]:
    """The ``query_filters`` of a plain read: ``{column: {op: value}}``.

    Two filters with the same column and operator are refused: the metadata could not show both.

    >>> from persistence import Op
    >>> shown_filters([Filter("score", Op.GTE, 8)])
    {'score': {'gte': 8}}
    """
    shown: dict[str, dict[str, Any]] = {}
    for flt in filters:
        ops = shown.setdefault(flt.column, {})
        if flt.op.value in ops:
            raise InvalidQueryError(
                f"two {flt.op.value!r} filters on {flt.column!r}", field="filters"
            )
        ops[flt.op.value] = list(flt.value) if isinstance(flt.value, tuple) else flt.value
    return shown


def applied_filters(conditions: Iterable[Condition]) -> list[AppliedFilter]:
    """The envelope's ``metadata.filters`` of applied ``conditions`` (an ``in`` as a list)."""
    return [
        applied_filter_of(
            c.column, c.op.value, list(c.value) if isinstance(c.value, tuple) else c.value, c.source
        )
        for c in conditions
    ]


def ignored_parts(parts: Iterable[Ignored]) -> list[IgnoredPart]:
    """The envelope's ``metadata.ignored`` of ``parts``."""
    return [IgnoredPart(text=p.text, reason=p.reason) for p in parts]


def _has_containers(record: Record) -> bool:
    """Whether a caller could change a value of the record in place (a list, a dict, ...)."""
    if record.related is not None or record.provenance.redacted is not None:
        return True
    return not _SCALAR_TYPES.issuperset(map(type, (record.model_extra or {}).values()))


@dataclass(frozen=True, slots=True)
class PageResult:
    """One page as records, with its total, read time and summary; what the cache holds.

    Records are frozen models; ``mutable`` says whether any holds a nested container (or a raw
    row), in which case a shared result is handed out as deep copies (:meth:`Outcome.take`).
    """

    records: tuple[Record, ...]
    total_count: int
    retrieved_at: dt.datetime
    summary: dict[str, Any] | None
    mutable: bool
    related_capped: bool = False
    #: False when ``total_count`` is a lower bound (see ``facade.read(exact_total=False)``).
    total_exact: bool = True
    ranking: RankingInfo | None = (
        None  # set when the records are ranked (rag_agent.pipeline.ranking)
    )


def page_result(
    rows: Iterable[Mapping[str, Any]],
    total_count: int,
    *,
    table: str,
    retrieved_at: dt.datetime,
    include_raw: bool,
    summary_threshold: int,
    related_capped: bool = False,
    total_exact: bool = True,
) -> PageResult:
    """Records with provenance for ``rows`` read from ``table``, and their summary if truncated;
    related rows become child records (``related_capped``: the page's total bound cut some)."""
    records = tuple(
        build_records(
            rows, source=source_of(table), retrieved_at=retrieved_at, include_raw=include_raw
        )
    )
    return PageResult(
        records=records,
        total_count=total_count,
        retrieved_at=retrieved_at,
        summary=summarize_if_truncated(records, total_count, summary_threshold),
        mutable=include_raw or any(_has_containers(r) for r in records),
        related_capped=related_capped,
        total_exact=total_exact,
    )


def fallback_page(
    result: FallbackResult,
    *,
    limit: int,
    offset: int,
    now: Callable[[], dt.datetime],
    summary_threshold: int,
    include_raw: bool = False,
) -> PageResult:
    """The rows the fallback read, once each, as records; the page is ``offset``/``limit``.

    With ``include_raw`` each record's provenance carries the row as read, as on the query path.

    Only well-formed reads of a real table count; each record carries the time of its read.
    """
    records: list[Record] = []
    seen: set[tuple[str, str]] = set()
    for read in result.reads:
        if not isinstance(read, FallbackRead) or not is_identifier(read.table):
            continue
        source = source_of(read.table)
        for record in build_records(
            read.rows,
            source=source,
            retrieved_at=read.retrieved_at or now(),
            include_raw=include_raw,
        ):
            identity = (source, record.provenance.row_hash)
            if identity not in seen:
                seen.add(identity)
                records.append(record)
    page = tuple(records[offset : offset + limit])  # the window the metadata reports
    return PageResult(
        records=page,
        total_count=len(records),
        retrieved_at=now(),
        summary=summarize_if_truncated(page, len(records), summary_threshold),
        mutable=False,  # built for this run alone
    )


def aggregates_info(result: AggregateResult) -> Aggregates:
    """``result`` as the envelope's ``metadata.aggregates``, values in canonical JSON form."""
    return Aggregates(
        group_by=list(result.group_by),
        metrics=[str(m) for m in result.metrics],
        groups=[
            AggregateGroup(
                keys={k: canonical_value(v) for k, v in group.keys.items()},
                values={k: canonical_value(v) for k, v in group.metrics.items()},
            )
            for group in result.groups
        ],
        capped=result.capped,
        total_groups=result.total_groups,
    )


Fallback = Literal["agent", "reformulation", "suppressed", "disabled"]


@dataclass(slots=True)
class Outcome:
    """What one run found so far: the metadata-to-be and the records."""

    source: str
    filters: dict[str, Any] | None = None
    records: list[Record] = field(default_factory=list)
    total_count: int = 0
    retrieved_at: dt.datetime | None = None
    summary: dict[str, Any] | None = None
    cache: Literal["hit", "miss"] | None = None
    fallback: Fallback | None = None
    attempts: list[ReformulationAttempt] = field(default_factory=list)
    dropped_ids: int | None = None
    error: ErrorInfo | None = None
    applied: list[AppliedFilter] = field(default_factory=list)
    ignored: list[IgnoredPart] = field(default_factory=list)
    count_only: bool = False
    count_basis: str | None = None
    fallback_reads: list[FallbackReadInfo] = field(default_factory=list)
    aggregates: Aggregates | None = None
    related_capped: bool = False
    total_exact: bool = True
    ranking: RankingInfo | None = None
    context: ContextInfo | None = None
    answer: AnswerInfo | None = None

    def take_fallback(self, result: FallbackResult, page: PageResult) -> None:
        """Use what the agent fallback read: its cited rows as ``page``, the reads it made,
        the ids it cited without reading them, and the error that stopped it."""
        self.source = self.fallback = "agent"
        self.take(page, shared=False)
        self.cache = None
        self.dropped_ids = max(0, int(result.dropped_ids))
        self.fallback_reads = [
            FallbackReadInfo(table=call.table, filters=dict(call.filters), rows=call.rows)
            for call in result.calls
            if isinstance(call, FallbackCall)
        ]
        if result.error is not None:
            self.error = error_info(result.error)
        if isinstance(result.answer, str) and result.answer.strip():
            # The model's sentence, beside the records it rests on: the records are the rows it
            # cited and a tool read (the others were dropped and counted), so they are the
            # citations. A sentence that cites rows no tool read is not shown: it speaks of what
            # no read supports, which is what a model misled by row text writes.
            withheld = (
                f"the answer cited {self.dropped_ids} row(s) no tool read"
                if self.dropped_ids
                else None
            )
            text = "" if withheld else redact_text(clip(result.answer.strip(), MAX_ANSWER_TEXT))
            self.answer = AnswerInfo(
                text=text,
                withheld=withheld,
                citations=[
                    Citation(
                        table=r.provenance.source.removeprefix("persistence."),
                        id=r.provenance.row_id,
                    )
                    for r in self.records
                ],
                dropped_citations=self.dropped_ids,
            )

    def take_aggregate(self, result: AggregateResult, retrieved_at: dt.datetime) -> None:
        """Use an aggregate's answer: no records, the rows matched, the groups."""
        self.records, self.summary = [], None
        self.total_count, self.total_exact = result.matched, True
        self.retrieved_at = retrieved_at
        self.aggregates = aggregates_info(result)

    def take(self, page: PageResult, *, shared: bool) -> None:
        """Use ``page``'s records; copies of what a caller could change if ``shared``.

        A result the cache holds is shared with later runs; with the cache off, this run is the
        result's only user.
        """
        if page.mutable and shared:
            self.records = [record.model_copy(deep=True) for record in page.records]
        else:
            self.records = list(page.records)
        self.total_count = page.total_count
        self.total_exact = page.total_exact
        self.related_capped = page.related_capped
        self.ranking = page.ranking
        self.retrieved_at = page.retrieved_at
        summary = page.summary
        self.summary = copy.deepcopy(summary) if summary is not None and shared else summary

    def fail(self, exc: BaseException | str) -> None:
        """Record the error that ended the run: no records."""
        self.error = error_info(exc)
        self.records, self.total_count, self.summary = [], 0, None
        self.total_exact = True
        self.answer = None
        self.aggregates = None
        self.ranking = None


def assemble(
    outcome: Outcome,
    *,
    limit: int | None,
    offset: int | None,
    now: Callable[[], dt.datetime] = utc_now,
    backend: BackendInfo | None = None,
) -> Envelope:
    """The envelope of ``outcome``; ``limit``/``offset`` are the effective window (if known);
    ``backend`` the backend that answered, when known.

    ``has_more``/``next_offset`` are set when the window is known and no error ended the run.
    """
    paging: dict[str, Any] = {}
    counted = outcome.count_only or outcome.aggregates is not None
    if limit is not None and outcome.error is None and not counted:
        end = (offset or 0) + len(outcome.records)
        more = end < outcome.total_count
        paging = {"has_more": more, "next_offset": end if more else None}
    optional: dict[str, Any] = {
        "error": outcome.error,
        "fallback": outcome.fallback,
        "cache": outcome.cache,
        "filters": outcome.applied or None,
        "ignored": outcome.ignored or None,
        "count_only": True if outcome.count_only else None,
        "count_basis": outcome.count_basis,
        "related_capped": True if outcome.related_capped else None,
        "total_exact": None if outcome.total_exact else False,
        "reformulation_attempts": outcome.attempts or None,
        "fallback_dropped_ids": outcome.dropped_ids,
        "fallback_reads": outcome.fallback_reads or None,
        "aggregates": outcome.aggregates,
        "ranking": outcome.ranking,
        "context": outcome.context,
        "answer": outcome.answer,
        "summary": outcome.summary,
        "backend": backend,
        **paging,
    }
    # Built from values of the fields' exact types without a validation pass, else validated
    # (rag_agent.envelope.checked_models); unset stays unset: only what the run found counts as
    # set on the model.
    values = {
        "source": outcome.source,
        "query_filters": outcome.filters or None,
        "retrieved_at": outcome.retrieved_at or now(),
        "total_count": outcome.total_count,
        "limit": limit,
        "offset": offset,
    }
    values.update({key: value for key, value in optional.items() if value is not None})
    metadata = metadata_of(values)
    # The metadata was checked just now and the records are built by build_records (or copies
    # of them): the envelope holds them as they are, not validated a second time.
    return envelope_of(metadata, list(outcome.records))


def error_envelope(
    table: object,
    error: BaseException | str,
    *,
    now: Callable[[], dt.datetime] = utc_now,
) -> Envelope:
    """An envelope with no records and ``metadata.error``, for a read of ``table`` that failed."""
    outcome = Outcome(source_of(table))
    outcome.fail(error)
    return assemble(outcome, limit=None, offset=None, now=now)
