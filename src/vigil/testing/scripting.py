"""What the fake model answers: scripted replies, a FIFO queue, rules and a default.

The order of precedence for each model call is: the next queued reply, else the first live rule
whose condition holds for the last user text, else the default reply. Everything here is
thread-safe: tests script from their own thread while the server thread consumes.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from vigil.usage import Usage

_WORD = re.compile(r"\S+\s*|\s+")

_DEFAULT_CUT_TEXT = "This answer is going to be cut off part way through the stream."


def split_text(text: str) -> tuple[str, ...]:
    """Split text into word-sized stream deltas whose concatenation is exactly ``text``."""
    return tuple(_WORD.findall(text))


def _chunks(text: str | Sequence[str]) -> tuple[str, ...]:
    return split_text(text) if isinstance(text, str) else tuple(text)


@dataclass(frozen=True, slots=True)
class ToolCallSpec:
    """One tool call the fake model will make.

    ``arguments`` is a mapping (serialised to compact JSON) or a JSON string sent to OpenAI
    clients byte for byte. Anthropic carries arguments as an object, so a string must parse
    to a JSON object when the reply goes to an Anthropic client. ``id`` defaults to a fresh
    provider-style id (``call_...`` / ``toolu_...``).
    """

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    @property
    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(dict(self.arguments), ensure_ascii=False, separators=(",", ":"))

    def arguments_object(self) -> dict[str, Any]:
        """The arguments as a JSON object; raises ``ValueError`` if they are not one."""
        if not isinstance(self.arguments, str):
            return dict(self.arguments)
        value = json.loads(self.arguments)
        if not isinstance(value, dict):
            raise ValueError(f"tool arguments of {self.name!r} are not a JSON object")
        return value


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted answer. Build it with the class methods, not the constructor.

    Common options: ``delay`` (seconds before anything is sent; the response headers too),
    ``usage`` (report these numbers instead of the simulated ones; the prefix cache is
    still updated) and ``chunk_delay`` (seconds between stream events). A text reply may be
    held by a ``gate`` (a ``threading.Event``): nothing is sent until the test sets it.
    """

    content: str | None = None
    chunks: tuple[str, ...] = ()
    calls: tuple[ToolCallSpec, ...] = ()
    error_status: int | None = None
    error_message: str | None = None
    retry_after: float | None = None
    drop_after_chunks: int | None = None
    hang: float = 0.0
    delay: float = 0.0
    chunk_delay: float = 0.0
    truncated: bool = False
    usage: Usage | None = None
    raw_status: int | None = None
    raw_body: bytes | None = None
    raw_content_type: str = "text/html; charset=utf-8"
    garbage_frame: bytes | None = None
    gate: threading.Event | None = field(default=None, compare=False)

    @classmethod
    def text(
        cls,
        text: str | Sequence[str],
        *,
        delay: float = 0.0,
        chunk_delay: float = 0.0,
        truncated: bool = False,
        usage: Usage | None = None,
        gate: threading.Event | None = None,
    ) -> "Reply":
        """A text answer. A sequence of strings gives the exact stream deltas.

        ``truncated`` reports the answer as cut off by the token limit
        (``finish_reason: length`` / ``stop_reason: max_tokens``). ``gate``: the answer
        waits (the request is recorded at once) until the test sets this event.
        """
        chunks = _chunks(text)
        return cls(
            content="".join(chunks),
            chunks=chunks,
            delay=delay,
            chunk_delay=chunk_delay,
            truncated=truncated,
            usage=usage,
            gate=gate,
        )

    @classmethod
    def tool_calls(
        cls,
        *calls: ToolCallSpec,
        text: str | Sequence[str] | None = None,
        delay: float = 0.0,
        chunk_delay: float = 0.0,
        usage: Usage | None = None,
    ) -> "Reply":
        """An answer asking for tools to be run, optionally preceded by some text."""
        if not calls:
            raise ValueError("Reply.tool_calls needs at least one ToolCallSpec")
        chunks = _chunks(text) if text is not None else ()
        return cls(
            content="".join(chunks) if text is not None else None,
            chunks=chunks,
            calls=tuple(calls),
            delay=delay,
            chunk_delay=chunk_delay,
            usage=usage,
        )

    @classmethod
    def error(
        cls,
        status: int = 500,
        message: str | None = None,
        *,
        retry_after: float | None = None,
        delay: float = 0.0,
    ) -> "Reply":
        """An HTTP error in the provider's error shape (429, 500, 503, 529, 401, 400 ...).

        ``retry_after`` (seconds) is sent as ``retry-after`` and ``retry-after-ms``.
        """
        if status < 400:
            raise ValueError("an error reply needs a 4xx or 5xx status")
        return cls(error_status=status, error_message=message, retry_after=retry_after, delay=delay)

    @classmethod
    def disconnect_after(
        cls,
        text_chunks_sent: int = 2,
        *,
        text: str | Sequence[str] = _DEFAULT_CUT_TEXT,
        hang: float = 0.0,
        delay: float = 0.0,
        chunk_delay: float = 0.0,
    ) -> "Reply":
        """Start answering, send ``text_chunks_sent`` text deltas, wait ``hang`` seconds, then
        drop the connection without finishing the response.

        Streaming clients see a broken stream after the partial text; non-streaming clients
        see a truncated body. ``text_chunks_sent=0`` drops right after the stream preamble.
        """
        if text_chunks_sent < 0:
            raise ValueError("text_chunks_sent must be >= 0")
        chunks = _chunks(text)
        return cls(
            content="".join(chunks),
            chunks=chunks,
            drop_after_chunks=text_chunks_sent,
            hang=hang,
            delay=delay,
            chunk_delay=chunk_delay,
        )

    @classmethod
    def raw(
        cls,
        status: int,
        body: str | bytes,
        content_type: str = "text/html; charset=utf-8",
        *,
        delay: float = 0.0,
    ) -> "Reply":
        """Answer with exactly ``body`` (status and content type as given), streaming or not:
        what a proxy error page, a captive portal or a wrong ``base_url`` sends back."""
        data = body.encode("utf-8") if isinstance(body, str) else bytes(body)
        return cls(raw_status=status, raw_body=data, raw_content_type=content_type, delay=delay)

    @classmethod
    def garbled(
        cls,
        text_chunks_sent: int = 0,
        *,
        frame: str | bytes = "event: content_block_delta\ndata: {this is not json\n\n",
        text: str | Sequence[str] = _DEFAULT_CUT_TEXT,
        chunk_delay: float = 0.0,
    ) -> "Reply":
        """Start a normal answer, send ``text_chunks_sent`` text deltas, then the raw SSE
        ``frame`` (by default a ``data:`` line that is not JSON, under an event name so that
        both SDKs parse it) and end the response there.

        Non-streaming clients get the frame's bytes as a JSON-typed body.
        """
        if text_chunks_sent < 0:
            raise ValueError("text_chunks_sent must be >= 0")
        chunks = _chunks(text)
        data = frame.encode("utf-8") if isinstance(frame, str) else bytes(frame)
        return cls(
            content="".join(chunks),
            chunks=chunks,
            drop_after_chunks=text_chunks_sent,
            garbage_frame=data,
            chunk_delay=chunk_delay,
        )

    @property
    def is_error(self) -> bool:
        return self.error_status is not None

    @property
    def is_raw(self) -> bool:
        return self.raw_body is not None

    @property
    def is_garbled(self) -> bool:
        return self.garbage_frame is not None

    @property
    def drops(self) -> bool:
        """The connection is dropped after the visible chunks (a garbled reply ends cleanly)."""
        return self.drop_after_chunks is not None and self.garbage_frame is None


def as_reply(reply: Reply | str) -> Reply:
    """Plain strings are text replies."""
    return reply if isinstance(reply, Reply) else Reply.text(reply)


@dataclass(slots=True)
class Rule:
    """A reply given whenever the last user text satisfies the condition, ``times`` times at
    most (``None``: forever). ``used`` counts how often it fired."""

    reply: Reply
    contains: str | None = None
    match: Callable[[str], bool] | None = None
    times: int | None = None
    used: int = 0

    def applies(self, last_user_text: str) -> bool:
        if self.times is not None and self.used >= self.times:
            return False
        if self.contains is not None and self.contains not in last_user_text:
            return False
        if self.match is not None and not self.match(last_user_text):
            return False
        return True


class Script:
    """The thread-safe reply source of one fake model server."""

    def __init__(self, default: Reply | str = "ok") -> None:
        self._lock = threading.Lock()
        self._initial_default = as_reply(default)
        self._default = self._initial_default
        self._queue: list[Reply] = []
        self._rules: list[Rule] = []

    def queue(self, *replies: Reply | str) -> None:
        """Append replies to be used, in order, by the next model calls."""
        with self._lock:
            self._queue.extend(as_reply(r) for r in replies)

    def rule(
        self,
        *,
        reply: Reply | str,
        contains: str | None = None,
        match: Callable[[str], bool] | None = None,
        times: int | None = None,
    ) -> Rule:
        """Answer ``reply`` when the last user text contains ``contains`` and/or satisfies
        ``match``. Rules are tried in the order they were added, only when the queue is empty.
        """
        if contains is None and match is None:
            raise ValueError("a rule needs contains= or match=")
        if times is not None and times < 1:
            raise ValueError("times must be >= 1 or None")
        new = Rule(reply=as_reply(reply), contains=contains, match=match, times=times)
        with self._lock:
            self._rules.append(new)
        return new

    def set_default(self, reply: Reply | str) -> None:
        """The reply used when the queue is empty and no rule applies."""
        with self._lock:
            self._default = as_reply(reply)

    @property
    def pending(self) -> int:
        """How many queued replies are still unused."""
        with self._lock:
            return len(self._queue)

    def next_reply(self, last_user_text: str) -> tuple[Reply, str]:
        """Consume and return the reply for one call, with its source: queue, rule or default."""
        with self._lock:
            if self._queue:
                return self._queue.pop(0), "queue"
            for candidate in self._rules:
                if candidate.applies(last_user_text):
                    candidate.used += 1
                    return candidate.reply, "rule"
            return self._default, "default"

    def reset(self) -> None:
        """Forget the queue and the rules; restore the default given at construction."""
        with self._lock:
            self._queue.clear()
            self._rules.clear()
            self._default = self._initial_default
