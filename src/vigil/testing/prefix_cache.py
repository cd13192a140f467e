"""A simulated provider prompt cache that matches byte-identical leading prompt segments.

A request is seen as a sequence of *segments*: segment 0 holds the tools and the system
prompt, then each message is one segment, in order (the dialect modules build them). Each
segment is canonical JSON (sorted keys, compact separators, UTF-8 without escaping), so equal
content gives equal bytes while every content byte still counts: a one-byte change in the
system prompt changes segment 0 and misses. Tokens are estimated as ``ceil(utf8_bytes / 4)``
per segment.

The cache keeps *prefixes* (the first k segments, identified by a chained SHA-256), each
stamped with the time it was last written or read; a prefix expires ``ttl`` seconds after
that stamp. Entries are kept per cache key (the server uses ``(api, model)``).

Two rules, one per provider:

* **Automatic** (OpenAI, ``breakpoints is None``): read = tokens of the longest leading run of
  segments equal to a live cached prefix; write = 0 (OpenAI does not report writes);
  uncached input = the rest. Afterwards every leading prefix of the request is stored.

* **Breakpoints** (Anthropic): a segment holding a ``cache_control`` marker anywhere (in a
  system block, a tool, a content block, or the last segment when the request has a
  top-level ``cache_control``) is a breakpoint; a breakpoint ends a cacheable prefix at the
  end of its segment. Only prefixes ending at breakpoints are ever written. read = tokens of
  the longest live cached prefix that is no longer than the prefix ending at the request's
  last breakpoint (this models Anthropic's look-back from a breakpoint to earlier written
  positions, without the 20-block look-back limit); write = tokens from the end of the read
  prefix to the last breakpoint; uncached input = tokens after the last breakpoint. With no
  breakpoint nothing is read or written. Afterwards the prefix ending at each breakpoint is
  stored and the prefix that was read is refreshed. ``cache_control`` markers themselves
  are not part of the segment bytes, so moving a breakpoint does not change the content.

Not modelled: minimum cacheable lengths, OpenAI's 128-token granularity, Anthropic's
20-block look-back, breakpoints finer than a segment (a marker on a tool or a system block
ends the prefix at the end of segment 0), and eviction under load. Anthropic's limit of four
``cache_control`` markers is enforced as a 400, like the real API.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Hashable


def canonical_json(value: Any) -> bytes:
    """Deterministic JSON bytes of a value: sorted keys, no whitespace, raw UTF-8."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def estimate_tokens(data: bytes | str) -> int:
    """The fake tokenizer: a quarter of the UTF-8 byte count, rounded up."""
    size = len(data.encode("utf-8")) if isinstance(data, str) else len(data)
    return math.ceil(size / 4)


@dataclass(frozen=True, slots=True)
class PromptShape:
    """A request as the cache sees it: its segments and, for explicit caching, which segment
    indices carry a breakpoint (``None`` means automatic caching of every prefix)."""

    segments: tuple[bytes, ...]
    breakpoints: tuple[int, ...] | None = None

    @property
    def segment_tokens(self) -> tuple[int, ...]:
        return tuple(estimate_tokens(s) for s in self.segments)

    @property
    def prompt_tokens(self) -> int:
        return sum(self.segment_tokens)


@dataclass(frozen=True, slots=True)
class CacheResult:
    """How one request's prompt tokens split: read from cache, written to it, or neither."""

    read_tokens: int
    write_tokens: int
    input_tokens: int
    read_segments: int
    """How many leading segments were served from the cache."""


def prefix_digests(segments: tuple[bytes, ...]) -> list[bytes]:
    """``digests[k-1]`` identifies the prefix made of the first k segments."""
    digests: list[bytes] = []
    running = b""
    for segment in segments:
        # Hash each segment before chaining so segment boundaries are part of the identity.
        running = hashlib.sha256(running + hashlib.sha256(segment).digest()).digest()
        digests.append(running)
    return digests


class PrefixCache:
    """The thread-safe simulated cache. ``clock`` returns seconds (monotonic is fine)."""

    def __init__(self, ttl: float = 300.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        # Ordered by stamp (oldest first) so expiry only ever looks at the front.
        self._entries: OrderedDict[tuple[Hashable, bytes], float] = OrderedDict()

    def account(self, key: Hashable, shape: PromptShape) -> CacheResult:
        """Look the request up, then store what it writes; returns the token split."""
        tokens = shape.segment_tokens
        digests = prefix_digests(shape.segments)
        with self._lock:
            now = self._clock()
            self._expire(now)
            if shape.breakpoints is None:
                limit = len(digests)
                writes = range(1, len(digests) + 1)
            elif shape.breakpoints:
                limit = max(shape.breakpoints) + 1
                writes = sorted({b + 1 for b in shape.breakpoints})
            else:
                return CacheResult(0, 0, sum(tokens), 0)
            read = 0
            for length in range(limit, 0, -1):
                if (key, digests[length - 1]) in self._entries:
                    read = length
                    break
            if read:
                self._touch((key, digests[read - 1]), now)
            for length in writes:
                self._touch((key, digests[length - 1]), now)
        read_tokens = sum(tokens[:read])
        write_tokens = 0 if shape.breakpoints is None else sum(tokens[read:limit])
        return CacheResult(
            read_tokens=read_tokens,
            write_tokens=write_tokens,
            input_tokens=sum(tokens) - read_tokens - write_tokens,
            read_segments=read,
        )

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        """Live entries (prefixes) in the cache."""
        with self._lock:
            self._expire(self._clock())
            return len(self._entries)

    def _touch(self, entry: tuple[Hashable, bytes], now: float) -> None:
        self._entries[entry] = now
        self._entries.move_to_end(entry)

    def _expire(self, now: float) -> None:
        while self._entries:
            entry, stamp = next(iter(self._entries.items()))
            if now - stamp < self.ttl:
                break
            del self._entries[entry]
