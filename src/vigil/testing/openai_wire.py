"""The OpenAI chat completions dialect of the fake model server (a ``wire.Dialect``)."""

from __future__ import annotations

import time
from typing import Any, Mapping

from vigil.testing.prefix_cache import PromptShape, canonical_json
from vigil.testing.scripting import Reply
from vigil.testing.wire import fragments, new_id, sse, visible_chunks
from vigil.usage import Usage

API = "openai"
REQUEST_ID_HEADER = "x-request-id"

_SYSTEM_ROLES = ("system", "developer")

# status -> (type, code); the shapes OpenAI actually returns.
_ERRORS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "model_not_found"),
    408: ("timeout", None),
    409: ("conflict", None),
    422: ("invalid_request_error", None),
    429: ("requests", "rate_limit_exceeded"),
}


def validate(body: Mapping[str, Any]) -> str | None:
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "you must provide a model parameter"
    if not isinstance(body.get("messages"), list) or not body["messages"]:
        return "'messages' must be a non-empty array"
    if not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in body["messages"]):
        return "each message must be an object with a 'role'"
    return _tool_pairing_error(body["messages"])


def _tool_pairing_error(messages: list[dict[str, Any]]) -> str | None:
    """OpenAI's rule: tool calls are answered by tool messages right after them, and a tool
    message answers a call of the assistant message before it, once. Ids within one assistant
    message must differ (otherwise the pairing is ambiguous)."""
    open_calls: set[str] = set()
    for message in messages:
        role = message["role"]
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in open_calls:
                return (
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    f"preceding message with 'tool_calls' (tool_call_id {call_id!r})."
                )
            open_calls.discard(call_id)
            continue
        if open_calls:
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(sorted(open_calls))}"
            )
        if role == "assistant":
            ids = [str(c.get("id")) for c in message.get("tool_calls") or []]
            if len(set(ids)) != len(ids):
                duplicated = sorted({i for i in ids if ids.count(i) > 1})
                return f"Duplicate tool_call id in one assistant message: {', '.join(duplicated)}"
            open_calls = set(ids)
    if open_calls:
        return f"tool_call_ids without response messages: {', '.join(sorted(open_calls))}"
    return None


def shape(body: Mapping[str, Any]) -> PromptShape:
    """Segment 0: the tools and the leading system/developer messages; then one segment per
    remaining message."""
    messages = list(body.get("messages") or [])
    head = 0
    while head < len(messages) and messages[head].get("role") in _SYSTEM_ROLES:
        head += 1
    first = canonical_json({"system": messages[:head], "tools": body.get("tools") or []})
    return PromptShape((first, *(canonical_json(m) for m in messages[head:])), breakpoints=None)


def last_user_text(body: Mapping[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            texts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
            if texts:
                return "\n".join(texts)
    return ""


def is_stream(body: Mapping[str, Any]) -> bool:
    return bool(body.get("stream"))


def error_body(status: int, message: str) -> dict[str, Any]:
    kind, code = _ERRORS.get(status, ("server_error" if status >= 500 else "invalid_request_error", None))
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _usage(usage: Usage) -> dict[str, Any]:
    prompt = usage.prompt_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": usage.output_tokens,
        "total_tokens": prompt + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read_tokens, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _finish_reason(reply: Reply) -> str:
    if reply.calls:
        return "tool_calls"
    return "length" if reply.truncated else "stop"


def _call_ids(reply: Reply) -> list[str]:
    return [call.id or new_id("call_") for call in reply.calls]


def response_body(reply: Reply, *, model: str, usage: Usage) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content, "refusal": None}
    if reply.calls:
        message["tool_calls"] = [
            {"id": call_id, "type": "function", "function": {"name": c.name, "arguments": c.arguments_json}}
            for call_id, c in zip(_call_ids(reply), reply.calls)
        ]
    return {
        "id": new_id("chatcmpl-"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": "fp_vigil_fake",
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": _finish_reason(reply)}
        ],
        "usage": _usage(usage),
    }


def stream_frames(reply: Reply, *, model: str, usage: Usage, body: Mapping[str, Any]) -> list[bytes]:
    options = body.get("stream_options")
    include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
    base = {
        "id": new_id("chatcmpl-"),
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": "fp_vigil_fake",
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        data: dict[str, Any] = {
            **base,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if include_usage:
            data["usage"] = None
        return sse(data)

    frames = [chunk({"role": "assistant", "content": None if reply.content is None else ""})]
    frames += [chunk({"content": text}) for text in visible_chunks(reply)]
    if reply.drops:
        return frames
    for index, (call_id, call) in enumerate(zip(_call_ids(reply), reply.calls)):
        function = {"name": call.name, "arguments": ""}
        opening = {"index": index, "id": call_id, "type": "function", "function": function}
        frames.append(chunk({"tool_calls": [opening]}))
        for piece in fragments(call.arguments_json):
            frames.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    frames.append(chunk({}, _finish_reason(reply)))
    if include_usage:
        frames.append(sse({**base, "choices": [], "usage": _usage(usage)}))
    frames.append(sse("[DONE]"))
    return frames


def models_body(models: list[str]) -> dict[str, Any]:
    return {
        "object": "list",
        "data": [
            {"id": name, "object": "model", "created": 1_700_000_000, "owned_by": "vigil-fake"}
            for name in models
        ],
    }
