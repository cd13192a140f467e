"""The chat page and its static files, with a strict Content-Security-Policy.

The page is built from ``frontend/`` (``npm run build`` there) into ``ui/``, which ships in the
wheel: running vigil needs no Node."""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from vigil.gateway.adapters.web.state import WebState, guarded

STATIC_DIR = Path(__file__).with_name("ui")

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)


def security_headers() -> dict[str, str]:
    """Headers of every HTML page: no inline script, no framing, no sniffing, no caching."""
    return {
        "Content-Security-Policy": CONTENT_SECURITY_POLICY,
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "same-origin",
        "Cache-Control": "no-store",
    }


class _StaticFiles(StaticFiles):
    """Static files with ``nosniff`` (so a text file is never run as script)."""

    async def get_response(self, path: str, scope):  # type: ignore[no-untyped-def]
        response = await super().get_response(path, scope)
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Cache-Control"] = "no-cache"
        return response


def page_routes(state: WebState) -> list[BaseRoute]:
    async def index(request: Request) -> Response:
        return FileResponse(STATIC_DIR / "index.html", media_type="text/html", headers=security_headers())

    return [
        Route("/", guarded(state, index, page=True), methods=["GET"]),
        Mount("/static", app=_StaticFiles(directory=STATIC_DIR), name="static"),
    ]
