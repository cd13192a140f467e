"""Waiting on state in tests: poll a check until it holds, or fail saying what never came.

Tests wait for a stored row, an event, a file — never for a fixed time. ``eventually`` is for
async tests (the check may be a plain function or a coroutine function), ``wait_for`` for
sync ones; both return the check's first truthy value, so a test can wait for a thing and use
it in one step.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from typing import Awaitable, Callable, TypeVar

T = TypeVar("T")

ASYNC_TIMEOUT = 20.0
"""Seconds an in-process wait may take: generous for a loaded 2-core machine."""
PROCESS_TIMEOUT = 30.0
"""Seconds a wait on another process may take (a gateway starting, a CLI run)."""


async def eventually(
    check: Callable[[], T | Awaitable[T]], timeout: float = ASYNC_TIMEOUT, what: str = "condition",
    interval: float = 0.02,
) -> T:
    """``check()``'s first truthy value, polled every ``interval`` seconds without blocking the
    event loop; ``AssertionError`` naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(interval)


def wait_for(check: Callable[[], T], timeout: float = PROCESS_TIMEOUT, what: str = "condition",
             interval: float = 0.05) -> T:
    """``check()``'s first truthy value, polled every ``interval`` seconds; ``AssertionError``
    naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)

