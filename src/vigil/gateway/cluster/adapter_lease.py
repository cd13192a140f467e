"""Which worker runs a platform's receiving loop that must run once (a single receiver, such as
a long poll: see ``Capabilities.single_receiver`` in :mod:`vigil.platforms.spec`).

Several gateways on one shared store each start every adapter, so that any of them can send
(the outbox of every worker delivers) and take webhooks. A receiving loop that fetches from
the platform may run in only one of them: the worker holding the adapter's lease,
``state_meta['adapter-lease:<adapter>']`` = ``{token, host, pid, taken_at, expires_at}``.

The holder's token is the worker's id (its heartbeat lease holder token); the lease lasts
``gateway.lease_seconds`` and is renewed every third of that. Taking is a compare-and-set, so
two workers never both take it; a lease whose expiry has passed, or whose holder is dead
(:class:`vigil.schedule.liveness.Liveness`: its pid on this host, its records elsewhere), is
free. A worker stopping releases it, so another takes over at its next try rather than when
it expires.

All methods are synchronous (the store is); async callers run them in a worker thread.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from vigil.clock import Clock, SystemClock
from vigil.schedule.heartbeat.lease import this_host
from vigil.schedule.liveness import Liveness
from vigil.store import SessionStore

LEASE_PREFIX = "adapter-lease:"
_ATTEMPTS = 10


def adapter_lease_key(adapter: str) -> str:
    return LEASE_PREFIX + adapter


@dataclass(frozen=True, slots=True)
class Holder:
    """The worker holding an adapter's lease, as stored."""

    token: str
    host: str
    pid: int
    taken_at: float
    expires_at: float

    def to_json(self) -> dict[str, Any]:
        return {"token": self.token, "host": self.host, "pid": self.pid,
                "taken_at": self.taken_at, "expires_at": self.expires_at}

    @staticmethod
    def from_json(value: Any) -> Holder | None:
        """The holder in a stored value; ``None`` if it is not one (damaged: free)."""
        if not isinstance(value, dict):
            return None
        try:
            token, host, pid = value["token"], value["host"], value["pid"]
            taken_at, expires_at = float(value["taken_at"]), float(value["expires_at"])
        except (KeyError, TypeError, ValueError):
            return None
        if not isinstance(token, str) or not isinstance(host, str) or not isinstance(pid, int):
            return None
        return Holder(token, host, pid, taken_at, expires_at)


class AdapterLease:
    """One worker's side of the lease of one adapter (see the module docstring)."""

    def __init__(
        self, store: SessionStore, adapter: str, *, token: str, seconds: float,
        clock: Clock | None = None, liveness: Liveness | None = None,
    ) -> None:
        if not seconds > 0:
            raise ValueError("a lease lasts a positive number of seconds")
        self.store = store
        self.adapter = adapter
        self.key = adapter_lease_key(adapter)
        self.token = token
        self.seconds = float(seconds)
        self.renew_every = self.seconds / 3
        self.clock = clock or SystemClock()
        self.liveness = liveness or Liveness(store, self.clock)
        self.held_until = 0.0
        """Our lease's expiry as last written (0: not held)."""
        self.other: Holder | None = None
        """The other worker found holding it at the last :meth:`take` that failed."""

    def take(self) -> bool:
        """Take the lease, or renew it when it is ours; returns whether it is ours now. A live
        holder elsewhere keeps it (then :attr:`other` names it)."""
        for _ in range(_ATTEMPTS):
            entry = self.store.get_meta(self.key)
            raw = None if entry is None else entry.value
            now = self.clock.now()
            current = Holder.from_json(raw)
            if current is not None and current.token != self.token and self._live(current, now):
                self.other, self.held_until = current, 0.0
                return False
            taken_at = current.taken_at if current is not None and current.token == self.token else now
            mine = Holder(self.token, this_host(), os.getpid(), taken_at, now + self.seconds)
            if self.store.compare_and_set_meta(self.key, raw, mine.to_json()):
                self.other, self.held_until = None, mine.expires_at
                return True
        return False

    def holds(self) -> bool:
        """Whether our lease, as last written, has not expired yet (no store call)."""
        return self.held_until > self.clock.now()

    def release(self) -> bool:
        """Give the lease up if it is ours (a stopping worker); returns whether it was."""
        self.held_until = 0.0
        entry = self.store.get_meta(self.key)
        current = None if entry is None else Holder.from_json(entry.value)
        if entry is None or current is None or current.token != self.token:
            return False
        return self.store.compare_and_set_meta(self.key, entry.value, None)

    def holder(self) -> Holder | None:
        """The live holder of the lease (ours or another worker's), or ``None``."""
        entry = self.store.get_meta(self.key)
        current = None if entry is None else Holder.from_json(entry.value)
        if current is None or not self._live(current, self.clock.now()):
            return None
        return current

    def _live(self, holder: Holder, now: float) -> bool:
        return holder.expires_at > now and self.liveness.process_alive(holder.host, holder.pid)
