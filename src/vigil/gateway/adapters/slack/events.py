"""``POST /slack/events``: what Slack sends the app — Events API callbacks, slash commands and
interactive payloads (one Request URL for all three; ``/slack/commands`` and
``/slack/interactive`` are the same endpoint for apps configured with separate URLs).

The request signature is checked before anything else (signing secret, 5-minute window): a
forged, missing or stale one is answered 401 and nothing is read. A message is stored
(:meth:`GatewayPort.receive`) before the 200 goes back, well inside Slack's 3 seconds; the
answer follows through the Web API. A redelivery (``X-Slack-Retry-Num``, same ``event_id``)
is a duplicate the gateway answers once.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from vigil.gateway.adapters.base import GatewayClosed
from vigil.gateway.adapters.slack import intake
from vigil.gateway.adapters.slack.intake import Refused

if TYPE_CHECKING:
    from vigil.gateway.adapters.slack.adapter import SlackAdapter

log = logging.getLogger(__name__)

MAX_BODY = 1_000_000
PATHS = ("/slack/events", "/slack/commands", "/slack/interactive")


def routes(adapter: "SlackAdapter") -> list[Route]:
    async def endpoint(request: Request) -> Response:
        try:
            body = await _body(request)
            adapter.verify(body, request.headers)
        except Refused as exc:
            return PlainTextResponse(str(exc), exc.status)
        try:
            return await _dispatch(adapter, request.headers.get("content-type", ""), body)
        except GatewayClosed as exc:
            return PlainTextResponse(str(exc), 503)
        except Refused as exc:
            return PlainTextResponse(str(exc), exc.status)

    return [Route(path, endpoint, methods=["POST"]) for path in PATHS]


async def _body(request: Request) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY:
        raise Refused(413, "request body too large")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise Refused(413, "request body too large")
        chunks.append(chunk)
    return b"".join(chunks)


async def _dispatch(adapter: "SlackAdapter", content_type: str, body: bytes) -> Response:
    kind = content_type.split(";")[0].strip().lower()
    if kind == "application/json":
        try:
            payload = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            raise Refused(400, "the body is not JSON") from None
        if not isinstance(payload, dict):
            raise Refused(400, "the body is not a JSON object")
        if payload.get("type") == "url_verification":
            return JSONResponse({"challenge": str(payload.get("challenge", ""))})
        if payload.get("type") == "event_callback":
            await intake.on_event(adapter, payload)
        return Response(status_code=200)
    if kind == "application/x-www-form-urlencoded":
        try:
            form = {k: v[0] for k, v in parse_qs(body.decode(), keep_blank_values=True).items()}
        except UnicodeDecodeError:
            raise Refused(400, "the form is not UTF-8") from None
        if "payload" in form:
            try:
                payload = json.loads(form["payload"])
            except ValueError:
                raise Refused(400, "the payload is not JSON") from None
            if isinstance(payload, dict):
                intake.on_interaction(adapter, payload)
            return Response(status_code=200)
        if "command" in form:
            note = await intake.on_command(adapter, form)
            if note:
                return JSONResponse({"response_type": "ephemeral", "text": note})
            return Response(status_code=200)
    raise Refused(400, "not a Slack event, command or interaction")

