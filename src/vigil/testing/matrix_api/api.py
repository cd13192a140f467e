"""The client-server API endpoints of the fake homeserver, as matrix-nio calls them (read from
its ``nio/api.py`` and ``nio/client/async_client.py``: the access token as a bearer header,
``/_matrix/client/v3`` for the client API, ``/_matrix/media/v3/upload`` for uploads and
``/_matrix/client/v1/media/download`` for authenticated downloads; a redaction hides an
event from what tests read), answering in the shapes
of the Matrix spec that nio's schemas (``nio/schemas.py``) check. Errors are the spec's
``{"errcode", "error"}`` bodies.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from vigil.testing.matrix_api.sync import long_poll, parse_since

if TYPE_CHECKING:
    from vigil.testing.matrix_api.state import Account, HomeserverState

CLIENT = "/_matrix/client/v3"
Handler = Callable[[Request, "Account", str], Awaitable[Response]]


def _error(status: int, errcode: str, error: str) -> JSONResponse:
    return JSONResponse({"errcode": errcode, "error": error}, status_code=status)


async def _body(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise ValueError("the body is not a JSON object")
    return body


def build_app(state: "HomeserverState", stopping: Callable[[], bool]) -> Starlette:
    """The homeserver as a Starlette app."""

    def authed(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            fault = state.take_fault(request.url.path)
            if fault is not None:
                return JSONResponse(fault.body, status_code=fault.status)
            header = request.headers.get("authorization", "")
            token = header[7:] if header.lower().startswith("bearer ") else request.query_params.get("access_token", "")
            if not token:
                return _error(401, "M_MISSING_TOKEN", "Missing access token")
            account = state.account(token)
            if account is None:
                return _error(401, "M_UNKNOWN_TOKEN", "Unrecognised access token")
            try:
                return await handler(request, account, token)
            except ValueError as exc:
                return _error(400, "M_NOT_JSON", str(exc))
        return endpoint

    async def versions(request: Request) -> Response:
        return JSONResponse({"versions": ["v1.1", "v1.5", "v1.11"], "unstable_features": {}})

    async def whoami(request: Request, account: "Account", token: str) -> Response:
        return JSONResponse({"user_id": account.user_id, "device_id": account.device_id, "is_guest": False})

    async def sync(request: Request, account: "Account", token: str) -> Response:
        query = request.query_params
        since = parse_since(query.get("since"))
        if query.get("since") and since is None:
            return _error(400, "M_INVALID_PARAM", "Invalid since token")
        try:
            timeout = int(query.get("timeout") or 0)
        except ValueError:
            return _error(400, "M_INVALID_PARAM", "Invalid timeout")
        with state.lock:  # syncing from a token acknowledges everything before it
            state.sync_calls[token] = state.sync_calls.get(token, 0) + 1
            if since is not None:
                state.synced_from[token] = max(since, state.synced_from.get(token, 0))
        return JSONResponse(await long_poll(state, token, since, timeout, query.get("full_state") == "true", stopping))

    def post(account: "Account", token: str, room_id: str, kind: str, content: dict[str, Any], txn: str) -> Response:
        """An event into the room by a member; a transaction id sent again gives the first event's id."""
        with state.lock:
            room = state.rooms.get(room_id)
            if room is None or room.membership(account.user_id) != "join":
                return _error(403, "M_FORBIDDEN", f"User {account.user_id} not in room {room_id}")
            known = state.transactions.get((token, txn))
            if known is None:
                known = state.add_event(room_id, account.user_id, kind, content, txn=txn)["event_id"]
                state.transactions[(token, txn)] = known
        return JSONResponse({"event_id": known})

    async def send(request: Request, account: "Account", token: str) -> Response:
        room_id, kind, txn = (request.path_params[name] for name in ("room", "kind", "txn"))
        return post(account, token, room_id, kind, await _body(request), txn)

    async def redact(request: Request, account: "Account", token: str) -> Response:
        room_id, target, txn = (request.path_params[name] for name in ("room", "event", "txn"))
        return post(account, token, room_id, "m.room.redaction", {**await _body(request), "redacts": target}, txn)

    async def join(request: Request, account: "Account", token: str) -> Response:
        room_id = request.path_params["room"]
        with state.lock:
            room = state.rooms.get(room_id)
            if room is None or room.membership(account.user_id) not in ("invite", "join"):
                return _error(403, "M_FORBIDDEN", "You are not invited to this room.")
            if room.membership(account.user_id) == "invite":
                state.join(room_id, account.user_id)
        return JSONResponse({"room_id": room_id})

    async def leave(request: Request, account: "Account", token: str) -> Response:
        room_id = request.path_params["room"]
        with state.lock:
            room = state.rooms.get(room_id)
            if room is None or room.membership(account.user_id) not in ("invite", "join"):
                return _error(403, "M_FORBIDDEN", "You are not in this room.")
            state.leave(room_id, account.user_id)
        return JSONResponse({})

    async def typing(request: Request, account: "Account", token: str) -> Response:
        body = await _body(request)
        with state.lock:
            state.typing.append((request.path_params["room"], account.user_id, bool(body.get("typing"))))
        return JSONResponse({})

    async def joined_members(request: Request, account: "Account", token: str) -> Response:
        with state.lock:
            room = state.rooms.get(request.path_params["room"])
            if room is None or room.membership(account.user_id) != "join":
                return _error(403, "M_FORBIDDEN", "You are not in this room.")
            joined = {user: {"display_name": state.displayname(user), "avatar_url": None} for user in room.members()}
        return JSONResponse({"joined": joined})

    async def upload(request: Request, account: "Account", token: str) -> Response:
        data = await request.body()
        name = request.query_params.get("filename", "")
        url = state.store_media(data, request.headers.get("content-type", "application/octet-stream"), name)
        return JSONResponse({"content_uri": url})

    async def download(request: Request, account: "Account", token: str) -> Response:
        with state.lock:
            found = state.media.get(request.path_params["media"])
        if found is None:
            return _error(404, "M_NOT_FOUND", "Not found")
        data, mimetype, name = found
        return Response(data, media_type=mimetype, headers={"Content-Disposition": f'attachment; filename="{name}"'})

    async def keys_upload(request: Request, account: "Account", token: str) -> Response:
        return JSONResponse(state.keys.upload(account, await _body(request)))

    async def keys_query(request: Request, account: "Account", token: str) -> Response:
        return JSONResponse(state.keys.query(await _body(request)))

    async def keys_claim(request: Request, account: "Account", token: str) -> Response:
        return JSONResponse(state.keys.claim(await _body(request)))

    async def to_device(request: Request, account: "Account", token: str) -> Response:
        state.keys.send(account, request.path_params["kind"], await _body(request))
        return JSONResponse({})

    routes = [
        Route("/_matrix/client/versions", versions),
        Route(f"{CLIENT}/account/whoami", authed(whoami)),
        Route(f"{CLIENT}/sync", authed(sync)),
        Route(f"{CLIENT}/rooms/{{room}}/send/{{kind}}/{{txn}}", authed(send), methods=["PUT"]),
        Route(f"{CLIENT}/rooms/{{room}}/redact/{{event}}/{{txn}}", authed(redact), methods=["PUT"]),
        Route(f"{CLIENT}/join/{{room}}", authed(join), methods=["POST"]),
        Route(f"{CLIENT}/rooms/{{room}}/join", authed(join), methods=["POST"]),
        Route(f"{CLIENT}/rooms/{{room}}/leave", authed(leave), methods=["POST"]),
        Route(f"{CLIENT}/rooms/{{room}}/typing/{{user}}", authed(typing), methods=["PUT"]),
        Route(f"{CLIENT}/rooms/{{room}}/joined_members", authed(joined_members)),
        Route("/_matrix/media/v3/upload", authed(upload), methods=["POST"]),
        Route("/_matrix/client/v1/media/download/{server}/{media}", authed(download)),
        Route("/_matrix/client/v1/media/download/{server}/{media}/{name}", authed(download)),
        Route(f"{CLIENT}/keys/upload", authed(keys_upload), methods=["POST"]),
        Route(f"{CLIENT}/keys/query", authed(keys_query), methods=["POST"]),
        Route(f"{CLIENT}/keys/claim", authed(keys_claim), methods=["POST"]),
        Route(f"{CLIENT}/sendToDevice/{{kind}}/{{txn}}", authed(to_device), methods=["PUT"]),
    ]
    return Starlette(routes=routes)
