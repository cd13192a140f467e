"""What the OpenAI and Anthropic dialects of the fake server share: the dialect interface,
SSE framing, ids and the output-token estimate."""

from __future__ import annotations

import json
import uuid
from typing import Any, Mapping, Protocol

from vigil.testing.prefix_cache import PromptShape, estimate_tokens
from vigil.testing.scripting import Reply
from vigil.usage import Usage


class Dialect(Protocol):
    """One provider's wire format. ``openai_wire`` and ``anthropic_wire`` implement it as
    modules."""

    API: str
    """``openai`` or ``anthropic``."""

    REQUEST_ID_HEADER: str

    def validate(self, body: Mapping[str, Any]) -> str | None:
        """Why the request body is unacceptable, or ``None`` when it is fine."""
        ...

    def shape(self, body: Mapping[str, Any]) -> PromptShape:
        """The request's prompt as cache segments (see ``prefix_cache``)."""
        ...

    def last_user_text(self, body: Mapping[str, Any]) -> str:
        """The text of the latest user message that has any text ('' when none)."""
        ...

    def is_stream(self, body: Mapping[str, Any]) -> bool: ...

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        """The provider's JSON error document for an HTTP status."""
        ...

    def response_body(self, reply: Reply, *, model: str, usage: Usage) -> dict[str, Any]:
        """The complete non-streaming answer. Raises ``ValueError`` for an unusable script."""
        ...

    def stream_frames(
        self, reply: Reply, *, model: str, usage: Usage, body: Mapping[str, Any]
    ) -> list[bytes]:
        """The SSE frames of a streamed answer. For a dropping reply, only the frames sent
        before the drop. Raises ``ValueError`` for an unusable script."""
        ...

    def models_body(self, models: list[str]) -> dict[str, Any]:
        """The ``GET /v1/models`` listing."""
        ...


def sse(data: Mapping[str, Any] | str, event: str | None = None) -> bytes:
    """One server-sent event frame."""
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode("utf-8")


def new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


def output_tokens(reply: Reply) -> int:
    """Token estimate of everything the reply generates: its text and its tool calls."""
    total = estimate_tokens(reply.content or "")
    for call in reply.calls:
        total += estimate_tokens(call.name + call.arguments_json)
    return total


def fragments(text: str, size: int = 16) -> list[str]:
    """Split a string into stream-sized pieces (at least one, possibly empty)."""
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def visible_chunks(reply: Reply) -> tuple[str, ...]:
    """The text deltas to stream: all of them, or only those sent before a drop."""
    if reply.drop_after_chunks is None:
        return reply.chunks
    return reply.chunks[: reply.drop_after_chunks]
