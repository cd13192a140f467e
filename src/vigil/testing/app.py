"""The fake model's ASGI application: routing and moving bytes, including the deliberate
mid-stream connection drops. Decisions live in ``engine``."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable, MutableMapping

from vigil.testing.engine import FakeModelEngine, Outcome

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_MODEL_ROUTES = {"/v1/chat/completions": "openai", "/v1/messages": "anthropic"}


class ConnectionDropped(Exception):
    """Raised inside the app to make uvicorn close the connection mid-response, on purpose."""


class _HideDeliberateDrops(logging.Filter):
    """uvicorn logs every exception escaping an app; a scripted drop is not an error."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, ConnectionDropped)


def install_log_filter() -> None:
    """Idempotently keep deliberate drops out of the ``uvicorn.error`` log."""
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _HideDeliberateDrops) for f in logger.filters):
        logger.addFilter(_HideDeliberateDrops())


class FakeModelApp:
    """ASGI 3 app serving ``POST /v1/chat/completions``, ``POST /v1/messages`` and
    ``GET /v1/models`` (Anthropic shape when the request has an ``anthropic-version`` header)."""

    def __init__(self, engine: FakeModelEngine) -> None:
        self.engine = engine

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        method, path = scope["method"], scope["path"]
        api = _MODEL_ROUTES.get(path) or ("anthropic" if "anthropic-version" in headers else "openai")
        if method == "POST" and path in _MODEL_ROUTES:
            body = await _read_body(receive)
            client = scope.get("client")
            peer = f"{client[0]}:{client[1]}" if client else ""
            outcome = self.engine.model_call(api, path, body, headers, peer=peer)
        elif method == "GET" and path == "/v1/models":
            outcome = self.engine.list_models(api, headers)
        else:
            outcome = self.engine.not_found(api, method, path)
        await _deliver(outcome, receive, send)


async def _read_body(receive: Receive) -> bytes:
    parts = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(parts)


async def _client_left_during(receive: Receive, seconds: float) -> bool:
    """Wait ``seconds``; True as soon as the client disconnects."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while (remaining := deadline - loop.time()) > 0:
        try:
            # With the body consumed, uvicorn's receive() only returns on disconnect.
            message = await asyncio.wait_for(receive(), remaining)
        except asyncio.TimeoutError:
            return False
        if message["type"] == "http.disconnect":
            return True
    return False


async def _deliver(outcome: Outcome, receive: Receive, send: Send) -> None:
    while outcome.gate is not None and not outcome.gate.is_set():  # held until the test lets it go
        if await _client_left_during(receive, 0.01):
            return
    if await _client_left_during(receive, outcome.delay):
        return
    headers = [(b"content-type", outcome.content_type.encode())]
    headers += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in outcome.headers]
    await send({"type": "http.response.start", "status": outcome.status, "headers": headers})
    for position, chunk in enumerate(outcome.chunks):
        if position and await _client_left_during(receive, outcome.chunk_delay):
            return
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    if outcome.drop:
        if await _client_left_during(receive, outcome.hang):
            return
        raise ConnectionDropped("scripted disconnect")
    await send({"type": "http.response.body", "body": b"", "more_body": False})
