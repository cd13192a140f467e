"""A turn's live events on a platform that streams and asks for approvals: each goes to the
turn's streamed message (:mod:`vigil.gateway.adapters.streaming`) or to the adapter's approval
messages (:mod:`vigil.gateway.adapters.approvals`). A live event is only a preview — the
answer comes through the outbox — so a platform error is logged, never raised."""

from __future__ import annotations

import logging
from typing import Any, Protocol

from vigil.gateway.adapters.streaming import Streamer
from vigil.store.gateway.gateway_tables import RouteKey

log = logging.getLogger(__name__)


class ApprovalMessages(Protocol):
    """An adapter's approval requests: posted, and marked once resolved."""

    async def request(self, route: RouteKey, event: dict[str, Any]) -> None:
        """Post the request of an ``approval_request`` event in ``route``'s place."""
        ...

    async def resolved(self, event: dict[str, Any]) -> None:
        """Say on the request's message how it ended (an ``approval_resolved`` event)."""
        ...


async def hand_on(route: RouteKey, event: dict[str, Any], streamer: Streamer, approvals: ApprovalMessages) -> None:
    """Hand ``event`` to where it goes (see the module docstring); never raises."""
    kind = event.get("type")
    try:
        if kind == "approval_request":
            await approvals.request(route, event)
        elif kind == "approval_resolved":
            await approvals.resolved(event)
        else:
            await streamer.live(route, event)
    except Exception:
        log.exception("%s: live event %s failed", route.adapter, kind)
