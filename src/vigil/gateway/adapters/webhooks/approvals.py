"""A command waiting for approval in a hook's conversation, told to the hook's ``url``.

A hook has no buttons, and its caller is a program: the request is posted (signed, once, not
through the outbox — it is only news while the request waits) so a person can decide it in
the web chat, where every conversation is listed, before ``gateway.approval_timeout`` denies
it::

    {"kind": "approval_request", "hook": "ha", "conversation": "kitchen", "text": "…",
     "approval": {"id": "…", "tool": "terminal", "description": "…", "expires_at": 1760000000.0}}
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

import httpx

from vigil import __version__
from vigil.gateway.adapters.webhooks import signing
from vigil.store.gateway.gateway_tables import RouteKey

if TYPE_CHECKING:
    from vigil.gateway.adapters.webhooks.adapter import Hook, WebhooksAdapter

log = logging.getLogger(__name__)


def notice(route: RouteKey, event: dict[str, Any]) -> dict[str, Any]:
    """The body told to the hook for an ``approval_request`` event."""
    tool, description = str(event.get("tool") or "a tool"), str(event.get("description") or "")
    return {
        "kind": "approval_request", "hook": route.chat, "conversation": route.thread or None,
        "text": f"vigil asks to run {tool}: {description}\nApprove or deny it in the web chat "
                "(this conversation is listed there); without an answer in time it is denied.",
        "approval": {"id": event.get("id"), "tool": tool, "description": description,
                     "expires_at": event.get("expires_at")},
    }


async def announce(adapter: "WebhooksAdapter", client: httpx.AsyncClient, hook: "Hook", route: RouteKey,
                   event: dict[str, Any]) -> None:
    """Post the request to ``hook``'s url; a failure is logged (the request still waits)."""
    if hook.url is None or hook.key is None:
        return
    body = json.dumps(notice(route, event), ensure_ascii=False).encode("utf-8")
    delivery = f"vigil_approval_{event.get('id')}"
    headers = signing.headers(hook.key, delivery, int(adapter.now()), body)
    try:
        answer = await client.post(hook.url, content=body, headers={
            **headers, "content-type": "application/json", "user-agent": f"vigil/{__version__}",
        })
    except httpx.HTTPError as exc:
        log.warning("webhooks: cannot tell the hook %s of an approval request: %s", hook.name, type(exc).__name__)
        return
    if not 200 <= answer.status_code < 300:
        log.warning("webhooks: the hook %s's url answered HTTP %s to an approval request", hook.name, answer.status_code)
