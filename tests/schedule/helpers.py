"""Helpers for driving schedulers on a fake clock without threads."""

from __future__ import annotations

import asyncio
from typing import Any, Callable, TypeVar

T = TypeVar("T")


async def inline(fn: Callable[..., T], *args: Any) -> T:
    """Run a store call on the event loop thread, so a test can settle deterministically."""
    return fn(*args)


async def settle(rounds: int = 60) -> None:
    """Let every task that can make progress do so (all store calls run inline)."""
    for _ in range(rounds):
        await asyncio.sleep(0)
