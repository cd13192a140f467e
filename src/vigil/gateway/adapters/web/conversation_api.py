"""The web chat's routes beyond the core API: stopping the running turn and searching message
text with snippets. Behind :func:`guarded` like the rest.

* ``POST /api/conversations/{id}/stop`` ends the turn running now (the conversation, its queue
  and its heartbeat stay; ``/stop`` instead suspends the conversation): ``{"stopped": bool}``.
* ``GET /api/search?q=`` the messages matching ``q``, best first, at most one per conversation:
  ``{"results": [{id, snippet, role, created_at}]}``, the snippet's matches between « and ».
"""

from __future__ import annotations

import asyncio
from typing import Any, Mapping, Protocol

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from vigil.gateway.adapters.base import GatewayClosed, GatewayPort
from vigil.gateway.adapters.web.state import Endpoint, WebState, error, guarded
from vigil.store import AmbiguousSession, SessionNotFound, SessionStore

MAX_QUERY = 500
SEARCH_HITS = 200
"""Message matches looked at; the list shows the best one of each conversation."""


class _Runs(Protocol):
    """A running conversation as the gateway keeps it (``LiveConversation``)."""

    @property
    def conversation(self) -> Any: ...


def _live_conversations(gateway: GatewayPort) -> Mapping[str, _Runs]:
    """The gateway's live conversations by session id. The port has no way to interrupt a
    turn yet, so this reads the core's map; with several workers only this worker's are here
    (a page served by another worker gets ``stopped: false``)."""
    live = getattr(gateway, "live", None)
    return live if isinstance(live, Mapping) else {}


def stop_turn(gateway: GatewayPort, session_id: str) -> bool:
    """Interrupt the turn ``session_id`` runs now; whether one was running here."""
    live = _live_conversations(gateway).get(session_id)
    return bool(live is not None and live.conversation.interrupt())


def best_hits(store: SessionStore, query: str) -> list[dict[str, Any]]:
    """The best-ranked match of each conversation, keyed by its newest session (the id the
    conversation list uses)."""
    results: list[dict[str, Any]] = []
    seen: set[str] = set()
    newest: dict[str, str] = {}
    for hit in store.search(query, limit=SEARCH_HITS):
        if hit.session_id not in newest:
            newest[hit.session_id] = store.newest_continuation(hit.session_id)
        conversation = newest[hit.session_id]
        if conversation in seen:
            continue
        seen.add(conversation)
        results.append({"id": conversation, "snippet": hit.snippet, "role": hit.role, "created_at": hit.created_at})
    return results


class ConversationExtras:
    def __init__(self, state: WebState) -> None:
        self.state = state

    @property
    def gateway(self) -> GatewayPort:
        if self.state.gateway is None:
            raise GatewayClosed("the gateway is stopping")
        return self.state.gateway

    async def stop(self, request: Request) -> Response:
        view = await self.gateway.conversation(request.path_params["id"])
        return JSONResponse({"stopped": stop_turn(self.gateway, str(view["id"]))})

    async def search(self, request: Request) -> Response:
        query = request.query_params.get("q", "").strip()[:MAX_QUERY]
        if not query:
            return JSONResponse({"results": []})
        return JSONResponse({"results": await asyncio.to_thread(best_hits, self.gateway.store, query)})


def _answering_errors(endpoint: Endpoint) -> Endpoint:
    async def answered(request: Request) -> Response:
        try:
            return await endpoint(request)
        except SessionNotFound as exc:
            return error(404, str(exc))
        except AmbiguousSession as exc:
            return error(400, str(exc))
        except GatewayClosed:
            return error(503, "the gateway is shutting down")

    return answered


def conversation_routes(state: WebState) -> list[Route]:
    extras = ConversationExtras(state)

    def route(path: str, endpoint: Endpoint, method: str) -> Route:
        return Route(path, guarded(state, _answering_errors(endpoint)), methods=[method])

    return [
        route("/api/conversations/{id}/stop", extras.stop, "POST"),
        route("/api/search", extras.search, "GET"),
    ]
