"""The baseline of ``gateway_load.py``: a bare Starlette app served by uvicorn as the gateway
serves its own (same server, same options), speaking just enough of the web chat's API for the
same driver: ``POST /api/conversations`` makes an id, ``GET /api/conversations/{id}/events`` is
its event stream, and ``POST /api/conversations/{id}/messages`` puts the frames a one-delta turn
of the gateway sends (``message_accepted``, ``turn_began``, ``delta``, ``turn_ended``) on that
conversation's open streams and answers 202. No store, no model, no agent: what is left of a
message's cost is the HTTP stack's and the event stream's, the floor under the gateway's.

Run as its own process; prints ``port N`` once it listens and serves until SIGTERM.

    VIGIL_BENCH_TOKEN=TOKEN python bench/gateway_load_parts/echo.py
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import socket
import sys
import uuid
from collections import defaultdict
from typing import Any, AsyncIterator

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

TOKEN = os.environ.get("VIGIL_BENCH_TOKEN", "")
streams: dict[str, set[asyncio.Queue[str]]] = defaultdict(set)
inbox = itertools.count(1)


def frame(event: dict[str, Any]) -> str:
    return f"data: {json.dumps(event, ensure_ascii=False, separators=(',', ':'))}\n\n"


def authorised(request: Request) -> bool:
    return request.headers.get("authorization") == f"Bearer {TOKEN}"


async def new_conversation(request: Request) -> Response:
    if not authorised(request):
        return JSONResponse({"error": "unauthorised"}, status_code=401)
    return JSONResponse({"id": uuid.uuid4().hex[:12]}, status_code=201)


async def events(request: Request) -> Response:
    if not authorised(request):
        return JSONResponse({"error": "unauthorised"}, status_code=401)
    session_id = request.path_params["id"]
    queue: asyncio.Queue[str] = asyncio.Queue()

    async def body() -> AsyncIterator[str]:
        streams[session_id].add(queue)
        try:
            yield ": connected\n\n"
            while True:
                yield await queue.get()
        finally:
            streams[session_id].discard(queue)

    return StreamingResponse(body(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


async def message(request: Request) -> Response:
    if not authorised(request):
        return JSONResponse({"error": "unauthorised"}, status_code=401)
    session_id = request.path_params["id"]
    posted = await request.json()
    inbox_id = next(inbox)
    frames = [
        {"type": "message_accepted", "session_id": session_id, "inbox_id": inbox_id,
         "client_id": posted.get("client_id"), "text": posted.get("text")},
        {"type": "turn_began", "session_id": session_id, "kind": "user", "text": posted.get("text")},
        {"type": "delta", "session_id": session_id, "text": "ok"},
        {"type": "turn_ended", "session_id": session_id, "kind": "user", "content": "ok", "error": None,
         "cancelled": False},
    ]
    for queue in streams.get(session_id, ()):
        for event in frames:
            queue.put_nowait(frame(event))
    return JSONResponse({"inbox_id": inbox_id, "session_id": session_id}, status_code=202)


app = Starlette(routes=[
    Route("/api/conversations", new_conversation, methods=["POST"]),
    Route("/api/conversations/{id}/events", events, methods=["GET"]),
    Route("/api/conversations/{id}/messages", message, methods=["POST"]),
])


def main() -> int:
    # As the gateway's listen(): IPPROTO_TCP named, or asyncio leaves Nagle on and every
    # kept-alive response waits 40 ms for a delayed ACK.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(512)
    print(f"port {sock.getsockname()[1]}", flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False,
                                           timeout_graceful_shutdown=1))
    server.run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())
