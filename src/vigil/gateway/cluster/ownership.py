"""Which gateway runs a conversation, when several share one PostgreSQL store.

Each gateway process (a *worker*) holds a lease on every conversation it runs: the key
``conversation-lease:<session id>`` names the worker, with the same holder token and liveness
record as its heartbeat leases, so the one renewal that keeps those alive keeps these alive too.
A conversation's turns, slash commands and heartbeats run only in the worker holding its lease:

* a message for a conversation another live worker runs is stored in the inbox and left to that
  worker, which hears of it (:mod:`vigil.gateway.cluster.handover`) or finds it at its next sweep;
* a heartbeat that comes due in a worker that does not run its conversation is refunded and
  handed to the one that does (that worker adopts it; see ``adoptable``);
* a worker that dies stops renewing: once its leases lapse (``gateway.lease_seconds``) any other
  worker takes its conversations over, with the messages it left unanswered.

On a store that only one gateway may use (SQLite, which takes the profile's gateway lock) every
conversation is this gateway's, and nothing is read or written.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Iterable

from vigil.clock import Clock
from vigil.schedule.heartbeat.lease import GATEWAY, Lease, LeaseBook
from vigil.store import SessionStore
from vigil.store.gateway.gateway_tables import RouteKey

log = logging.getLogger(__name__)

PREFIX = "conversation-lease:"


def route_claim(route: RouteKey) -> str:
    """The lease a worker holds while it starts a platform conversation's first session, so
    that two workers receiving its first messages at once do not start two."""
    return "route:" + json.dumps([route.adapter, route.chat, route.thread, route.user])


@dataclass(frozen=True, slots=True)
class Elsewhere:
    """A conversation another live worker runs."""

    session_id: str
    worker: str


class Ownership:
    """This worker's conversation leases (all methods block: call them in a worker thread)."""

    def __init__(self, store: SessionStore, clock: Clock, *, token: str, seconds: float, shared: bool) -> None:
        self.shared = shared
        self.book = LeaseBook(store, clock, kind=GATEWAY, seconds=seconds, prefix=PREFIX, token=token)
        self.held: set[str] = set()
        """Conversations whose lease this worker took (and has not released)."""

    def claim(self, session_id: str) -> Lease | None:
        """Take the lease of ``session_id`` unless another live worker holds it. Returns
        ``None`` when the conversation is this worker's now, else the other worker's lease."""
        if not self.shared or session_id in self.held:
            return None
        taken = self.book.take_many([session_id])
        if session_id in taken.taken:
            self.held.add(session_id)
            return None
        return taken.elsewhere.get(session_id)

    def release(self, session_ids: Iterable[str]) -> None:
        """Give up the leases of ``session_ids`` (the conversation closed here)."""
        ids = [sid for sid in session_ids if sid in self.held]
        if not ids:
            return
        self.held.difference_update(ids)
        self.book.release_many(ids)

    def still_held(self) -> set[str]:
        """Renew this worker's leases (one write) and return those taken over meanwhile
        (this worker stalled past its lease and another took the conversation)."""
        if not self.shared or not self.held:
            if self.shared:
                self.book.keep_alive()
            return set()
        # A snapshot: a conversation claimed (in another thread) while the renewal runs is
        # not in it, and must not read as lost.
        renewing = set(self.held)
        ours = self.book.renew(renewing)
        lost = renewing - ours
        self.held -= lost
        return lost

    def elsewhere(self, session_ids: list[str]) -> dict[str, Lease]:
        """The live leases other workers hold among ``session_ids``."""
        if not self.shared:
            return {}
        return {sid: lease for sid, lease in self.book.holders(session_ids).items() if not self.book.mine(lease)}

    def adoptable(self, session_ids: list[str]) -> list[str]:
        """The heartbeats among ``session_ids`` whose conversation runs here or nowhere."""
        busy = self.elsewhere(session_ids)
        return [sid for sid in session_ids if sid not in busy]

    def close(self) -> None:
        """Release every lease and retire the holder record (the worker stops)."""
        held, self.held = list(self.held), set()
        if held:
            self.book.release_many(held)
        if self.shared:
            self.book.retire()
