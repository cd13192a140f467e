"""The web chat's routes beyond the core API: stopping the running turn, the messages waiting
behind it, renaming, archiving and deleting a conversation, and searching message text with
snippets. Behind :func:`guarded` like the rest; errors are JSON (``{"error": ...}``) and a
refused request changes nothing.

* ``POST /api/conversations/{id}/stop`` ends the turn running now (the conversation, its queue
  and its heartbeat stay, as with ``/stop``; ``/suspend`` puts the conversation aside):
  ``{"stopped": bool}``.
* ``GET /api/conversations/{id}/queue``: the messages waiting behind the running turn, as
  ``/queue`` lists them: ``{"waiting": [{position, text, inbox_id}]}`` (the ``queue`` event
  says the same whenever it changes).
* ``DELETE /api/conversations/{id}/queue/{inbox_id}`` withdraws that waiting message as
  ``/queue drop N`` does (recorded as withdrawn, never answered): ``{position, text,
  inbox_id, reply}``; 404 when it does not wait (its answer has begun, or it went).
* ``PATCH /api/conversations/{id}`` with ``{"title": TEXT}`` and/or ``{"archived": BOOL}``:
  the conversation's summary as the list shows it (400 for anything else in the body).
* ``DELETE /api/conversations/{id}`` deletes it for good, every session and message of it:
  ``{"id", "title", "sessions", "messages"}`` (409 when its stopped turn is still finishing).
* ``GET /api/search?q=`` the messages matching ``q``, best first, at most one per conversation:
  ``{"results": [{id, snippet, role, created_at}]}``, the snippet's matches between « and ».
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from vigil.gateway.adapters.base import ConversationBusy, GatewayClosed, GatewayPort
from vigil.gateway.adapters.web.api import BadRequest, json_body
from vigil.gateway.adapters.web.state import Endpoint, WebState, error, guarded
from vigil.store import AmbiguousSession, SessionNotFound, SessionStore

MAX_QUERY = 500
CHANGEABLE = frozenset({"title", "archived"})
SEARCH_HITS = 200
"""Message matches looked at; the list shows the best one of each conversation."""


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
        return JSONResponse({"stopped": self.gateway.interrupt(str(view["id"]))})

    async def waiting(self, request: Request) -> Response:
        view = await self.gateway.conversation(request.path_params["id"])
        return JSONResponse({"waiting": self.gateway.waiting(str(view["id"]))})

    async def withdraw(self, request: Request) -> Response:
        word = request.path_params["inbox_id"]
        if not word.isdigit() or len(word) > 18:
            return error(400, "the message id must be a whole number (a waiting message's inbox_id)")
        view = await self.gateway.conversation(request.path_params["id"])
        withdrawn = self.gateway.withdraw(str(view["id"]), int(word))
        if withdrawn is None:
            return error(404, f"message {word} does not wait in this conversation (its answer has begun, or it was withdrawn)")
        return JSONResponse(withdrawn)

    async def change(self, request: Request) -> Response:
        body = await json_body(request)
        unknown = sorted(set(body) - CHANGEABLE)
        if unknown:
            return error(400, f"unknown field {unknown[0]!r}: a conversation's 'title' and 'archived' can be changed")
        if not body:
            return error(400, "nothing to change: give 'title' (text) and/or 'archived' (true or false)")
        title, archived = body.get("title"), body.get("archived")
        if "title" in body and not isinstance(title, str):
            return error(400, "'title' must be text")
        if "archived" in body and not isinstance(archived, bool):
            return error(400, "'archived' must be true or false")
        ref = request.path_params["id"]
        summary = await self.gateway.conversation(ref)  # 404 before anything is written
        ref = str(summary["id"])
        if isinstance(title, str):
            try:  # first: a title it refuses leaves everything as it was
                summary = await self.gateway.rename_conversation(ref, title)
            except ValueError as exc:
                return error(400, str(exc))
        if isinstance(archived, bool):
            summary = await self.gateway.archive_conversation(ref, archived)
        return JSONResponse(summary)

    async def delete(self, request: Request) -> Response:
        gone = await self.gateway.delete_conversation(request.path_params["id"])
        self.state.forget_routes({str(gone["id"])})
        return JSONResponse(gone)

    async def search(self, request: Request) -> Response:
        query = request.query_params.get("q", "").strip()[:MAX_QUERY]
        if not query:
            return JSONResponse({"results": []})
        return JSONResponse({"results": await asyncio.to_thread(best_hits, self.gateway.store, query)})


def _answering_errors(endpoint: Endpoint) -> Endpoint:
    async def answered(request: Request) -> Response:
        try:
            return await endpoint(request)
        except BadRequest as exc:
            return error(exc.status, str(exc))
        except ConversationBusy as exc:
            return error(409, str(exc))
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
        route("/api/conversations/{id}/queue", extras.waiting, "GET"),
        route("/api/conversations/{id}/queue/{inbox_id}", extras.withdraw, "DELETE"),
        route("/api/conversations/{id}", extras.change, "PATCH"),
        route("/api/conversations/{id}", extras.delete, "DELETE"),
        route("/api/search", extras.search, "GET"),
    ]
