"""A progress line on stderr while a model is thinking (the CLI's; the library never prints).

A run may wait up to ``RAG_LLM_DEADLINE_S`` seconds for a model; silence that long looks like a
hang. :func:`show_progress` listens to :func:`rag_agent.runtime.deadline.thinking` and, on a
terminal, keeps one line up to date (``… waiting for the language model (filters) 3s``), erased when
the model is done. Off a terminal (pipes, scripts, logs) it writes nothing.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import TextIO

from rag_agent.cli._common import isatty

__all__ = ["ProgressLine", "show_progress"]

_STEPS = {"filters": "reading the request", "fallback": "searching the tables"}


class ProgressLine:
    """One self-updating line on ``stream`` while a model is thinking.

    A listener for :func:`rag_agent.runtime.deadline.add_thinking_listener`. Its ticker thread runs
    only while a model is thinking and is joined when the model is done, so it never outlives a run.
    Thread-safe.
    """

    def __init__(
        self,
        stream: TextIO,
        *,
        interval: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream
        self._interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._step = ""
        self._since = 0.0

    def __call__(self, step: str, started: bool) -> None:
        """A model started (``started``) or stopped thinking for ``step``."""
        if started:
            self._begin(step)
        else:
            self.end()

    def _begin(self, step: str) -> None:
        with self._lock:
            self._step, self._since = step, self._clock()
            self._draw()
            if self._ticker is None:
                self._stop.clear()
                self._ticker = threading.Thread(target=self._tick, name="rag-progress", daemon=True)
                self._ticker.start()

    def end(self) -> None:
        """Stop updating and erase the line (nothing if none is shown)."""
        with self._lock:
            ticker, self._ticker = self._ticker, None
            self._stop.set()
        if ticker is None:
            return
        ticker.join()
        with self._lock:
            self._write("\r\033[K")

    def _tick(self) -> None:
        while not self._stop.wait(self._interval):
            with self._lock:
                if not self._stop.is_set():
                    self._draw()

    def _draw(self) -> None:
        elapsed = self._clock() - self._since
        what = _STEPS.get(self._step, self._step)
        self._write(f"\r\033[K… waiting for the language model ({what}) {elapsed:.0f}s")

    def _write(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):  # a closed terminal ends nothing
            self._stream.write(text)
            self._stream.flush()


@contextlib.contextmanager
def show_progress(stream: TextIO) -> Iterator[ProgressLine | None]:
    """Show a progress line on ``stream`` while a model thinks inside the block, if ``stream``
    is a terminal; yields the line (``None`` off a terminal)."""
    if not isatty(stream):
        yield None
        return
    from rag_agent.runtime.deadline import add_thinking_listener, remove_thinking_listener

    line = ProgressLine(stream)
    add_thinking_listener(line)
    try:
        yield line
    finally:
        remove_thinking_listener(line)
        line.end()
