"""The understanding step of a pipeline: rules first, then the extraction hook as a step."""

from __future__ import annotations

import datetime as dt
from typing import Any

from persistence.vocabulary import SchemaVocabulary
from rag_agent.pipeline.parts import PipelineParts
from rag_agent.pipeline.related import reachable_relations
from rag_agent.runtime.deadline import LLMDeadline, deadline_scope
from rag_agent.runtime.effects import Call, Steps
from rag_agent.runtime.trace import timed
from rag_agent.specs import Condition, ExtractionRequest, Understanding
from rag_agent.understanding.request import Request, column_infos, understand_request


class UnderstandingSteps(PipelineParts):
    """Step 2: the request understood by rules, and the extraction hook asked as a step."""

    __slots__ = ()

    def _understood(
        self,
        log: Any,
        deadline: LLMDeadline,
        text: str,
        table: str | None,
        given: tuple[Condition, ...] | None,
        count_only: bool | None,
        now: dt.datetime | None = None,
        vocabulary: SchemaVocabulary | None = None,
        history: tuple[str, ...] = (),
    ) -> Steps[tuple[Request, bool]]:
        """The request, and whether the rules alone made it (no model was asked); read with
        ``vocabulary``, the database's as the run learned it (the sample's when ``None``)."""
        now = self.now() if now is None else now
        asked: list[tuple[str, str]] = []

        def note(text: str, table: str) -> Understanding:
            asked.append((text, table))
            return Understanding()

        def understood(extract: Any) -> Request:
            return understand_request(
                text, table=table, explicit=given, count_only=count_only, now=now,
                extract=extract, vocabulary=vocabulary, synonyms=self.settings.synonyms,
            )  # fmt: skip

        with timed("rules", table=table):
            request = understood(None if self.extractor is None else note)
        if not asked:
            return request, True
        found = yield from self._extract(log, deadline, *asked[0], history=history)
        return understood(lambda _text, _table: found), False

    def _extract(
        self,
        log: Any,
        deadline: LLMDeadline,
        text: str,
        table: str,
        history: tuple[str, ...] = (),
    ) -> Steps[Understanding]:
        # The extractor meters and caches its own model calls; it is told the table's allowed
        # columns, their kinds and operators, so its answer is constrained by the schema.
        assert self.extractor is not None
        try:
            request = ExtractionRequest(
                text=text,
                table=table,
                columns=column_infos(self.facade, table),
                tables=self.facade.tables(),
                now=self.now(),
                relations=reachable_relations(self.facade, table),
                history=history,
            )
            with deadline_scope(deadline):
                found = yield Call("extract", (request,))
            if not isinstance(found, Understanding):
                raise TypeError(f"the extractor returned {type(found).__name__}")
        except Exception as exc:  # an LLM failure only means "nothing understood"
            self.log_error(log, "rag.filters.llm_error", exc, step="filters")
            return Understanding()
        return found
