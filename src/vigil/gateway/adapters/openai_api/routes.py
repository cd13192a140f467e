"""The API's routes on the gateway's HTTP server, each behind the gateway token."""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from vigil.gateway.adapters.openai_api.completions import chat_completions
from vigil.gateway.adapters.openai_api.errors import NOT_FOUND, ApiError, guarded
from vigil.gateway.adapters.openai_api.responses import responses
from vigil.gateway.adapters.openai_api.state import ApiState

Handler = Callable[[ApiState, Request], Awaitable[Response]]


def _model(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": 0, "owned_by": "vigil"}


async def list_models(state: ApiState, request: Request) -> Response:
    return JSONResponse({"object": "list", "data": [_model(name) for name in state.model_names()]})


async def show_model(state: ApiState, request: Request) -> Response:
    name = request.path_params["name"]
    if name not in state.model_names():
        raise ApiError(404, f"The model '{name[:100]}' does not exist (any name answers in a request; "
                       f"/v1/models lists {', '.join(state.model_names())})", type=NOT_FOUND, code="model_not_found")
    return JSONResponse(_model(name))


async def unknown(state: ApiState, request: Request) -> Response:
    raise ApiError(404, f"vigil's API has no {request.method} {request.url.path[:200]}: it serves GET /v1/models, "
                   "POST /v1/chat/completions and POST /v1/responses", type=NOT_FOUND, code="unknown_url")


def api_routes(state: ApiState) -> list[Route]:
    def route(path: str, handler: Handler, methods: list[str]) -> Route:
        async def endpoint(request: Request) -> Response:
            return await handler(state, request)

        return Route(path, guarded(lambda: state.token, endpoint), methods=methods)

    return [
        route("/v1/models", list_models, ["GET"]),
        route("/v1/models/{name:path}", show_model, ["GET"]),
        route("/v1/chat/completions", chat_completions, ["POST"]),
        route("/v1/responses", responses, ["POST"]),
        route("/v1/{rest:path}", unknown, ["GET", "POST", "PUT", "PATCH", "DELETE"]),
    ]
