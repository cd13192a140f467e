"""``POST /hooks/NAME``: a signed request to a named hook, stored before it is acknowledged.

The body is read up to ``webhooks.max_body_bytes`` (413 past it), checked (:mod:`.inbound`:
nothing is stored for a request that fails) and handed to the gateway, which stores it in
the durable inbox under the external id ``NAME:<webhook-id>`` before this answers ``202``::

    {"accepted": true, "duplicate": false, "hook": "ha", "id": "<webhook-id>",
     "conversation": "kitchen", "inbox_id": 12, "session_id": "..."}

A redelivery (the same ``webhook-id``) is answered ``202`` with ``"duplicate": true`` and
nothing new is done: the message is answered once. The answer goes to the hook's ``url``
(:mod:`.outbound`). Every error is JSON: ``{"error": {"code": ..., "message": ...}}``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from vigil.gateway.adapters.base import GatewayClosed, Inbound
from vigil.gateway.adapters.webhooks.inbound import Refused, parse, verify
from vigil.masking import printable
from vigil.store.gateway.gateway_tables import RouteKey

if TYPE_CHECKING:
    from vigil.gateway.adapters.webhooks.adapter import WebhooksAdapter

log = logging.getLogger(__name__)

PATH = "/hooks/{name:path}"
"""Every path under /hooks/ (a name with a slash is answered \"no such hook\", in JSON)."""
METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]


def error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def routes(adapter: "WebhooksAdapter") -> list[Route]:
    async def endpoint(request: Request) -> Response:
        try:
            return await _handle(adapter, request)
        except Refused as exc:
            if exc.status == 401:
                log.warning("webhooks: refused a request to /hooks/%s: %s", printable(request.path_params.get("name", ""), 40), exc)
            return error(exc.status, exc.code, str(exc))
        except GatewayClosed as exc:
            return error(503, "stopping", str(exc))

    return [Route(PATH, endpoint, methods=METHODS)]


async def _handle(adapter: "WebhooksAdapter", request: Request) -> Response:
    name = request.path_params["name"]
    if request.method != "POST":
        raise Refused(405, "method", "a hook takes POST only")
    gateway = adapter.gateway
    if gateway is None:
        raise Refused(503, "not_running", "the webhooks adapter is not running")
    hook = adapter.hook(name)
    if hook is None:
        raise Refused(404, "no_hook", "no such hook (webhooks.hooks in config.yaml names the hooks)")
    if hook.key is None:
        raise Refused(503, "no_secret", f"the hook's secret is not set (the variable {hook.secret_env})")
    body = await _body(request, adapter.settings.max_body_bytes)
    delivery = verify(hook.key, request.headers, body, now=adapter.now(), tolerance=adapter.settings.tolerance)
    message = parse(delivery, body)
    route = RouteKey(adapter.name, name, message.conversation)
    receipt = await gateway.receive(Inbound(
        route, f"{name}:{delivery}", message.text, sender=name,
        meta={"webhooks": {"hook": name, "delivery": delivery}},
    ))
    if receipt.denied:  # the hook left config.yaml between the lookup and now
        raise Refused(403, "not_allowed", "the hook is not allowed to talk to the agent")
    return JSONResponse({
        "accepted": True, "duplicate": receipt.duplicate, "hook": name, "id": delivery,
        "conversation": message.conversation, "inbox_id": receipt.inbox_id, "session_id": receipt.session_id,
    }, status_code=202)


async def _body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise Refused(413, "too_large", f"the body is larger than {limit:,} bytes (webhooks.max_body_bytes)")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise Refused(413, "too_large", f"the body is larger than {limit:,} bytes (webhooks.max_body_bytes)")
        chunks.append(chunk)
    return b"".join(chunks)
