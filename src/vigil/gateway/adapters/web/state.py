"""What the web chat's routes share: the gateway, the cookie signer, the login throttle and
the open pages; and the guard every protected route goes through."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from vigil.gateway.adapters.base import GatewayClosed, GatewayPort
from vigil.gateway.adapters.web.auth import COOKIE_NAME, STATE_CHANGING, LoginThrottle, SessionSigner, same_origin
from vigil.gateway.adapters.web.events import OpenPages
from vigil.store.gateway.gateway_tables import RouteKey

Endpoint = Callable[[Request], Awaitable[Response]]

COOKIE = "cookie"
BEARER = "bearer"


@dataclass
class WebState:
    gateway: GatewayPort | None = None
    signer: SessionSigner | None = None
    throttle: LoginThrottle = field(default_factory=LoginThrottle)
    pages: OpenPages = field(default_factory=OpenPages)
    routes: dict[str, RouteKey] = field(default_factory=dict)
    """Conversation id as a page uses it → the web route its messages go through (routes
    opened by this process; after a restart the first message opens it again)."""

    def forget_routes(self, session_ids: set[str]) -> None:
        """Drop the routes of deleted conversations: a message to one must be a 404, not
        the start of a new conversation."""
        for ref, route in list(self.routes.items()):
            if ref in session_ids or route.chat in session_ids:
                del self.routes[ref]

    def authenticated_by(self, request: Request) -> str | None:
        """``cookie``, ``bearer`` or ``None`` (not authenticated)."""
        if self.signer is None:
            return None
        header = request.headers.get("authorization")
        if header is not None:
            return BEARER if self.signer.bearer_valid(header) else None
        cookie = request.cookies.get(COOKIE_NAME)
        return COOKIE if cookie and self.signer.valid(cookie) else None


def error(status: int, message: str) -> JSONResponse:
    """A JSON error: ``{"error": message}``."""
    return JSONResponse({"error": message}, status_code=status, headers={"Cache-Control": "no-store"})


NOT_RUNNING = "the web chat is not running (the gateway is starting or stopping)"


def guarded(state: WebState, endpoint: Endpoint, *, page: bool = False) -> Endpoint:
    """``endpoint`` for authenticated callers only, checked before the body is read: no
    cookie or token gives 401 (a page redirects to /login); a state-changing request
    authenticated by cookie must come from this server's own origin, else 403."""

    async def checked(request: Request) -> Response:
        how = state.authenticated_by(request)
        if how is None:
            if page:
                return RedirectResponse("/login", status_code=303)
            return error(401, "not logged in: open the login URL or send 'Authorization: Bearer <token>'")
        if how == COOKIE and request.method in STATE_CHANGING and not same_origin(
            request.headers.get("origin"), request.headers.get("referer"),
            scheme=request.url.scheme, host=request.headers.get("host", ""),
        ):
            return error(403, "refused: a cross-origin request (the Origin is not this server)")
        if state.gateway is None:
            return error(503, NOT_RUNNING)
        try:
            return await endpoint(request)
        except GatewayClosed:  # the gateway began to stop while the request was handled
            return error(503, NOT_RUNNING)

    return checked
