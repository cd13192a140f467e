"""Errors of the OpenAI-compatible API in OpenAI's shape, and the guard every route goes through.

Every answer that is not a success is ``{"error": {"message", "type", "code", "param"}}`` with
the HTTP status OpenAI uses for it (401 for a wrong key, 400 for a request that cannot be
answered as written, 404, 413, 503), so an OpenAI client raises its usual exceptions.
"""

from __future__ import annotations

import hmac
import logging
from typing import Any, Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from vigil.gateway.adapters.base import GatewayClosed
from vigil.store.errors import StoreUnavailable

log = logging.getLogger(__name__)

Endpoint = Callable[[Request], Awaitable[Response]]

INVALID_REQUEST = "invalid_request_error"
AUTHENTICATION = "authentication_error"
NOT_FOUND = "not_found_error"
UNAVAILABLE = "service_unavailable"


class ApiError(Exception):
    """A request answered with an error: ``status``, the message in words, OpenAI's error
    ``type`` and ``code``, and the request field at fault (``param``)."""

    def __init__(
        self, status: int, message: str, *, type: str = INVALID_REQUEST, code: str | None = None,
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.type = type
        self.code = code
        self.param = param

    def body(self) -> dict[str, Any]:
        return {"error": {"message": str(self), "type": self.type, "code": self.code, "param": self.param}}

    def response(self) -> JSONResponse:
        headers = {"Cache-Control": "no-store"}
        if self.status == 503:
            headers["Retry-After"] = "10"
        if self.status == 401:
            headers["WWW-Authenticate"] = 'Bearer realm="vigil"'
        return JSONResponse(self.body(), status_code=self.status, headers=headers)


def bad_request(message: str, *, param: str | None = None, code: str | None = None) -> ApiError:
    return ApiError(400, message, param=param, code=code)


def key_matches(request: Request, token: str | None) -> bool:
    """``Authorization: Bearer <token>`` carries the gateway's token (compared in constant time)."""
    if not token:
        return False
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


def guarded(token: Callable[[], str | None], endpoint: Endpoint) -> Endpoint:
    """``endpoint`` for callers with the gateway token only (checked before the body is read),
    its :class:`ApiError` and the gateway's refusals answered in OpenAI's shape. Any other
    error goes on to the HTTP server, which logs it and answers a JSON 500."""

    async def checked(request: Request) -> Response:
        try:
            if not key_matches(request, token()):
                raise ApiError(
                    401, "Incorrect API key provided: use the gateway token (gateway.token in the profile; "
                    "`vigil gateway status` shows it) as the bearer key.",
                    type=AUTHENTICATION, code="invalid_api_key",
                )
            return await endpoint(request)
        except ApiError as exc:
            return exc.response()
        except GatewayClosed:
            return ApiError(503, "the gateway is starting or stopping; send the request again in a moment",
                            type=UNAVAILABLE, code="unavailable").response()
        except StoreUnavailable as exc:
            return ApiError(503, f"nothing was stored: {exc}", type=UNAVAILABLE, code="store_unavailable").response()

    return checked
