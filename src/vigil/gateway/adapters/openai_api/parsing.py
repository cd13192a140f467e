"""What a request to ``/v1/chat/completions`` or ``/v1/responses`` asks, checked before
anything is stored: a :class:`ClientTurn`, or an :class:`~.errors.ApiError` (400, 413) that
says what is wrong. Fields vigil does not use (``temperature``, ``tools``, ``max_tokens`` …)
are accepted and ignored: the agent's own model settings and tools answer.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, AsyncIterable

from vigil.gateway.adapters.openai_api.errors import ApiError, bad_request
from vigil.masking import is_text

MAX_BODY_BYTES = 8 * 1024 * 1024
"""A request body: room for a long history resent whole."""
MAX_TEXT = 100_000
"""Characters of the new message (as in the web chat)."""
MAX_MESSAGES = 10_000
MAX_KEY = 200
"""Characters of a conversation key (``X-Vigil-Conversation`` or ``metadata.conversation``)."""
MAX_MODEL = 256
CONVERSATION_HEADER = "x-vigil-conversation"

SYSTEM_ROLES = ("system", "developer")
ROLES = (*SYSTEM_ROLES, "user", "assistant", "tool", "function")
TEXT_PARTS = ("text", "input_text", "output_text", "refusal")
_RESPONSE_ID = re.compile(r"^resp_[A-Za-z0-9_-]{1,100}$")
_KEY = re.compile(r"^[^\x00-\x1f\x7f]{1,%d}$" % MAX_KEY)


@dataclass(frozen=True, slots=True)
class Message:
    """One message of the history a client sent, as text."""

    role: str
    text: str


@dataclass(frozen=True, slots=True)
class ClientTurn:
    """One request, whichever endpoint it came through."""

    model: str
    system: str
    """The client's system (and developer) messages and ``instructions``, joined: context of
    this turn, never the conversation's stored prompt."""
    prior: tuple[Message, ...]
    """The user and assistant messages before the new one (what identifies the chat)."""
    text: str
    """The new message: the user messages after the last assistant message, joined."""
    stream: bool = False
    include_usage: bool = False
    conversation: str | None = None
    """The client's explicit conversation key (``X-Vigil-Conversation``, ``metadata.conversation``)."""
    previous_response_id: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)


async def read_json(chunks: AsyncIterable[bytes]) -> dict[str, Any]:
    """The body as a JSON object of valid Unicode (413 past :data:`MAX_BODY_BYTES`)."""
    body = bytearray()
    async for chunk in chunks:
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise ApiError(413, f"the request body is larger than {MAX_BODY_BYTES // (1024 * 1024)} MiB",
                           code="request_too_large")
    try:
        value = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise bad_request("the body is not valid JSON (UTF-8)", code="invalid_json") from None
    if not isinstance(value, dict):
        raise bad_request("the body must be a JSON object", code="invalid_json")
    if not _only_text(value):
        raise bad_request("the body holds text that is not valid Unicode (a lone surrogate such as \\ud800)",
                          code="invalid_json")
    return value


def _only_text(value: Any) -> bool:
    """Whether every string in a parsed JSON value, keys too, is valid Unicode (a loop, not
    recursion: the body may nest as deep as the parser allows)."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if not is_text(item):
                return False
        elif isinstance(item, dict):
            pending += item.keys()
            pending += item.values()
        elif isinstance(item, list):
            pending += item
    return True


def chat_completion_turn(body: dict[str, Any], header_key: str | None) -> ClientTurn:
    """A ``/v1/chat/completions`` request."""
    model = _model(body)
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise bad_request("'messages' must be a non-empty array of messages", param="messages")
    messages = [_message(item, f"messages[{index}]") for index, item in enumerate(_bounded(raw, "messages"))]
    n = body.get("n", 1)
    if n is not None and (type(n) is not int or n != 1):
        raise bad_request("'n' must be 1: the agent gives one answer", param="n")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise bad_request("'stream_options' must be an object", param="stream_options")
    include_usage = (options or {}).get("include_usage", False)
    if not isinstance(include_usage, bool):
        raise bad_request("'stream_options.include_usage' must be true or false", param="stream_options")
    metadata = _metadata(body)
    return _turn(model, messages, body, metadata, header_key, include_usage=include_usage)


def responses_turn(body: dict[str, Any], header_key: str | None) -> ClientTurn:
    """A ``/v1/responses`` request (``input`` as text or as message items)."""
    model = _model(body)
    raw = body.get("input")
    if isinstance(raw, str):
        messages = [Message("user", raw)]
    elif isinstance(raw, list) and raw:
        messages = [_item(item, f"input[{index}]") for index, item in enumerate(_bounded(raw, "input"))]
    else:
        raise bad_request("'input' must be text or a non-empty array of messages", param="input")
    instructions = body.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise bad_request("'instructions' must be text", param="instructions")
        messages.insert(0, Message("system", instructions))
    previous = body.get("previous_response_id")
    if previous is not None and (not isinstance(previous, str) or not _RESPONSE_ID.match(previous)):
        raise bad_request("'previous_response_id' must be the id of a response of this API (resp_…)",
                          param="previous_response_id")
    return _turn(model, messages, body, _metadata(body), header_key, previous=previous)


def _turn(
    model: str, messages: list[Message], body: dict[str, Any], metadata: dict[str, str], header_key: str | None,
    *, include_usage: bool = False, previous: str | None = None,
) -> ClientTurn:
    stream = body.get("stream", False)
    if stream is not None and not isinstance(stream, bool):
        raise bad_request("'stream' must be true or false", param="stream")
    system = "\n\n".join(m.text for m in messages if m.role in SYSTEM_ROLES and m.text.strip())
    talk = [m for m in messages if m.role in ("user", "assistant")]
    if not talk or talk[-1].role != "user":
        raise bad_request("the last message must be the user's (role 'user')", param="messages")
    start = len(talk)
    while start > 0 and talk[start - 1].role == "user":
        start -= 1
    text = "\n\n".join(m.text for m in talk[start:] if m.text.strip())
    if not text.strip():
        raise bad_request("the user's message is empty", param="messages")
    if len(text) > MAX_TEXT:
        raise bad_request(f"the user's message is longer than {MAX_TEXT:,} characters", param="messages")
    key = header_key if header_key is not None else metadata.get("conversation")
    if key is not None and not _KEY.match(key):
        raise bad_request(f"a conversation key must be 1 to {MAX_KEY} characters without control characters",
                          param="metadata")
    return ClientTurn(
        model=model, system=system, prior=tuple(talk[:start]), text=text, stream=bool(stream),
        include_usage=include_usage, conversation=key, previous_response_id=previous, metadata=metadata,
    )


def _model(body: dict[str, Any]) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model.strip() or len(model) > MAX_MODEL:
        raise bad_request(f"'model' must be a model name (any name answers: the agent, e.g. 'vigil'), "
                          f"at most {MAX_MODEL} characters", param="model")
    return model


def _bounded(items: list[Any], name: str) -> list[Any]:
    if len(items) > MAX_MESSAGES:
        raise bad_request(f"'{name}' holds more than {MAX_MESSAGES:,} messages", param=name)
    return items


def _message(item: Any, where: str) -> Message:
    if not isinstance(item, dict):
        raise bad_request(f"{where} must be an object with 'role' and 'content'", param=where)
    role = item.get("role")
    if role not in ROLES:
        raise bad_request(f"{where}.role must be one of {', '.join(ROLES)}", param=where)
    return Message(role, _content(item.get("content"), where))


def _item(item: Any, where: str) -> Message:
    if not isinstance(item, dict):
        raise bad_request(f"{where} must be an object with 'role' and 'content'", param=where)
    kind = item.get("type", "message")
    if kind != "message":
        raise bad_request(f"{where} is a '{str(kind)[:40]}' item: vigil's API takes messages (role and content) "
                          "as input; the agent runs its own tools", param=where)
    return _message(item, where)


def _content(content: Any, where: str) -> str:
    """A message's content as text: a string, or the text of its parts (a part that is not
    text, such as an image, becomes a note saying it was left out)."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise bad_request(f"{where}.content must be text or an array of content parts", param=where)
    texts = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise bad_request(f"{where}.content holds a part that is not an object with a 'type'", param=where)
        kind = part["type"]
        if kind in TEXT_PARTS:
            text = part.get("text", part.get("refusal"))
            if not isinstance(text, str):
                raise bad_request(f"{where}.content: a '{kind}' part must have 'text'", param=where)
            texts.append(text)
        else:
            texts.append(f"[the client sent a {kind[:40]} part, which vigil's API does not pass on]")
    return "\n".join(texts)


def _metadata(body: dict[str, Any]) -> dict[str, str]:
    metadata = body.get("metadata")
    if metadata is None:
        return {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise bad_request("'metadata' must be an object of text values", param="metadata")
    if len(metadata) > 16 or any(len(k) > 64 or len(v) > 512 for k, v in metadata.items()):
        raise bad_request("'metadata' holds at most 16 keys of 64 characters with values of 512", param="metadata")
    return dict(metadata)


def header_key(value: str | None) -> str | None:
    """The ``X-Vigil-Conversation`` header's key (``None`` when absent)."""
    if value is None:
        return None
    value = value.strip()
    if not _KEY.match(value):
        raise bad_request(f"X-Vigil-Conversation must be 1 to {MAX_KEY} characters", param="X-Vigil-Conversation")
    return value
