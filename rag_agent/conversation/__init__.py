"""Conversations: follow-up questions read against the answers before them.

:class:`Conversation` is the bounded, JSON-serialisable history a host keeps;
:mod:`rag_agent.conversation.followup` reads a question against its last answer.
"""

from rag_agent.conversation.history import (
    DEFAULT_MAX_HISTORY_TOKENS,
    DEFAULT_MAX_TURNS,
    Conversation,
    ConversationError,
    Turn,
    TurnCondition,
)

__all__ = [
    "DEFAULT_MAX_HISTORY_TOKENS",
    "DEFAULT_MAX_TURNS",
    "Conversation",
    "ConversationError",
    "Turn",
    "TurnCondition",
]
