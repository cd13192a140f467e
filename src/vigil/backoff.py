"""vigil's one back-off formula: how long to wait before trying something again.

Every retry loop uses it — the model client and the gateway's patient turns (through
``models.retry.RetryPolicy``), the outbox, the PostgreSQL store's connection retries, the
platform adapters' reconnects and the supervisor's restarts — so that they all behave alike:
the pause doubles from ``base`` up to ``cap`` and is scaled by a random factor in [0.5, 1), so
that conversations, connections or workers that failed together do not come back in step.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable

_MAX_DOUBLINGS = 64
"""Doublings counted at most: past them every pause is the cap anyway, and ``2**n`` for a large
``n`` would not fit in a float (a patient loop may fail thousands of times)."""


@dataclass(frozen=True, slots=True)
class Backoff:
    """Attempt ``n`` (0-based) that failed waits ``min(cap, base * 2**n)``, times a random factor
    in [0.5, 1) (``jitter`` returns [0, 1); ``None`` for no jitter, where the pause is shown to a
    person as a schedule)."""

    base: float
    cap: float
    jitter: Callable[[], float] | None = field(default=random.random)

    def delay(self, attempt: int) -> float:
        """Seconds to wait after the failed attempt number ``attempt`` (0-based)."""
        pause = min(self.cap, self.base * 2 ** min(max(0, attempt), _MAX_DOUBLINGS))
        return pause if self.jitter is None else pause * (0.5 + self.jitter() / 2)


class Streak:
    """Failures in a row of one thing (a connection, an adapter), each next pause from
    ``backoff``; a success resets the count."""

    def __init__(self, backoff: Backoff) -> None:
        self.backoff = backoff
        self.failures = 0

    def next(self) -> float:
        """Count one more failure and give the pause before the next try."""
        self.failures += 1
        return self.backoff.delay(self.failures - 1)

    def reset(self) -> None:
        self.failures = 0
