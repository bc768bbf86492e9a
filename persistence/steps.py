"""One implementation, two ways to run its I/O: logic written as a generator of requests.

A function that needs I/O is written once, as a generator: it ``yield``\\ s a request (a
statement to run, a read to make, a model to ask) and receives the answer as the value of the
``yield``; a failed request is raised at the ``yield``, so the generator's own ``try``/``except``
blocks handle it as they would a direct call. :func:`drive` performs each request with a plain
call; :func:`adrive` awaits it, on the running event loop and in its thread. The checks, the
policy, the SQL and the parsing live in the generator, shared by both flavours; only the
``perform`` callables differ.

>>> def steps() -> Steps[str, int]:
...     rows = yield "SELECT 1"
...     return len(rows)
>>> drive(steps(), lambda statement: [(1,)])
1

Thread-safety: the drivers hold no state; a generator is driven by one caller at a time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

__all__ = ["Steps", "adrive", "drive"]

R = TypeVar("R")
T = TypeVar("T")

#: Logic that yields requests of type ``R`` and returns a ``T``.
Steps = Generator[R, Any, T]


def drive(steps: Steps[R, T], perform: Callable[[R], Any]) -> T:
    """Run ``steps`` to its end, performing each request with ``perform`` (blocking)."""
    try:
        request = next(steps)
        while True:
            try:
                answer = perform(request)
            except Exception as exc:  # raised where the generator asked, for its own handlers
                request = steps.throw(exc)
            else:
                request = steps.send(answer)
    except StopIteration as stop:
        result: T = stop.value
        return result
    finally:
        steps.close()


async def adrive(steps: Steps[R, T], perform: Callable[[R], Awaitable[Any]]) -> T:
    """Run ``steps`` to its end, awaiting each request's ``perform`` on the running loop."""
    try:
        request = next(steps)
        while True:
            try:
                answer = await perform(request)
            except Exception as exc:
                request = steps.throw(exc)
            else:
                request = steps.send(answer)
    except StopIteration as stop:
        result: T = stop.value
        return result
    finally:
        steps.close()
