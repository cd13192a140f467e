"""The Anthropic Messages dialect of the fake model server (a ``wire.Dialect``)."""

from __future__ import annotations

from typing import Any, Mapping

from vigil.testing.prefix_cache import PromptShape, canonical_json
from vigil.testing.scripting import Reply
from vigil.testing.wire import fragments, new_id, sse, visible_chunks
from vigil.usage import Usage

API = "anthropic"
REQUEST_ID_HEADER = "request-id"

_ERRORS = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}

# Keys whose values are caller data (schemas, tool inputs), never cache_control markers.
_OPAQUE_KEYS = frozenset({"input_schema", "input"})


def validate(body: Mapping[str, Any]) -> str | None:
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model: Field required"
    if not isinstance(body.get("max_tokens"), int) or isinstance(body.get("max_tokens"), bool):
        return "max_tokens: Field required"
    if not isinstance(body.get("messages"), list) or not body["messages"]:
        return "messages: at least one message is required"
    if not all(isinstance(m, dict) and m.get("role") in ("user", "assistant") for m in body["messages"]):
        return "messages: each message needs a role of 'user' or 'assistant'"
    problem = _content_error(body["messages"])
    if problem:
        return problem
    markers = _markers(body.get("system")) + _markers(body.get("tools")) + _markers(body["messages"])
    markers += 1 if body.get("cache_control") else 0
    if markers > MAX_BREAKPOINTS:
        return f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {markers}."
    return None


MAX_BREAKPOINTS = 4


def _blocks(message: Mapping[str, Any]) -> list[Any]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])


def _content_error(messages: list[dict[str, Any]]) -> str | None:
    """Anthropic's rules: no empty text blocks; tool_use ids are unique; every tool_use is
    answered by exactly one tool_result in the next message, and every tool_result answers a
    tool_use of the message before."""
    open_calls: set[str] = set()
    for index, message in enumerate(messages):
        blocks = _blocks(message)
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "text" and not str(block.get("text", "")).strip():
                return f"messages.{index}: text content blocks must contain non-whitespace text"
        answered = [
            str(b.get("tool_use_id")) for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"
        ]
        if len(set(answered)) != len(answered):
            return f"messages.{index}: each `tool_use_id` may have only one `tool_result` block"
        results = set(answered)
        if open_calls - results:
            return (
                f"messages.{index}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {', '.join(sorted(open_calls - results))}"
            )
        if results - open_calls:
            return (
                f"messages.{index}: unexpected `tool_use_id` found in `tool_result` blocks: "
                f"{', '.join(sorted(results - open_calls))}"
            )
        uses = [
            str(b.get("id"))
            for b in blocks
            if message["role"] == "assistant" and isinstance(b, dict) and b.get("type") == "tool_use"
        ]
        if len(set(uses)) != len(uses):
            return f"messages.{index}: `tool_use` ids must be unique"
        open_calls = set(uses)
    if open_calls:
        return f"`tool_use` ids without `tool_result` blocks: {', '.join(sorted(open_calls))}"
    return None


def _markers(value: Any) -> int:
    """How many ``cache_control`` markers a request part carries."""
    if isinstance(value, dict):
        own = 1 if value.get("cache_control") else 0
        return own + sum(_markers(v) for k, v in value.items() if k not in _OPAQUE_KEYS)
    if isinstance(value, list):
        return sum(_markers(v) for v in value)
    return 0


def _has_marker(value: Any) -> bool:
    return _markers(value) > 0


def _without_markers(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: (v if k in _OPAQUE_KEYS else _without_markers(v))
            for k, v in value.items()
            if k != "cache_control"
        }
    if isinstance(value, list):
        return [_without_markers(v) for v in value]
    return value


def shape(body: Mapping[str, Any]) -> PromptShape:
    """Segment 0: ``system`` and ``tools``; then one segment per message. A segment holding a
    ``cache_control`` marker is a breakpoint; a top-level ``cache_control`` (automatic
    caching) makes the last segment one."""
    system, tools = body.get("system"), body.get("tools") or []
    messages = list(body.get("messages") or [])
    segments = [canonical_json({"system": _without_markers(system), "tools": _without_markers(tools)})]
    breakpoints = [0] if _has_marker(system) or _has_marker(tools) else []
    for index, message in enumerate(messages, start=1):
        segments.append(canonical_json(_without_markers(message)))
        if _has_marker(message):
            breakpoints.append(index)
    if body.get("cache_control") and len(segments) - 1 not in breakpoints:
        breakpoints.append(len(segments) - 1)
    return PromptShape(tuple(segments), breakpoints=tuple(breakpoints))


def last_user_text(body: Mapping[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            texts = [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]
            if texts:
                return "\n".join(texts)
    return ""


def is_stream(body: Mapping[str, Any]) -> bool:
    return bool(body.get("stream"))


def error_body(status: int, message: str) -> dict[str, Any]:
    kind = _ERRORS.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": new_id("req_")}


def _usage(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
        "output_tokens": usage.output_tokens,
    }


def _stop_reason(reply: Reply) -> str:
    if reply.calls:
        return "tool_use"
    return "max_tokens" if reply.truncated else "end_turn"


def _tool_blocks(reply: Reply) -> list[dict[str, Any]]:
    return [
        {"type": "tool_use", "id": c.id or new_id("toolu_"), "name": c.name, "input": c.arguments_object()}
        for c in reply.calls
    ]


def response_body(reply: Reply, *, model: str, usage: Usage) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.content is not None:
        content.append({"type": "text", "text": reply.content})
    content += _tool_blocks(reply)
    return {
        "id": new_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": _stop_reason(reply),
        "stop_sequence": None,
        "usage": _usage(usage),
    }


def _event(kind: str, **fields: Any) -> bytes:
    return sse({"type": kind, **fields}, kind)


def stream_frames(reply: Reply, *, model: str, usage: Usage, body: Mapping[str, Any]) -> list[bytes]:
    tool_blocks = _tool_blocks(reply)
    message = {
        **response_body(Reply(), model=model, usage=usage),
        "content": [],
        "stop_reason": None,
        # Like the real API: a token or so at the start, the true total in message_delta.
        "usage": {**_usage(usage), "output_tokens": min(1, usage.output_tokens)},
    }
    frames = [_event("message_start", message=message), _event("ping")]
    index = 0
    if reply.content is not None:
        frames.append(_event("content_block_start", index=0, content_block={"type": "text", "text": ""}))
        for text in visible_chunks(reply):
            frames.append(_event("content_block_delta", index=0, delta={"type": "text_delta", "text": text}))
        if reply.drops:
            return frames
        frames.append(_event("content_block_stop", index=0))
        index = 1
    for spec, block in zip(reply.calls, tool_blocks):
        frames.append(_event("content_block_start", index=index, content_block={**block, "input": {}}))
        # The arguments travel as raw JSON text; a string given by the script is sent as is.
        for piece in ["", *fragments(spec.arguments_json)]:
            delta = {"type": "input_json_delta", "partial_json": piece}
            frames.append(_event("content_block_delta", index=index, delta=delta))
        frames.append(_event("content_block_stop", index=index))
        index += 1
    stop = {"stop_reason": _stop_reason(reply), "stop_sequence": None}
    frames.append(_event("message_delta", delta=stop, usage=_usage(usage)))
    frames.append(_event("message_stop"))
    return frames


def models_body(models: list[str]) -> dict[str, Any]:
    created = "2025-01-01T00:00:00Z"
    data = [{"type": "model", "id": name, "display_name": name, "created_at": created} for name in models]
    return {
        "data": data,
        "has_more": False,
        "first_id": models[0] if models else None,
        "last_id": models[-1] if models else None,
    }
