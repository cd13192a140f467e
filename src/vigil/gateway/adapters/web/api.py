"""The web chat's JSON API: conversations, messages, approvals and uploads (see the package
docstring for the routes). Every route here is behind :func:`guarded`."""

from __future__ import annotations

import json
import secrets
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from vigil.gateway.adapters.base import GatewayClosed, GatewayPort, Inbound
from vigil.gateway.adapters.web.events import event_stream
from vigil.gateway.adapters.web.state import Endpoint, WebState, error, guarded
from vigil.gateway.adapters.web.uploads import UploadError, save_upload
from vigil.masking import is_text
from vigil.store import AmbiguousSession, SessionNotFound
from vigil.store.gateway.gateway_tables import RouteKey

ADAPTER = "web"
MAX_TEXT = 100_000
"""Characters in one message."""
MAX_CLIENT_ID = 200
MAX_JSON_BYTES = 4 * MAX_TEXT + 16_384
MAX_QUERY = 500
MAX_LIMIT = 500


class BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def json_body(request: Request) -> dict[str, Any]:
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_JSON_BYTES:
            raise BadRequest(413, "the request body is too large")
    try:
        value = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise BadRequest(400, "the body is not valid JSON") from None
    if not isinstance(value, dict):
        raise BadRequest(400, "the body must be a JSON object")
    if not _only_text(value):
        raise BadRequest(400, "the body holds text that is not valid Unicode (a lone surrogate such as \\ud800)")
    return value


def _only_text(value: Any) -> bool:
    """Whether every string in a parsed JSON value, keys too, is valid Unicode: JSON can write
    a lone surrogate (``"\\ud800"``), which no store, log or page can hold. A loop, not
    recursion: the body may nest as deep as the parser allows."""
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


class ConversationRoutes:
    """Maps the conversation ids the pages use to web routes, and serves the API."""

    def __init__(self, state: WebState) -> None:
        self.state = state
        self._routes = state.routes

    @property
    def gateway(self) -> GatewayPort:
        """The running gateway; ``GatewayClosed`` (a 503, see ``guarded``) once it stops."""
        if self.state.gateway is None:
            raise GatewayClosed("the gateway is stopping")
        return self.state.gateway

    async def _resolve(self, ref: str) -> str:
        """The full id of the conversation ``ref`` names (an id or a prefix), its newest continuation."""
        view = await self.gateway.conversation(ref)
        return str(view["id"])

    async def _route(self, ref: str) -> RouteKey:
        known = self._routes.get(ref)
        if known is not None:
            return known
        session_id = await self._resolve(ref)
        route = RouteKey(ADAPTER, session_id)
        await self.gateway.open_conversation(route, session_id)
        self._routes[ref] = self._routes[session_id] = route
        return route

    # -- endpoints ---------------------------------------------------------------------------
    async def list(self, request: Request) -> Response:
        query = request.query_params.get("q", "").strip()[:MAX_QUERY] or None
        try:
            limit = max(1, min(MAX_LIMIT, int(request.query_params.get("limit", "100"))))
        except ValueError:
            return error(400, "limit must be a whole number")
        archived = request.query_params.get("archived", "0")
        if archived not in ("0", "1"):
            return error(400, "archived must be 0 or 1")
        found = await self.gateway.conversations(query, limit=limit, archived=archived == "1")
        return JSONResponse({"conversations": found})

    async def create(self, request: Request) -> Response:
        if not self.gateway.accepting:
            return error(503, "the gateway is shutting down")
        route = RouteKey(ADAPTER, f"new-{secrets.token_urlsafe(12)}")
        session_id = await self.gateway.open_conversation(route, None)
        self._routes[session_id] = route
        return JSONResponse({"id": session_id}, status_code=201)

    async def show(self, request: Request) -> Response:
        return JSONResponse(await self.gateway.conversation(request.path_params["id"]))

    async def post_message(self, request: Request) -> Response:
        body = await json_body(request)
        text, client_id = body.get("text"), body.get("client_id")
        if not isinstance(text, str) or not text.strip():
            return error(400, "'text' must be a non-empty string")
        if len(text) > MAX_TEXT:
            return error(400, f"the message is longer than {MAX_TEXT:,} characters")
        if not isinstance(client_id, str) or not 0 < len(client_id) <= MAX_CLIENT_ID:
            return error(400, f"'client_id' must be a string of 1 to {MAX_CLIENT_ID} characters")
        if not self.gateway.accepting:
            return error(503, "the gateway is shutting down")
        route = await self._route(request.path_params["id"])
        receipt = await self.gateway.receive(Inbound(route, external_id=client_id, text=text))
        return JSONResponse(
            {"inbox_id": receipt.inbox_id, "duplicate": receipt.duplicate, "session_id": receipt.session_id},
            status_code=202,
        )

    async def events(self, request: Request) -> Response:
        session_id = await self._resolve(request.path_params["id"])
        subscription = self.gateway.subscribe(session_id)
        return StreamingResponse(
            event_stream(subscription, self.state.pages, session_id),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def approve(self, request: Request) -> Response:
        body = await json_body(request)
        approve = body.get("approve")
        if not isinstance(approve, bool):
            return error(400, "'approve' must be true or false")
        if not self.gateway.resolve_approval(request.path_params["approval_id"], approve):
            return error(404, "no pending approval has this id (it was answered or timed out)")
        return JSONResponse({"approved": approve})

    async def upload(self, request: Request) -> Response:
        session_id = await self._resolve(request.path_params["id"])
        directory = self.gateway.workdir(session_id)
        saved = await save_upload(
            request.headers.get("content-type", ""), request.stream(), directory,
            max_bytes=self.gateway.settings.gateway.upload_max_bytes,
        )
        return JSONResponse({"name": saved.name, "path": str(saved.path), "size": saved.size}, status_code=201)


def _answering_errors(endpoint: Endpoint) -> Endpoint:
    """The API's errors as JSON: bad input 400/413, unknown conversation 404, shutdown 503."""

    async def answered(request: Request) -> Response:
        try:
            return await endpoint(request)
        except BadRequest as exc:
            return error(exc.status, str(exc))
        except UploadError as exc:
            return error(exc.status, str(exc))
        except SessionNotFound as exc:
            return error(404, str(exc))
        except AmbiguousSession as exc:
            return error(400, str(exc))
        except GatewayClosed:
            return error(503, "the gateway is shutting down")

    return answered


def api_routes(state: WebState) -> list[Route]:
    api = ConversationRoutes(state)

    def route(path: str, endpoint: Endpoint, method: str) -> Route:
        return Route(path, guarded(state, _answering_errors(endpoint)), methods=[method])

    return [
        route("/api/conversations", api.list, "GET"),
        route("/api/conversations", api.create, "POST"),
        route("/api/conversations/{id}", api.show, "GET"),
        route("/api/conversations/{id}/messages", api.post_message, "POST"),
        route("/api/conversations/{id}/events", api.events, "GET"),
        route("/api/conversations/{id}/files", api.upload, "POST"),
        route("/api/approvals/{approval_id}", api.approve, "POST"),
    ]
