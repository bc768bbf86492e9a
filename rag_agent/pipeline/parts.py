"""The agent's parts a pipeline step reads, and the helpers every step shares."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from persistence import (
    Filter,
    InvalidQueryError,
    Order,
    PersistenceError,
    ReadOnlyPersistenceFacade,
    brief_repr,
)
from persistence.query import is_identifier
from persistence.vocabulary import SchemaVocabulary
from rag_agent.envelope import Envelope
from rag_agent.envelope.assemble import (
    MAX_ERROR_MESSAGE,
    Outcome,
    applied_filters,
    assemble,
    backend_info,
    error_info,
    source_of,
)
from rag_agent.hooks import FallbackRunner
from rag_agent.pipeline.reformulation import LEGACY_ROLES, Roles
from rag_agent.runtime.cache import QueryCache
from rag_agent.runtime.effects import Call, Steps
from rag_agent.runtime.ratelimit import RateLimiter
from rag_agent.settings import RAGSettings
from rag_agent.specs import Condition
from rag_agent.understanding.conditions import query_filters_view
from rag_agent.understanding.request import ConditionExtractor
from rag_agent.understanding.rules.lexicon import lexicon_of

_Window = tuple[int, int]
#: ``(limit, offset, include_raw)`` as the caller gave them, checked by ``Pipeline._page``.
_Page = tuple[int | None, int | None, bool]


def _sequence(value: object, what: str) -> tuple[Any, ...]:
    # tuple("email") would split a name into letters: say what was expected instead.
    if isinstance(value, str | bytes | Mapping | Filter | Order) or not isinstance(value, Iterable):
        raise InvalidQueryError(
            f"{what} must be a sequence, not {type(value).__name__}", field=what
        )
    return tuple(value)


class PipelineParts:
    """The agent's parts a step reads (the fields of
    :class:`~rag_agent.pipeline.pipeline.Pipeline`),
    and the helpers every step shares: the page window, the envelope, the error log."""

    __slots__ = ()

    facade: ReadOnlyPersistenceFacade
    settings: RAGSettings
    cache: QueryCache
    limiter: RateLimiter
    extractor: ConditionExtractor | None
    fallback: FallbackRunner | None
    now: Callable[[], dt.datetime]

    def _page(self, page: _Page) -> tuple[_Window, bool]:
        # The checks run and read share: the page window (defaulted and clamped here alone) and
        # include_raw.
        limit, offset, include_raw = page
        window = self._window(limit, offset)
        if type(include_raw) is not bool:
            raise InvalidQueryError("include_raw must be a bool", field="include_raw")
        return window, include_raw

    def _window(self, limit: object, offset: object) -> _Window:
        settings = self.settings
        if limit is None:
            eff_limit = settings.default_limit
        elif type(limit) is int and limit >= 1:
            eff_limit = min(limit, settings.max_limit)
        else:
            raise InvalidQueryError(
                f"limit must be a positive int, not {brief_repr(limit)}", field="limit"
            )
        if offset is None:
            eff_offset = 0
        elif type(offset) is int and offset >= 0:
            eff_offset = offset
        else:
            raise InvalidQueryError(
                f"offset must be a non-negative int, not {brief_repr(offset)}", field="offset"
            )
        return eff_limit, eff_offset

    @staticmethod
    def _applied(outcome: Outcome, conditions: tuple[Condition, ...]) -> None:
        outcome.filters = query_filters_view(conditions)
        outcome.applied = applied_filters(conditions)

    def learned_vocabulary(self) -> Steps[SchemaVocabulary | None]:
        """The database's vocabulary as a pipeline call (an awaited run learns it in a worker
        thread); ``None`` when it cannot be learned."""
        try:
            learned: SchemaVocabulary = yield Call("vocabulary", (), {})
        except PersistenceError:
            return None
        return learned

    def vocabulary(self) -> SchemaVocabulary | None:
        """The database's vocabulary, learned through the facade; ``None`` when it cannot be
        read (the rules then read with the sample's, and the facade still checks every name)."""
        try:
            return self.facade.vocabulary()
        except PersistenceError:
            return None

    def roles(self, table: str) -> Roles:
        """The company, e-mail and key columns of ``table`` the reformulations relax, from the
        database's vocabulary (the legacy view's columns when it cannot be learned)."""
        vocabulary = self.vocabulary()
        if vocabulary is None or vocabulary.table(table) is None:
            return LEGACY_ROLES
        lexicon = lexicon_of(vocabulary, table, self.settings.synonyms)
        keys = tuple(c.name for c in lexicon.columns.values() if c.is_key)
        return Roles(lexicon.first("company"), lexicon.role("email"), keys)

    def text_column(self, table: str) -> str | None:
        """The subject-like text column of ``table`` (what "about …" searches)."""
        vocabulary = self.vocabulary()
        if vocabulary is None:
            return None
        return lexicon_of(vocabulary, table, self.settings.synonyms).first("text")

    # -- helpers -----------------------------------------------------------------------------

    def error_envelope(self, table: object, error: BaseException | str) -> Envelope:
        """An envelope with no records reporting ``error`` for a request about ``table``."""
        return self.finish(Outcome(source_of(table), error=error_info(error)))

    def finish(self, outcome: Outcome, window: _Window | None = None) -> Envelope:
        """The envelope of ``outcome``: the one place an agent's envelopes are built."""
        limit, offset = window if window is not None else (None, None)
        facade = self.facade
        backend = backend_info(facade.backend_name, facade.backend_database)
        return assemble(outcome, limit=limit, offset=offset, now=self.now, backend=backend)

    def _refuse(self, log: Any, outcome: Outcome, exc: Exception) -> Envelope:
        self.log_error(log, "rag.error", exc, step="input")
        outcome.fail(exc)
        return self.finish(outcome)

    def _done(
        self, log: Any, event: str, outcome: Outcome, table: str, window: _Window
    ) -> Envelope:
        envelope = self.finish(outcome, window)
        log.debug(
            event,
            table=_shown(table),
            total_count=outcome.total_count,
            records=len(outcome.records),
            cache=outcome.cache,
            fallback=outcome.fallback,
            error=None if outcome.error is None else outcome.error.type,
        )
        return envelope

    def log_error(self, log: Any, event: str, exc: BaseException, **context: Any) -> None:
        """Log ``exc`` at warning level; with ``RAG_DEBUG`` its traceback too."""
        if "table" in context:
            context["table"] = _shown(context["table"])
        log.warning(
            event,
            error_type=type(exc).__name__,
            error=str(exc)[:MAX_ERROR_MESSAGE],
            exc_info=exc if self.settings.debug else None,
            **context,
        )


def _shown(table: object) -> object:
    """``table`` as logged: a name that is no identifier (a caller's 100 KB string) is ``"?"``,
    so a hostile name is never logged whole on every call."""
    return table if table is None or is_identifier(table) else "?"
