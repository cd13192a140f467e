"""Which vigil conversation a platform conversation talks to.

The routing table (``store.gateway``) maps a route (adapter, chat, thread, user) to a session.
A route follows compression continuations (and is re-pointed to the newest one); a route whose
conversation was ended by ``/new`` elsewhere or ``/suspend`` starts a new conversation on the next
message. The web chat is different in one way: a page always names the conversation it shows
(its chat id is a session id), so an unknown web route opens that session, and an ended one is
reopened, as ``/resume`` would.
"""

from __future__ import annotations

from dataclasses import dataclass

from vigil.clock import Clock
from vigil.store import SessionNotFound, SessionStore
from vigil.store.errors import AmbiguousSession
from vigil.store.gateway.gateway_tables import RouteKey

WEB = "web"


@dataclass(frozen=True, slots=True)
class Resolved:
    """Where a route leads now: ``session_id`` (``None``: start a new conversation) and
    whether that session is ended and must be reopened first."""

    session_id: str | None
    reopen: bool = False


class Router:
    """Reads and re-points routes; synchronous (call it through a thread)."""

    def __init__(self, store: SessionStore, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    @property
    def tables(self):  # the store's GatewayTables
        return self.store.gateway

    def resolve(self, route: RouteKey) -> Resolved:
        session_id = self.tables.route_get(route)
        if session_id is None and route.adapter == WEB:
            try:
                session_id = self.store.resolve_session(route.chat)
            except (SessionNotFound, AmbiguousSession):
                return Resolved(None)
        if session_id is None:
            return Resolved(None)
        try:
            newest = self.store.newest_continuation(session_id)
            record = self.store.get_session(newest)
        except SessionNotFound:
            self.tables.route_delete(route)
            return Resolved(None)
        if newest != session_id or self.tables.route_get(route) != newest:
            self.tables.route_set(route, newest, now=self.clock.now())
        if record.is_ended:
            if route.adapter == WEB:
                return Resolved(newest, reopen=True)
            return Resolved(None)
        return Resolved(newest)

    def point(self, route: RouteKey, session_id: str) -> None:
        self.tables.route_set(route, session_id, now=self.clock.now())
