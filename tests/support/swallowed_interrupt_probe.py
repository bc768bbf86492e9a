"""Run by ``tests/unit/test_interrupted_cleanup.py`` only (not collected by the suite): the
first test sends the session SIGTERM from inside a finaliser, where Python swallows the
``KeyboardInterrupt`` the suite's handler raises; the session must still stop there."""

from __future__ import annotations

import gc
import os
import signal


class _SignalsOnCollection:
    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGTERM)


def test_signal_inside_a_finaliser() -> None:
    _SignalsOnCollection()  # collected at once: its __del__ runs inside this line
    gc.collect()
    print("FIRST TEST ENDED", flush=True)


def test_must_not_run() -> None:
    print("SECOND TEST RAN", flush=True)
