"""``POST /telegram/webhook``: updates Telegram pushes (``telegram.mode: webhook``).

The secret token set with ``setWebhook`` must come back in ``X-Telegram-Bot-Api-Secret-Token``
before anything is read. The answer is 200 only once the gateway has the message; otherwise
5xx, and Telegram delivers the update again (the inbox answers it once).
"""

from __future__ import annotations

import hmac
import json
import logging
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from vigil.gateway.adapters.base import GatewayClosed

if TYPE_CHECKING:
    from vigil.gateway.adapters.telegram.adapter import TelegramAdapter

log = logging.getLogger(__name__)

PATH = "/telegram/webhook"
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
MAX_BODY = 1024 * 1024


def webhook_routes(adapter: "TelegramAdapter") -> list[BaseRoute]:
    async def receive(request: Request) -> Response:
        secret = adapter.webhook_secret
        if adapter.bot is None or secret is None or adapter.settings.mode != "webhook":
            return JSONResponse({"error": "the Telegram webhook is not enabled"}, status_code=404)
        given = request.headers.get(SECRET_HEADER, "")
        if not hmac.compare_digest(given.encode(), secret.encode()):
            return JSONResponse({"error": "wrong or missing secret token"}, status_code=401)
        body = await request.body()
        if len(body) > MAX_BODY:
            return JSONResponse({"error": "update too large"}, status_code=413)
        try:
            from telegram import Update

            update = Update.de_json(json.loads(body), adapter.bot)
        except Exception:
            return JSONResponse({"error": "not a Telegram update"}, status_code=400)
        if update is None:
            return JSONResponse({"error": "not a Telegram update"}, status_code=400)
        try:
            await adapter.messages.handle(update)
        except GatewayClosed:
            return JSONResponse({"error": "the gateway is stopping; try again"}, status_code=503)
        except Exception:
            log.exception("telegram: webhook update %s could not be handled", update.update_id)
            return JSONResponse({"error": "not stored; try again"}, status_code=500)
        return JSONResponse({"ok": True})

    return [Route(PATH, receive, methods=["POST"])]
