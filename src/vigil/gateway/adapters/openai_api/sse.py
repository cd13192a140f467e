"""Server-Sent Events as OpenAI's streaming endpoints write them."""

from __future__ import annotations

import json
from typing import Any

DONE = "data: [DONE]\n\n"
"""The last frame of a chat-completions stream."""
KEEPALIVE = ": keepalive\n\n"
"""A comment frame: keeps proxies and clients from timing out while the agent works."""


def _json(data: dict[str, Any]) -> str:
    # ensure_ascii=False keeps text readable; json never writes a raw newline inside a value
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def data_frame(data: dict[str, Any]) -> str:
    """``data: <json>`` (chat completions: the chunk's ``object`` says what it is)."""
    return f"data: {_json(data)}\n\n"


def event_frame(data: dict[str, Any]) -> str:
    """``event: <type>`` and ``data: <json>`` (the Responses API: ``data`` carries ``type``)."""
    return f"event: {data['type']}\ndata: {_json(data)}\n\n"
