"""One deadline per run for the LLM steps, and who is told when a model is thinking.

A run may ask a chat model twice: filter extraction (step 2) and the agent fallback (step 5).
Both share one :class:`LLMDeadline` of ``RAG_LLM_DEADLINE_S`` seconds (default 30), started when
the run starts to understand its text:

- **Extraction** gets a shorter timeout per try, :func:`extraction_timeout` (a quarter of the
  deadline), with at most :data:`EXTRACTION_MAX_RETRIES` retry, so it can use at most half; the
  ``ChatOpenAI`` that :func:`rag_agent.understanding.llm.chat_model.resolve_llm` builds carries
  exactly these. An extraction that would start after the deadline is not made.
- **The fallback** gets what is left: its run ends at the deadline, and each model call it makes
  is given the seconds left as its request timeout (:func:`timeout_kwargs`, for models that
  declare a ``timeout`` setting, as ``ChatOpenAI`` does), so its worker thread ends by then too.

The deadline is handed to the steps through a context variable (:func:`deadline_scope`,
:func:`current_deadline`), so the extractor and fallback signatures stay as they are.

:func:`thinking` marks the time a model is being asked; listeners registered with
:func:`add_thinking_listener` hear when it starts and ends. The library registers none (it never
prints); the CLI registers one that shows a progress line on stderr.

Example::

    deadline = LLMDeadline(30.0)
    with deadline_scope(deadline):
        current_deadline().remaining()   # about 30.0
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

__all__ = [
    "DEFAULT_LLM_DEADLINE_SECONDS",
    "EXTRACTION_MAX_RETRIES",
    "EXTRACTION_SHARE",
    "LLMDeadline",
    "ThinkingListener",
    "add_thinking_listener",
    "current_deadline",
    "deadline_scope",
    "extraction_timeout",
    "remove_thinking_listener",
    "thinking",
    "timeout_kwargs",
]

#: ``RAG_LLM_DEADLINE_S``'s default: the most a run spends waiting for models.
DEFAULT_LLM_DEADLINE_SECONDS = 30.0
#: The part of the deadline one extraction try may take.
EXTRACTION_SHARE = 0.25
#: Retries of one extraction request (the OpenAI client retries connection errors, 429, 5xx).
EXTRACTION_MAX_RETRIES = 1


def extraction_timeout(deadline_seconds: float) -> float:
    """The timeout of one extraction try under a deadline of ``deadline_seconds``.

    >>> extraction_timeout(30.0)
    7.5
    """
    return deadline_seconds * EXTRACTION_SHARE


class LLMDeadline:
    """A point in time the LLM steps of one run must end by. Immutable; thread-safe.

    ``clock`` is a monotonic clock in seconds (injected in tests).
    """

    __slots__ = ("_clock", "expires_at", "seconds")

    def __init__(self, seconds: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        if not seconds > 0:
            raise ValueError(f"a deadline must be positive, not {seconds!r}")
        self.seconds = float(seconds)
        self._clock = clock
        self.expires_at = clock() + self.seconds

    def remaining(self) -> float:
        """Seconds left (0.0 once passed)."""
        return max(0.0, self.expires_at - self._clock())

    @property
    def expired(self) -> bool:
        """Whether the deadline has passed."""
        return self.remaining() <= 0.0

    def extraction_timeout(self) -> float:
        """What one extraction try may take now: its share, or what is left if less."""
        return min(extraction_timeout(self.seconds), self.remaining())

    def __repr__(self) -> str:
        return f"LLMDeadline({self.seconds:g}s, {self.remaining():.2f}s left)"


_current: contextvars.ContextVar[LLMDeadline | None] = contextvars.ContextVar(
    "rag_llm_deadline", default=None
)


@contextlib.contextmanager
def deadline_scope(deadline: LLMDeadline | None) -> Iterator[LLMDeadline | None]:
    """Make ``deadline`` the current one inside the block (``None``: no deadline)."""
    token = _current.set(deadline)
    try:
        yield deadline
    finally:
        _current.reset(token)


def current_deadline() -> LLMDeadline | None:
    """The deadline of the run being served in this context, if any."""
    return _current.get()


def timeout_kwargs(model: Any, seconds: float) -> dict[str, Any]:
    """``{"timeout": t}`` for a model that declares a ``timeout`` setting (by name or alias, as
    ``ChatOpenAI``'s ``request_timeout`` does), whose calls then take it as their request
    timeout; ``{}`` for others, which could send an unknown argument to their API.

    ``t`` is ``seconds`` shared between the tries the model's client may make (its integer
    ``max_retries``, as ``ChatOpenAI`` has), so the retries end in time too.
    """
    fields = getattr(type(model), "model_fields", {})
    declares = any(
        name == "timeout" or getattr(info, "alias", None) == "timeout"
        for name, info in fields.items()
    )
    if not declares:
        return {}
    retries = getattr(model, "max_retries", 0)
    tries = 1 + (retries if type(retries) is int and retries > 0 else 0)
    return {"timeout": max(seconds / tries, 0.001)}


#: Told ``(step, True)`` when a model starts thinking for ``step`` ("filters" or "fallback"),
#: and ``(step, False)`` when it is done.
ThinkingListener = Callable[[str, bool], None]
_listeners: list[ThinkingListener] = []
_listeners_lock = threading.Lock()


def add_thinking_listener(listener: ThinkingListener) -> None:
    """Call ``listener`` whenever a model starts or stops thinking (any thread)."""
    with _listeners_lock:
        _listeners.append(listener)


def remove_thinking_listener(listener: ThinkingListener) -> None:
    """Stop calling ``listener`` (no error if it was not registered)."""
    with _listeners_lock, contextlib.suppress(ValueError):
        _listeners.remove(listener)


def _tell(step: str, started: bool) -> None:
    with _listeners_lock:
        listeners = list(_listeners)
    for listener in listeners:
        with contextlib.suppress(Exception):  # a display must never break a run
            listener(step, started)


@contextlib.contextmanager
def thinking(step: str) -> Iterator[None]:
    """Mark the block as a model thinking for ``step``: listeners hear its start and end."""
    _tell(step, True)
    try:
        yield
    finally:
        _tell(step, False)
