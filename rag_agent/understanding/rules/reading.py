"""The state of reading one request: the text with its claimed spans, and what was found.

Each rule claims the span it reads (its characters become NUL, which cannot occur in the text),
so a later rule cannot read it again: ``client_id=7`` never also yields ``id=7``, and a date or a
title is never taken for a company.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from persistence import Op
from persistence.vocabulary import SchemaVocabulary
from rag_agent.specs import Condition, Ignored, Through
from rag_agent.understanding.rules.gates import Said, said
from rag_agent.understanding.rules.lexicon import (
    Lexicon,
    lexicon_with,
    synonyms_key,
    triggers_besides,
)
from rag_agent.understanding.rules.tokens import Words, tokenize, unclaimed

__all__ = ["Reading", "plural"]

_MASK = "\x00"


def _splits_word(text: str, start: int, end: int) -> bool:
    """Whether masking ``[start, end)`` of ``text`` leaves part of a run of ASCII letters and
    digits unmasked (or is no span of it), so that a gate's words no longer hold every word."""
    if not 0 <= start < end <= len(text):
        return True
    return (start > 0 and text[start - 1 : start + 1].isalnum()) or (
        end < len(text) and text[end - 1 : end + 1].isalnum()
    )


def plural(table: str) -> str:
    """How a reason names a table's rows: ``staging_leads`` → ``staging leads``."""
    return table.replace("_", " ")


class Reading:
    """One request being read for ``table`` (the table its words are read against).

    A plain class with slots, not a dataclass: one is made per request, and its set-up (no
    default factories, no generated ``__init__`` indirection) is part of every question's cost.
    """

    __slots__ = (
        "_claimed",
        "_folded",
        "_lexicon",
        "_synonyms",
        "_words",
        "conditions",
        "ignored",
        "original",
        "said",
        "synonyms",
        "table",
        "table_span",
        "text",
        "through",
        "vocabulary",
    )

    def __init__(
        self,
        original: str,
        table: str,
        vocabulary: SchemaVocabulary,
        synonyms: Mapping[str, tuple[str, ...]] | None = None,
        text: str = "",
    ) -> None:
        self.original = original
        self.table = table
        self.vocabulary = vocabulary
        self.synonyms = synonyms
        self.text = text or original
        #: Where the text names its table ("imported leads"), once known: no value is read there.
        self.table_span: tuple[int, int] | None = None
        self._lexicon: Lexicon | None = None
        self.conditions: list[Condition] = []
        self.ignored: list[Ignored] = []
        self.through: list[Through] = []
        self._words: Words | None = None
        #: Spans claimed since :attr:`words` was last read.
        self._claimed: list[tuple[int, int]] = []
        #: The words of the text, for the rules' gates (:meth:`says`); ``None`` once unknown.
        self.said: Said | None = said(original)
        # Lower-cased once (by :func:`.gates.said`), for the cheap pre-checks of
        # :meth:`may_hold`; ``None`` when the text is not ASCII (case-insensitive matching then
        # has cases ``lower`` does not show), as ``said`` is then.
        self._folded = None if self.said is None else self.said.folded
        self._synonyms = synonyms_key(synonyms)  # keyed once, for every table's words

    @property
    def may_capitalise(self) -> bool:
        """Whether the text may hold an upper-case letter: ``False`` only for lower-case ASCII."""
        return self._folded is None or self._folded != self.original

    def may_hold(self, words: tuple[str, ...]) -> bool:
        """Whether the text may hold one of ``words`` (lower case), read case-insensitively:
        ``False`` only when none occurs, so a rule whose every match holds one can be skipped."""
        folded = self._folded
        if folded is None:
            return True
        for word in words:  # noqa: SIM110 (a plain loop: no generator per call, run ~20 times)
            if word in folded:
                return True
        return False

    def says(self, words: frozenset[str]) -> bool:
        """Whether the text may hold one of ``words`` (lower case) written whole:
        ``False`` only when none is a word of it (see :mod:`.gates`)."""
        found = self.said
        return found is None or not words.isdisjoint(found.words)

    @property
    def lexicon(self) -> Lexicon:
        """The words of the table being read, from the database's vocabulary."""
        kept = self._lexicon
        if kept is None or kept.table != self.table:
            kept = self._lexicon = self.lexicon_of(self.table)
        return kept

    def lexicon_of(self, table: str) -> Lexicon:
        """The words of any ``table`` of the vocabulary, with this reading's synonyms."""
        return lexicon_with(self.vocabulary, table, self._synonyms)

    def triggers_besides(self, table: str) -> frozenset[str]:
        """Every stem that may start a phrase of a table other than ``table``, with this
        reading's synonyms (see :func:`~.lexicon.triggers_besides`)."""
        return triggers_besides(self.vocabulary, table, self._synonyms)

    @property
    def known(self) -> bool:
        """Whether the vocabulary describes the table being read."""
        return self.vocabulary.table(self.table) is not None

    def has(self, column: str) -> bool:
        """Whether the table has ``column``; for a table the vocabulary does not describe the
        rules cannot tell, so they answer yes and leave the verdict to the facade's own check."""
        return self.lexicon.has(column) or not self.known

    def claim(self, start: int, end: int) -> None:
        """Mark ``[start, end)`` as read."""
        if self.said is not None and start < end and _splits_word(self.original, start, end):
            # What is left of the word is a word :attr:`said` does not hold: gate no more.
            self.said = None
        if self._words is not None:
            if 0 <= start <= end <= len(self.text):
                self._claimed.append((start, end))
            else:  # not a span of the text: its words are read afresh when next asked for
                self._words = None
        self.text = self.text[:start] + _MASK * (end - start) + self.text[end:]

    @property
    def words(self) -> Words:
        """The words of the unclaimed text: tokenised once, then kept up to date claim by
        claim (see :func:`~rag_agent.understanding.rules.tokens.unclaimed`)."""
        words = self._words
        if words is None:
            words = self._words = Words(tokenize(self.text))
            self._claimed.clear()
        elif self._claimed:
            words = self._words = Words(unclaimed(words.tokens, self.text, self._claimed))
            self._claimed.clear()
        return words

    def span(self, start: int, end: int) -> str:
        """The original words of ``[start, end)``, whitespace collapsed."""
        return " ".join(self.original[start:end].split())

    def add(self, column: str, op: Op, value: Any) -> None:
        """Add ``column op value`` once (a repeated condition is kept once)."""
        condition = Condition(column, op, value)
        if condition not in self.conditions:
            self.conditions.append(condition)

    def ignore(self, start: int, end: int, reason: str, *, claim: bool = True) -> None:
        """Record ``[start, end)`` as recognised but not applied, and claim it (by default)."""
        text = self.span(start, end).strip(" ,.;:!?")
        if text and all(item.text != text for item in self.ignored):
            self.ignored.append(Ignored(text, reason))
        if claim:
            self.claim(start, end)

    def apply(self, start: int, end: int, column: str, op: Op, value: Any, what: str) -> None:
        """Add ``column op value`` when the table has ``column``; otherwise ignore the span."""
        if self.has(column):
            self.add(column, op, value)
            self.claim(start, end)
        else:
            self.ignore(start, end, f"{plural(self.table)} have no {what}")

    def finditer(
        self,
        regex: re.Pattern[str],
        needs: tuple[str, ...] = (),
        words: frozenset[str] = frozenset(),
    ) -> list[re.Match[str]]:
        """The matches of ``regex`` in the unclaimed text (computed before any is claimed).

        ``needs``: words (lower case) one of which every match holds; when the text holds none,
        the regex is not run (claiming only masks text, so the original text is checked).
        ``words``: words (lower case) one of which every match holds written whole (see
        :meth:`says`); when the text says none, the regex is not run either.
        """
        # The gates of :meth:`says` and :meth:`may_hold`, inlined: run ~20 times per request.
        found = self.said
        if words and found is not None and words.isdisjoint(found.words):
            return []
        folded = self._folded
        if needs and folded is not None:
            for word in needs:
                if word in folded:
                    break
            else:
                return []
        return list(regex.finditer(self.text))
