"""The fake Bot API's control side over HTTP, for a test or benchmark in another process (and
for trying vigil's Telegram adapter by hand): ``/_fake/...`` plays the users and reads what the
bot did. Not part of Telegram's API; served on loopback only.

* ``POST /_fake/messages`` ``{chat_id, user_id, text, chat_type?, thread_id?}`` → the update
* ``POST /_fake/presses`` ``{chat_id, user_id, message_id, data}`` → the update
* ``POST /_fake/faults`` ``{times, status, retry_after?, methods?}``
* ``GET /_fake/sent?chat_id=`` → the bot's messages, ``GET /_fake/state`` → pending updates etc.

``python -m vigil.testing.telegram_api`` serves one until interrupted.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

if TYPE_CHECKING:
    from vigil.testing.telegram_api.server import FakeTelegramServer


class BadInput(ValueError):
    pass


def _int(body: dict[str, Any], name: str, required: bool = True) -> int | None:
    value = body.get(name)
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadInput(f"'{name}' must be an integer")
    return value


async def _body(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError:
        raise BadInput("the body must be a JSON object") from None
    if not isinstance(body, dict):
        raise BadInput("the body must be a JSON object")
    return body


def control_routes(server: "FakeTelegramServer") -> list[BaseRoute]:
    async def messages(request: Request) -> JSONResponse:
        body = await _body(request)
        text = body.get("text")
        if not isinstance(text, str) or not text:
            raise BadInput("'text' must be a non-empty string")
        kind = body.get("chat_type", "private")
        if kind not in ("private", "group", "supergroup"):
            raise BadInput("'chat_type' must be private, group or supergroup")
        return JSONResponse(server.message(_int(body, "chat_id") or 0, _int(body, "user_id") or 0, text,
                                           chat_type=kind, thread_id=_int(body, "thread_id", False)))

    async def presses(request: Request) -> JSONResponse:
        body = await _body(request)
        try:
            update = server.press(_int(body, "chat_id") or 0, _int(body, "user_id") or 0,
                                  _int(body, "message_id") or 0, str(body.get("data", "")))
        except KeyError as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)
        return JSONResponse(update)

    async def faults(request: Request) -> JSONResponse:
        body = await _body(request)
        times, status = _int(body, "times") or 0, _int(body, "status") or 0
        methods = body.get("methods")
        if methods is not None and not (isinstance(methods, list) and all(isinstance(m, str) for m in methods)):
            raise BadInput("'methods' must be a list of method names")
        if status == 429:
            server.rate_limit(times, _int(body, "retry_after", False) or 1, methods)
        elif 400 <= status <= 599:
            server.fail(times, status, methods)
        else:
            raise BadInput("'status' must be an HTTP error status")
        return JSONResponse({"faults_left": server.faults_left()})

    async def sent(request: Request) -> JSONResponse:
        raw = request.query_params.get("chat_id")
        chat = int(raw) if raw and raw.lstrip("-").isdigit() else None
        return JSONResponse([{k: v for k, v in asdict(m).items() if k != "content"} for m in server.sent(chat)])

    async def state(request: Request) -> JSONResponse:
        return JSONResponse({"pending": server.pending(), "webhook": server.webhook(), "commands": server.commands()})

    def guarded(handler: Any) -> Any:
        async def run(request: Request) -> JSONResponse:
            try:
                return await handler(request)
            except BadInput as exc:
                return JSONResponse({"error": str(exc)}, status_code=400)
        return run

    return [
        Route("/_fake/messages", guarded(messages), methods=["POST"]),
        Route("/_fake/presses", guarded(presses), methods=["POST"]),
        Route("/_fake/faults", guarded(faults), methods=["POST"]),
        Route("/_fake/sent", guarded(sent), methods=["GET"]),
        Route("/_fake/state", guarded(state), methods=["GET"]),
    ]
