"""The login page, logging in with the token (form or the printed URL) and logging out.

A login attempt another site's page made (an ``<img>`` or a link to ``/login?token=...``, a
form posted from elsewhere, see :func:`cross_origin`) is never checked against the token, so
it never counts towards the throttle that would lock the owner out. A link to the login URL
opened from another site (a webmail, a chat) shows the login form with its token filled in:
one press of *Log in*, from this server's own page, logs in. Checking such a request's token
instead would give every page, and any script that claims to be one, guesses the throttle
never sees: a redirect or a 401 tells them apart.
"""

from __future__ import annotations

import asyncio
import html
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from vigil.gateway.adapters.web.auth import COOKIE_MAX_AGE, COOKIE_NAME, cross_origin
from vigil.gateway.adapters.web.pages import security_headers
from vigil.gateway.adapters.web.state import WebState, guarded

MAX_FORM_BYTES = 4096
_MAX_FILLED = 256
"""Longest token from a link that is filled into the form (the real one is 43 characters)."""

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>vigil — log in</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/static/style.css">
</head>
<body class="login">
<main class="login-card">
<h1>vigil</h1>
<p>Paste the login token that <code>vigil gateway run</code> or <code>vigil gateway status</code> shows.</p>
{message}
<form method="post" action="/login">
<label for="token">Token</label>
<input id="token" name="token" type="password" autocomplete="current-password" required autofocus{value}>
<button type="submit" class="primary">Log in</button>
</form>
</main>
</body>
</html>
"""


def login_page(message: str = "", status: int = 200) -> HTMLResponse:
    note = f'<p class="login-error" role="alert">{html.escape(message)}</p>' if message else ""
    return HTMLResponse(_PAGE.format(message=note, value=""), status_code=status, headers=security_headers())


def confirm_page(token: str) -> HTMLResponse:
    """The login form with ``token`` filled in, for a login link another site's page opened."""
    note = "<p>This login link was opened from another site. Press <b>Log in</b> to continue.</p>"
    value = f' value="{html.escape(token, quote=True)}"' if len(token) <= _MAX_FILLED else ""
    return HTMLResponse(_PAGE.format(message=note, value=value), headers=security_headers())


def _from_elsewhere(request: Request) -> bool:
    headers = request.headers
    return cross_origin(
        headers.get("sec-fetch-site"), headers.get("origin"), headers.get("referer"),
        scheme=request.url.scheme, host=headers.get("host", ""),
    )


def login_routes(state: WebState) -> list[Route]:
    async def try_token(request: Request, token: str) -> Response:
        signer = state.signer
        if signer is None:
            return login_page("The gateway is starting; try again in a moment.", 503)
        if state.throttle.blocked():
            return login_page("Too many wrong tokens: wait a minute and try again.", 429)
        if not token or not signer.token_matches(token):
            state.throttle.failed()
            await asyncio.sleep(state.throttle.delay)
            return login_page("That token is not right.", 401)
        response = RedirectResponse("/", status_code=303, headers=security_headers())
        response.set_cookie(
            COOKIE_NAME, signer.issue(), max_age=COOKIE_MAX_AGE, path="/", httponly=True,
            samesite="strict", secure=request.url.scheme == "https",
        )
        return response

    async def get_login(request: Request) -> Response:
        token = request.query_params.get("token")
        if token is None:
            if state.authenticated_by(request) is not None:
                return RedirectResponse("/", status_code=303)
            return login_page()
        if _from_elsewhere(request):
            return confirm_page(token)
        return await try_token(request, token)

    async def post_login(request: Request) -> Response:
        if _from_elsewhere(request):
            return login_page("Refused: this login form was sent from another site. Log in here instead.", 403)
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_FORM_BYTES:
                return login_page("That form is too large.", 413)
        fields = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        return await try_token(request, (fields.get("token") or [""])[0].strip())

    async def logout(request: Request) -> Response:
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(COOKIE_NAME, path="/", httponly=True, samesite="strict")
        return response

    return [
        Route("/login", get_login, methods=["GET"]),
        Route("/login", post_login, methods=["POST"]),
        Route("/logout", guarded(state, logout), methods=["POST"]),
    ]
