"""The fake Slack Web API: ``POST /api/<method>`` with the public documentation's shapes.

Arguments come as a query string, a form (urlencoded or multipart) or a JSON body; the token
as ``Authorization: Bearer xoxb-…`` (or a ``token`` argument). Every answer is HTTP 200 with
``{"ok": true, …}`` or ``{"ok": false, "error": "…"}``, except injected faults (5xx) and rate
limits (429 with ``Retry-After``). Also served: the upload URLs ``files.getUploadURLExternal``
hands out, and the ``url_private_download`` of files users shared (bearer token only).
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from vigil.testing.slack_api.state import Call, Ephemeral, Message, SlackState, Upload

MAX_TEXT = 40_000
"""chat.postMessage refuses longer text (``msg_too_long``)."""

Handler = Callable[[SlackState, dict[str, Any], str], dict[str, Any]]


def _error(error: str) -> dict[str, Any]:
    return {"ok": False, "error": error}


def _blocks(value: Any) -> list[dict[str, Any]] | None:
    if value in (None, ""):
        return None
    if isinstance(value, str):
        value = json.loads(value)
    return value if isinstance(value, list) else None


def _known(state: SlackState, channel: Any) -> bool:
    return isinstance(channel, str) and channel in state.channels


def auth_test(state: SlackState, args: dict[str, Any], base: str) -> dict[str, Any]:
    return {"ok": True, "url": base + "/", "team": "vigil-test", "user": "vigil", "team_id": state.team_id,
            "user_id": state.bot_user, "bot_id": state.bot_id, "is_enterprise_install": False}


def post_message(state: SlackState, args: dict[str, Any], base: str) -> dict[str, Any]:
    channel, text, blocks = args.get("channel"), args.get("text") or "", _blocks(args.get("blocks"))
    if not _known(state, channel):
        return _error("channel_not_found")
    if not text and not blocks:
        return _error("no_text")
    if len(text) > MAX_TEXT:
        return _error("msg_too_long")
    thread_ts = args.get("thread_ts") or None
    message = Message(channel, state.new_ts(), text, thread_ts, blocks)
    with state.lock:
        state.messages.append(message)
    return {"ok": True, "channel": channel, "ts": message.ts, "message": {
        "type": "message", "text": text, "user": state.bot_user, "bot_id": state.bot_id, "ts": message.ts,
        **({"thread_ts": thread_ts} if thread_ts else {}),
    }}


def _find(state: SlackState, channel: Any, ts: Any) -> Message | None:
    with state.lock:
        for message in state.messages:
            if message.channel == channel and message.ts == ts and not message.deleted:
                return message
    return None


def update(state: SlackState, args: dict[str, Any], base: str) -> dict[str, Any]:
    if not _known(state, args.get("channel")):
        return _error("channel_not_found")
    message = _find(state, args.get("channel"), args.get("ts"))
    if message is None:
        return _error("message_not_found")
    text = args.get("text") or ""
    if len(text) > MAX_TEXT:
        return _error("msg_too_long")
    with state.lock:
        message.text = text
        message.blocks = _blocks(args.get("blocks"))
        message.edits.append(text)
    return {"ok": True, "channel": message.channel, "ts": message.ts, "text": text}


def delete(state: SlackState, args: dict[str, Any], base: str) -> dict[str, Any]:
    message = _find(state, args.get("channel"), args.get("ts"))
    if message is None:
        return _error("message_not_found")
    with state.lock:
        message.deleted = True
    return {"ok": True, "channel": message.channel, "ts": message.ts}


def post_ephemeral(state: SlackState, args: dict[str, Any], base: str) -> dict[str, Any]:
    channel, user = args.get("channel"), args.get("user")
    if not _known(state, channel):
        return _error("channel_not_found")
    if not user:
        return _error("user_not_in_channel")
    text, blocks = args.get("text") or "", _blocks(args.get("blocks"))
    if not text and not blocks:
        return _error("no_text")
    with state.lock:
        state.ephemerals.append(Ephemeral(channel, user, text, args.get("thread_ts") or None, blocks))
    return {"ok": True, "message_ts": state.new_ts()}


def get_upload_url(state: SlackState, args: dict[str, Any], base: str) -> dict[str, Any]:
    filename, length = args.get("filename"), args.get("length")
    if not filename or length in (None, ""):
        return _error("invalid_arguments")
    upload = Upload(state.new_id("F"), str(filename), int(length))
    with state.lock:
        state.uploads[upload.id] = upload
    return {"ok": True, "upload_url": f"{base}/upload/v1/{upload.id}", "file_id": upload.id}


def complete_upload(state: SlackState, args: dict[str, Any], base: str) -> dict[str, Any]:
    files = args.get("files")
    files = json.loads(files) if isinstance(files, str) else files
    if not isinstance(files, list) or not files:
        return _error("invalid_arguments")
    channel = args.get("channel_id") or None
    if channel is not None and not _known(state, channel):
        return _error("channel_not_found")
    done = []
    with state.lock:
        for item in files:
            upload = state.uploads.get(item.get("id", "")) if isinstance(item, dict) else None
            if upload is None or upload.data is None:
                return _error("file_not_found")
            upload.channel, upload.thread_ts = channel, args.get("thread_ts") or None
            upload.initial_comment, upload.title = args.get("initial_comment") or None, item.get("title")
            done.append({"id": upload.id, "name": upload.filename, "title": upload.title or upload.filename,
                         "size": len(upload.data)})
    return {"ok": True, "files": done}


def reactions_add(state: SlackState, args: dict[str, Any], base: str) -> dict[str, Any]:
    if not _known(state, args.get("channel")):
        return _error("channel_not_found")
    return {"ok": True}


METHODS: dict[str, Handler] = {
    "auth.test": auth_test,
    "chat.postMessage": post_message,
    "chat.update": update,
    "chat.delete": delete,
    "chat.postEphemeral": post_ephemeral,
    "files.getUploadURLExternal": get_upload_url,
    "files.completeUploadExternal": complete_upload,
    "reactions.add": reactions_add,
}


async def _arguments(request: Request) -> dict[str, Any]:
    args: dict[str, Any] = dict(request.query_params)
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "application/json":
        body = await request.body()
        if body:
            value = json.loads(body)
            if isinstance(value, dict):
                args.update(value)
    elif kind in ("application/x-www-form-urlencoded", "multipart/form-data"):
        form = await request.form()
        args.update({key: value for key, value in form.items() if isinstance(value, str)})
    return args


def _token(request: Request, args: dict[str, Any]) -> str:
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    return given.strip() if scheme.lower() == "bearer" else str(args.get("token") or "")


def build_app(state: SlackState, base_url: Callable[[], str],
              extra: list[Route] | None = None) -> Starlette:
    """The ASGI app serving ``state``; ``base_url()`` is the server's own address."""

    def faulted(method: str = "") -> Response | None:
        fault = state.injected(method)
        if fault is None:
            return None
        status, headers = fault
        body = {"ok": False, "error": "ratelimited" if status == 429 else state.fail_error}
        return JSONResponse(body, status, headers=headers)

    async def api(request: Request) -> Response:
        method = request.path_params["method"]
        try:
            args = await _arguments(request)
        except (ValueError, UnicodeDecodeError):
            return JSONResponse(_error("invalid_form_data"))
        record = Call(method, {k: v for k, v in args.items() if k != "token"}, 200, time.time())
        fault = faulted(method)
        if fault is not None:
            record.status = fault.status_code
            answer: Response = fault
        else:
            handler = METHODS.get(method)
            if method == "apps.connections.open":  # the app-level token, not the bot's
                answer = JSONResponse(
                    _error("invalid_auth") if _token(request, args) != state.app_token
                    else {"ok": True, "url": state.socket_url} if state.socket_url
                    else _error("internal_error"))
            elif _token(request, args) != state.bot_token:
                answer = JSONResponse(_error("not_authed" if not _token(request, args) else "invalid_auth"))
            elif handler is None:
                answer = JSONResponse(_error("unknown_method"))
            else:
                answer = JSONResponse(handler(state, args, base_url()))
        with state.lock:
            state.calls.append(record)
        return answer

    async def upload(request: Request) -> Response:
        fault = faulted()
        if fault is not None:
            return fault
        data = await request.body()
        with state.lock:
            item = state.uploads.get(request.path_params["file_id"])
            if item is None:
                return PlainTextResponse("not found", 404)
            item.data = data
        return PlainTextResponse(f"OK - {len(data)}")

    async def download(request: Request) -> Response:
        if _token(request, {}) != state.bot_token:
            return PlainTextResponse("<html>login</html>", 403)  # Slack sends its login page
        with state.lock:
            data = state.hosted.get(request.path_params["path"])
        if data is None:
            return PlainTextResponse("not found", 404)
        return Response(data, media_type="application/octet-stream")

    async def respond(request: Request) -> Response:
        """A slash command's ``response_url`` (valid for any app holding it, as on Slack)."""
        try:
            body = json.loads(await request.body())
        except ValueError:
            return PlainTextResponse("invalid_payload", 400)
        with state.lock:
            state.responses.append({"path": request.url.path, **(body if isinstance(body, dict) else {})})
        return PlainTextResponse("ok")

    routes: list[Route] = [
        Route("/commands/{hook}", respond, methods=["POST"]),
        Route("/api/{method}", api, methods=["POST", "GET"]),
        Route("/upload/v1/{file_id}", upload, methods=["POST"]),
        Route("/files-pri/{path:path}", download, methods=["GET"]),
        *(extra or []),
    ]
    return Starlette(routes=routes)
