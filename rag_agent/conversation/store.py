"""Conversations kept in memory by id, for hosts that name them (the ``rag_agent`` tool, MCP).

A caller that holds its own :class:`~rag_agent.conversation.Conversation` passes it to ``run``.
A tool caller can only pass text, so the ``rag_agent`` tool keeps conversations by the id its
caller manages (``conversation_id``) in a :class:`ConversationStore`: bounded in count, each let
go after ``ttl`` seconds unused, in this process's memory only (nothing is persisted; a host that
must keep a conversation across restarts keeps ``Conversation.to_json()`` itself).

Thread-safety: lock-protected; two calls with the same id share one conversation.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from cachetools import TTLCache

from rag_agent.conversation.history import Conversation

__all__ = ["DEFAULT_MAX_CONVERSATIONS", "DEFAULT_TTL_SECONDS", "ConversationStore"]

#: Conversations one store keeps at most (the least recently used go first).
DEFAULT_MAX_CONVERSATIONS = 1024
#: Seconds a conversation is kept after its last use.
DEFAULT_TTL_SECONDS = 3600.0


class ConversationStore:
    """Conversations by id, bounded in number and idle time."""

    def __init__(
        self,
        maxsize: int = DEFAULT_MAX_CONVERSATIONS,
        ttl: float = DEFAULT_TTL_SECONDS,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        self._items: TTLCache[str, Conversation] = TTLCache(maxsize=maxsize, ttl=ttl, timer=timer)
        self._lock = threading.Lock()

    def get(self, conversation_id: str, new: Callable[[str], Conversation]) -> Conversation:
        """The conversation ``conversation_id`` names, made by ``new(id)`` the first time."""
        with self._lock:
            found = self._items.get(conversation_id)
            if found is None:
                found = new(conversation_id)
            self._items[conversation_id] = found  # a use renews its time
            return found

    def __len__(self) -> int:
        with self._lock:
            self._items.expire()
            return len(self._items)
