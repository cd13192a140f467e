"""One outbox entry to its hook's ``url``: a signed JSON ``POST``.

The body (``kind``: ``reply``, ``command``, ``notice``, ``heartbeat``, ``cron`` …)::

    {"kind": "reply", "hook": "ha", "conversation": "kitchen", "text": "…",
     "session_id": "…", "in_reply_to": "<the request's webhook-id>",
     "cron": {"job": "news", "run": "…", "title": "…"}}

(``in_reply_to`` for the answer to a request, ``cron`` for a cron result.) It is signed with
the hook's secret as requests are (:mod:`.signing`); its ``webhook-id`` is the same on every
try, so the receiver can drop a repeat. A 2xx answer delivers it. A connection error, a
timeout, 408, 425, 429 or a 5xx is retried through the gateway's outbox with back-off
(``Retry-After`` honoured); a redirect or another 4xx fails it at once, with the reason.
A hook without a ``url`` keeps its answers in the conversation (the web chat, ``vigil
sessions``) and sends nothing; a cron result for it fails, saying so.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any

import httpx

from vigil import __version__
from vigil.gateway.adapters.base import DeliveryError
from vigil.gateway.adapters.webhooks import signing
from vigil.store.gateway.gateway_tables import OutboxEntry

if TYPE_CHECKING:
    from vigil.gateway.adapters.webhooks.adapter import Hook, WebhooksAdapter

log = logging.getLogger(__name__)

RETRIED = frozenset({408, 425, 429})
RETRY_AFTER_CAP = 3600.0


def delivery_id(entry: OutboxEntry) -> str:
    """The entry's ``webhook-id``: stable over its tries, new for every entry."""
    return f"vigil_{entry.id}_{int(entry.created_at * 1000)}"


async def payload(adapter: "WebhooksAdapter", entry: OutboxEntry) -> dict[str, Any]:
    """What the hook's url is sent for ``entry``."""
    body: dict[str, Any] = {
        "kind": entry.kind, "hook": entry.route.chat, "conversation": entry.route.thread or None,
        "text": entry.text, "session_id": entry.session_id,
    }
    if entry.inbox_id is not None and adapter.gateway is not None:
        request = await asyncio.to_thread(adapter.gateway.store.gateway.inbox_get, entry.inbox_id)
        delivery = ((request.meta.get("webhooks") or {}) if request is not None else {}).get("delivery")
        if isinstance(delivery, str):
            body["in_reply_to"] = delivery
    if entry.kind == "cron":
        body["cron"] = {"job": entry.meta.get("cron_job"), "run": entry.meta.get("cron_run"),
                        "title": entry.meta.get("title")}
    return body


async def deliver(adapter: "WebhooksAdapter", client: httpx.AsyncClient, hook: "Hook", entry: OutboxEntry) -> None:
    """Send ``entry`` to ``hook``'s url; ``DeliveryError`` (retryable or not) when it is not taken."""
    if entry.kind == "file":
        raise DeliveryError("a hook takes no files", retryable=False)
    if hook.url is None:
        if entry.kind == "cron":
            raise DeliveryError(f"the hook {hook.name} has no url to deliver to (webhooks.hooks.{hook.name}.url)",
                                retryable=False)
        log.debug("webhooks: the hook %s has no url; entry %s stays in its conversation", hook.name, entry.id)
        return
    if hook.key is None:  # retryable: a reload with the secret set sends it after all
        raise DeliveryError(f"the hook {hook.name}'s secret is not set (the variable {hook.secret_env})")
    body = json.dumps(await payload(adapter, entry), ensure_ascii=False).encode("utf-8")
    signed = signing.headers(hook.key, delivery_id(entry), int(adapter.now()), body)
    try:
        answer = await client.post(hook.url, content=body, headers={
            **signed, "content-type": "application/json", "user-agent": f"vigil/{__version__}",
        })
    except httpx.TimeoutException:
        raise DeliveryError(f"the hook {hook.name}'s url did not answer in time") from None
    except httpx.HTTPError as exc:
        raise DeliveryError(f"the hook {hook.name}'s url cannot be reached ({type(exc).__name__})") from None
    status = answer.status_code
    if 200 <= status < 300:
        return
    said = f"the hook {hook.name}'s url answered HTTP {status}"
    if status in RETRIED or status >= 500:
        raise DeliveryError(said, retry_after=_retry_after(answer.headers.get("retry-after")))
    if 300 <= status < 400:
        raise DeliveryError(f"{said} (a redirect, not followed: give webhooks.hooks.{hook.name}.url "
                            "the address it leads to)", retryable=False)
    raise DeliveryError(f"{said}: {_reason(answer)}", retryable=False)


def _retry_after(value: str | None) -> float | None:
    if value is None or not value.strip().isdigit():
        return None
    return min(float(value.strip()), RETRY_AFTER_CAP)


def _reason(answer: httpx.Response) -> str:
    text = " ".join(answer.text[:200].split())
    return text or answer.reason_phrase or "refused"
