"""What the platforms' approval messages share: whose conversation decides a request
(:func:`owner_of`), what a press tells the presser when it decides nothing (:func:`decide`),
and the line that says how a request ended (:func:`outcome`). Each adapter posts the request
and reads the presses in its platform's own way (buttons, reactions, a reply)."""

from __future__ import annotations

import logging
from typing import Any, Callable

from vigil.gateway.adapters.base import GatewayPort
from vigil.store.gateway.gateway_tables import RouteKey

log = logging.getLogger(__name__)

NOT_WAITING = "This request is no longer waiting for an answer."
NO_OWNER = "Nobody can be told apart as this conversation's owner here; answer in the web chat."


def outcome(event: dict[str, Any]) -> str:
    """How the request of an ``approval_resolved`` event ended, as its message says it."""
    if event.get("approved"):
        return "✅ Approved."
    return {"timeout": "⌛ Denied: no answer in time.", "cancelled": "✖ Cancelled: the turn was stopped."}.get(
        str(event.get("reason")), "❌ Denied.")


def owner_of(gateway: GatewayPort, route: RouteKey, session_id: str | None) -> str | None:
    """Whose conversation it is: the route's user, else the one user of the conversation's
    routes on the same platform in that place (a heartbeat's route carries no user)."""
    if route.user:
        return route.user
    if session_id is None:
        return None
    try:
        routes = gateway.store.gateway.routes_of(session_id)
    except Exception as exc:  # the store is down: nobody can be told apart
        log.warning("%s: cannot look up the owner of %s: %s", route.adapter, session_id, exc)
        return None
    users = {r.user for r in routes if r.adapter == route.adapter and r.chat == route.chat and r.user}
    return users.pop() if len(users) == 1 else None


def decide(gateway: GatewayPort | None, approval_id: str, approved: bool, user: str, owner: str | None, *,
           mention: Callable[[str], str] = "<@{}>".format) -> str | None:
    """A press by ``user`` on a request waiting in a conversation of ``owner``: decided when
    they are the owner (``None``); else the note the presser is shown, nothing decided.
    ``mention``: how the platform names a user in text."""
    if gateway is None:
        return NOT_WAITING
    if owner is None:
        return NO_OWNER
    if user != owner:
        return f"Only {mention(owner)} can answer this request: it is their conversation."
    return None if gateway.resolve_approval(approval_id, approved) else NOT_WAITING
