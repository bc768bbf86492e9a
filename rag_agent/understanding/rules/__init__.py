"""The rule parser: free text → an :class:`~rag_agent.specs.Understanding`, and its vocabulary.

The public import path is :mod:`rag_agent.understanding.filters` (``from
rag_agent.understanding.filters import understand``); this package holds the rules, one concern a
module: :mod:`.vocabulary` (the words of each table), :mod:`.tokens` (the question's words and
the phrase indexes they are looked up in), :mod:`.gates` (the words a question says, read once,
so that a rule skips a regular expression that cannot match), :mod:`.dates`, :mod:`.names`,
:mod:`.fields` and :mod:`.parser`.
"""

from __future__ import annotations

from rag_agent.understanding.rules.parser import EMAIL_RE, MAX_TEXT_LENGTH, UUID_PATTERN, understand

__all__ = ["EMAIL_RE", "MAX_TEXT_LENGTH", "UUID_PATTERN", "understand"]
