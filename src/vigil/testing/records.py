"""What the fake model server saw: one record per model call, and the thread-safe log of them."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass
from typing import Any, Hashable

from vigil.testing.scripting import Reply
from vigil.usage import Usage


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One model call (``POST /v1/chat/completions`` or ``POST /v1/messages``) as served.

    Token fields are the numbers *reported* to the client: the simulated cache accounting,
    or the scripted ``Reply.usage`` override. Rejected and error-scripted calls report zeros.
    """

    index: int
    """0-based position in the server's log since the last reset."""
    api: str
    """``openai`` or ``anthropic``."""
    path: str
    status: int
    """The HTTP status answered: 200, or the error status (401, 429 ...)."""
    model: str
    stream: bool
    body: dict[str, Any]
    headers: dict[str, str]
    """Request headers, lower-cased, without the credentials."""
    peer: str
    """The client's ``host:port``: calls made over one kept-alive connection share it."""
    last_user_text: str
    segments: tuple[bytes, ...]
    segment_tokens: tuple[int, ...]
    breakpoints: tuple[int, ...]
    """Segment indices carrying an Anthropic ``cache_control`` marker; () for OpenAI."""
    prompt_tokens: int
    cached_tokens: int
    """Prompt tokens read from the cache."""
    cache_write_tokens: int
    output_tokens: int
    full_prefix_hit: bool
    """The whole previous served request (same api and model) was read from the cache, by the
    simulation (a ``Reply.usage`` override does not change it)."""
    reply: Reply | None
    reply_source: str
    """``queue``, ``rule``, ``default``, or ``''`` when the request was rejected."""

    @property
    def cache_hit(self) -> bool:
        return self.cached_tokens > 0

    @property
    def input_tokens(self) -> int:
        """Prompt tokens neither read from nor written to the cache."""
        return self.prompt_tokens - self.cached_tokens - self.cache_write_tokens

    @property
    def usage(self) -> Usage:
        return Usage(self.input_tokens, self.cached_tokens, self.cache_write_tokens, self.output_tokens)

    @property
    def served(self) -> bool:
        """The call was answered (possibly a dropped stream), not refused with an error."""
        return self.status == 200


class Recorder:
    """The thread-safe request log with hit/miss counters."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._records: list[RecordedRequest] = []
        self._last_served: dict[Hashable, RecordedRequest] = {}
        self.hits = 0
        self.misses = 0

    def next_index(self) -> int:
        with self._cond:
            return len(self._records)

    def previous_served(self, key: Hashable) -> RecordedRequest | None:
        with self._cond:
            return self._last_served.get(key)

    def add(self, record: RecordedRequest, key: Hashable | None = None) -> None:
        """Append a record; ``key`` (the cache key) is given for served calls only."""
        with self._cond:
            self._records.append(record)
            if key is not None:
                self._last_served[key] = record
                if record.cache_hit:
                    self.hits += 1
                else:
                    self.misses += 1
            self._cond.notify_all()

    def snapshot(self) -> list[RecordedRequest]:
        with self._cond:
            return list(self._records)

    def last(self) -> RecordedRequest | None:
        with self._cond:
            return self._records[-1] if self._records else None

    def clear(self) -> None:
        with self._cond:
            self._records.clear()
            self._last_served.clear()
            self.hits = self.misses = 0

    def wait_for(self, count: int, timeout: float) -> list[RecordedRequest]:
        """Block until at least ``count`` records exist; raises ``TimeoutError``."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._records) >= count, timeout):
                raise TimeoutError(f"fake model saw {len(self._records)} requests, expected {count}")
            return list(self._records)

    async def wait_for_async(self, count: int, timeout: float) -> list[RecordedRequest]:
        """Like ``wait_for`` without blocking the event loop (the client may share it)."""
        deadline = time.monotonic() + timeout
        while True:
            records = self.snapshot()
            if len(records) >= count:
                return records
            if time.monotonic() >= deadline:
                raise TimeoutError(f"fake model saw {len(records)} requests, expected {count}")
            await asyncio.sleep(0.005)
