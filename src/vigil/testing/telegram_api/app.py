"""The fake Bot API's HTTP side: ``/bot<token>/<method>`` (GET or POST; query string, JSON,
form or multipart parameters, as the real API takes them) and ``/file/bot<token>/<path>``.

Answers are ``{"ok": true, "result": ...}`` or ``{"ok": false, "error_code": N, "description":
...}`` (with ``parameters.retry_after`` on 429), as https://core.telegram.org/bots/api#making-requests
describes them."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Awaitable, Callable, Mapping, Sequence

from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from vigil.testing.telegram_api.state import JSON, FakeBotState
from vigil.testing.telegram_api.text import MAX_CAPTION, EntityError, check_text

MAX_POLL_TIMEOUT = 50
POLL_STEP = 0.01
_FAULT_TEXT = {400: "Bad Request: chat not found", 401: "Unauthorized", 403: "Forbidden: bot was blocked by the user",
               500: "Internal Server Error", 503: "Service Unavailable"}


class ApiError(Exception):
    def __init__(self, status: int, description: str, retry_after: int | None = None) -> None:
        super().__init__(description)
        self.status = status
        self.description = description
        self.retry_after = retry_after


def error_body(status: int, description: str, retry_after: int | None = None) -> JSON:
    body: JSON = {"ok": False, "error_code": status, "description": description}
    if retry_after is not None:
        body["parameters"] = {"retry_after": retry_after}
    return body


class Params:
    """A request's parameters with the API's loose typing (form values are strings)."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values

    def str(self, name: str, required: bool = False) -> str | None:
        value = self.values.get(name)
        if value is None or isinstance(value, UploadFile):
            if required:
                raise ApiError(400, f"Bad Request: parameter \"{name}\" is required")
            return None
        return value if isinstance(value, str) else json.dumps(value) if isinstance(value, (dict, list)) else str(value)

    def int(self, name: str, required: bool = False) -> int | None:
        raw = self.str(name, required)
        if raw is None or raw == "":
            return None
        try:
            return int(raw)
        except ValueError:
            raise ApiError(400, f"Bad Request: invalid {name} specified") from None

    def json(self, name: str) -> Any:
        value = self.values.get(name)
        if isinstance(value, str):
            try:
                return json.loads(value)
            except ValueError:
                raise ApiError(400, f"Bad Request: can't parse {name} JSON object") from None
        return value

    def file(self, name: str) -> UploadFile | str | None:
        value = self.values.get(name)
        return value if isinstance(value, (UploadFile, str)) else None


async def read_params(request: Request) -> Params:
    values: dict[str, Any] = dict(request.query_params)
    if request.method == "POST":
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind == "application/json":
            body = await request.body()
            if body:
                try:
                    loaded = json.loads(body)
                except ValueError:
                    raise ApiError(400, "Bad Request: can't parse JSON") from None
                if isinstance(loaded, dict):
                    values.update(loaded)
        elif kind in ("application/x-www-form-urlencoded", "multipart/form-data"):
            form = await request.form()
            for key, value in form.multi_items():
                values[key] = value
    return Params(values)


Handler = Callable[[FakeBotState, Params], Awaitable[Any]]


Poll = Callable[[FakeBotState, Params, Callable[[], bool], Callable[[], bool]], Awaitable[list[JSON]]]
"""``getUpdates``: ``(state, params, stopping, client_gone)``."""


def build_app(state: FakeBotState, stopping: Callable[[], bool], handlers: Mapping[str, Handler], poll: Poll,
              extra: Sequence[BaseRoute] = ()) -> Starlette:
    """The ASGI app serving ``state`` with the Bot API methods ``handlers`` (by lower-case
    name) and ``poll`` for ``getUpdates``; ``stopping()`` ends held long polls early;
    ``extra``: the fake's control routes."""

    async def api(request: Request) -> Response:
        token, method = request.path_params["token"], request.path_params["method"]
        if token != state.token:
            return JSONResponse(error_body(401, "Unauthorized"), status_code=401)
        try:
            params = await read_params(request)
            fault = state.take_fault(method, params.values)
            if fault is not None:
                state.record(method, dict(params.values), fault.status)
                if fault.status == 429:
                    retry = fault.retry_after or 1
                    raise ApiError(429, f"Too Many Requests: retry after {retry}", retry)
                if fault.status == 502:
                    return Response("<html><body><h1>502 Bad Gateway</h1></body></html>", 502, media_type="text/html")
                raise ApiError(fault.status, _FAULT_TEXT.get(fault.status, "Error"))
            handler = handlers.get(method.lower())
            if handler is None:
                raise ApiError(404, "Not Found")
            client = f"{request.client.host}:{request.client.port}" if request.client else "?"
            if method.lower() == "getupdates":
                result = await _long_poll(request, state, params, stopping, client, poll)
            else:
                result = await handler(state, params)
            state.record(method, _loggable(params), 200, client)
            return JSONResponse({"ok": True, "result": result})
        except ApiError as exc:
            state.record(method, {}, exc.status)
            return JSONResponse(error_body(exc.status, exc.description, exc.retry_after), status_code=exc.status)

    async def download(request: Request) -> Response:
        if request.path_params["token"] != state.token:
            return JSONResponse(error_body(401, "Unauthorized"), status_code=401)
        path = request.path_params["path"]
        with state.lock:
            stored = next((f for f in state.files.values() if f.path == path), None)
        if stored is None:
            return JSONResponse(error_body(404, "Not Found"), status_code=404)
        return Response(stored.content, media_type="application/octet-stream")

    return Starlette(routes=[
        *extra,
        Route("/bot{token}/{method}", api, methods=["GET", "POST"]),
        Route("/file/bot{token}/{path:path}", download, methods=["GET"]),
    ])


async def _long_poll(request: Request, state: FakeBotState, params: Params, stopping: Callable[[], bool],
                     client: str, poll: Poll) -> list[JSON]:
    """``getUpdates``, counted while held, and let go when its client hangs up (as Telegram
    does: a poller that died holds no poll)."""
    gone = asyncio.Event()

    async def watch() -> None:
        while not await request.is_disconnected():
            await asyncio.sleep(POLL_STEP * 5)
        gone.set()

    watcher = asyncio.create_task(watch())
    state.poll_started(client)
    try:
        return await poll(state, params, stopping, gone.is_set)
    finally:
        state.poll_ended(client)
        watcher.cancel()


def _loggable(params: Params) -> JSON:
    return {k: (f"<file {v.filename}>" if isinstance(v, UploadFile) else v) for k, v in params.values.items()}


def bot_message(state: FakeBotState, chat_id: int, thread_id: int | None, **fields: Any) -> tuple[JSON, int]:
    """A new message from the bot in ``chat_id`` (checked: the chat and topic exist)."""
    with state.lock:
        chat = state.chats.get(chat_id)
        if chat is None:
            raise ApiError(400, "Bad Request: chat not found")
        if thread_id is not None and thread_id not in state.topics.get(chat_id, set()):
            raise ApiError(400, "Bad Request: message thread not found")
    message_id = state.next_message_id(chat_id)
    body: JSON = {"message_id": message_id, "from": state.bot, "chat": chat, "date": int(time.time()), **fields}
    if thread_id is not None:
        body["message_thread_id"] = thread_id
        body["is_topic_message"] = True
    return body, message_id


def checked(text: str | None, parse_mode: str | None, *, caption: bool = False) -> str:
    try:
        return check_text(text, parse_mode, limit=MAX_CAPTION if caption else 4096, caption=caption)
    except EntityError as exc:
        raise ApiError(400, str(exc)) from None


async def wait_for_updates(state: FakeBotState, params: Params, stopping: Callable[[], bool],
                           gone: Callable[[], bool] = lambda: False) -> list[JSON]:
    """Hold the request until an update is there or ``timeout`` seconds passed (long polling);
    ``gone()``: the client hung up (nothing is handed out)."""
    offset, limit = params.int("offset"), params.int("limit") or 100
    timeout = min(MAX_POLL_TIMEOUT, max(0, params.int("timeout") or 0))
    allowed = params.json("allowed_updates")
    deadline = time.monotonic() + timeout
    with state.lock:
        if state.webhook is not None:
            raise ApiError(409, "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first")
    while True:
        if gone():
            return []
        found = state.pending_updates(offset, max(1, min(100, limit)), allowed if isinstance(allowed, list) else None)
        if found or time.monotonic() >= deadline or stopping():
            state.hand_out(found)
            return found
        await asyncio.sleep(POLL_STEP)
