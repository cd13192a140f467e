"""Whether a process that shares the store still runs: one answer for heartbeat reservations,
heartbeat leases and cron runs.

Every process that claims work in the store names itself: a heartbeat reservation or a cron
run by its owner ``host:pid:token``, a lease by its host and pid. On this host the pid decides
(as it always did). A process on another host is judged by the records it keeps fresh in the
store:

* a gateway's worker record, ``gateway:worker:<worker id>`` (:func:`worker_key`), rewritten
  every third of its lease (``updated_at``, ``lease``; ``state: stopped`` once it stopped);
* every lease holder's record, ``heartbeat-lease-holder:<token>`` (``expires_at``).

A process with a fresh record runs; one whose records have all expired (or whose worker record
says it stopped) is dead, so the others refund its reservations and close its runs at once
instead of waiting for them to go stale. A process with no record at all (a command-line
tool, an older version) is presumed to run until its claim is stale, as before.

All methods are synchronous (the store is); async callers run them in a worker thread.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Iterable

from vigil.clock import Clock, SystemClock
from vigil.schedule.processes import owner_alive as owner_alive_here
from vigil.schedule.processes import pid_running, this_host
from vigil.store import MetaEntry, SessionStore

WORKER_PREFIX = "gateway:worker:"
"""The key prefix of the gateway workers' records (see :mod:`vigil.gateway.status`)."""
HOLDER_PREFIX = "heartbeat-lease-holder:"
"""The key prefix of the lease holders' records (written by
:class:`vigil.schedule.heartbeat.lease.LeaseBook`)."""

SNAPSHOT_SECONDS = 1.0
"""How long (real time) one read of the records answers for: a sweep over thousands of
reservations or leases reads them once, not once each."""


def worker_key(worker_id: str) -> str:
    """The key of a worker's record."""
    return WORKER_PREFIX + worker_id


@dataclass(frozen=True, slots=True)
class Seen:
    """One process as a record in the store shows it."""

    host: str
    pid: int
    owner: str | None
    """``host:pid:token`` when the record names it (worker records), else ``None``."""
    expires_at: float
    stopped: bool = False

    def alive(self, now: float) -> bool:
        return not self.stopped and self.expires_at > now


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def worker_seen(value: Any) -> Seen | None:
    """The process behind a worker record, or ``None`` when it is not one (damaged)."""
    if not isinstance(value, dict):
        return None
    host, pid = value.get("host"), value.get("pid")
    updated, lease = _number(value.get("updated_at")), _number(value.get("lease"))
    if not isinstance(host, str) or not isinstance(pid, int) or isinstance(pid, bool) or updated is None:
        return None
    owner = value.get("owner") if isinstance(value.get("owner"), str) else None
    return Seen(host, pid, owner, updated + (lease or 0.0), value.get("state") == "stopped")


def holder_seen(value: Any) -> Seen | None:
    """The process behind a lease holder record, or ``None`` when it is not one."""
    if not isinstance(value, dict):
        return None
    host, pid, expires = value.get("host"), value.get("pid"), _number(value.get("expires_at"))
    if not isinstance(host, str) or not isinstance(pid, int) or isinstance(pid, bool) or expires is None:
        return None
    return Seen(host, pid, None, expires)


def verdict(seen: Iterable[Seen], host: str, pid: int, owner: str | None, now: float) -> bool | None:
    """Whether the process ``host``/``pid`` (``owner``, when known) runs by the records
    ``seen``: ``True`` when one of its records is fresh, ``False`` when it has records and all
    are expired or stopped, ``None`` when it has none. A record naming ``owner`` itself
    outweighs those that name only the host and pid (a pid reused after a restart, as pid 1
    in a container is, must not keep a dead predecessor alive)."""
    same = [s for s in seen if s.host == host and s.pid == pid]
    named = [s for s in same if owner is not None and s.owner == owner]
    mine = named or [s for s in same if owner is None or s.owner is None]
    if not mine:
        return None
    return any(s.alive(now) for s in mine)


class Liveness:
    """Answers "does this process still run?" from this host's pids and the store's records
    (see the module docstring). ``snapshot_seconds``: how long one read of the records is
    used (0: read them at every question)."""

    def __init__(self, store: SessionStore, clock: Clock | None = None, *, snapshot_seconds: float = SNAPSHOT_SECONDS) -> None:
        self.store = store
        self.clock = clock or SystemClock()
        self.snapshot_seconds = snapshot_seconds
        self._seen: list[Seen] | None = None
        self._read_at = 0.0

    def owner_alive(self, owner: str) -> bool:
        """Whether the owner ``host:pid:token`` of a reservation or a run may still run."""
        host, _, rest = owner.partition(":")
        pid_text, _, _token = rest.partition(":")
        if host == this_host():
            return owner_alive_here(owner)
        try:
            pid = int(pid_text)
        except ValueError:
            return True  # not a name this version writes: judged by its claim's age alone
        found = verdict(self.seen(), host, pid, owner, self.clock.now())
        return True if found is None else found

    def process_alive(self, host: str, pid: int) -> bool:
        """Whether the process ``pid`` on ``host`` may still run (a lease's holder)."""
        if host == this_host():
            return pid_running(host, pid)
        found = verdict(self.seen(), host, pid, None, self.clock.now())
        return True if found is None else found

    def seen(self) -> list[Seen]:
        """Every process the store's records show (read again once the snapshot is old)."""
        if self._seen is None or time.monotonic() - self._read_at >= self.snapshot_seconds:
            self._seen = read_seen(self.store)
            self._read_at = time.monotonic()
        return self._seen

    def forget(self) -> None:
        """Read the records again at the next question."""
        self._seen = None


def read_seen(store: SessionStore) -> list[Seen]:
    """The processes behind every worker record and lease holder record in ``store``."""
    found: list[Seen] = []
    entries: list[tuple[MetaEntry, Any]] = [(e, worker_seen) for e in store.list_meta(WORKER_PREFIX)]
    entries += [(e, holder_seen) for e in store.list_meta(HOLDER_PREFIX)]
    for entry, parse in entries:
        seen = parse(entry.value)
        if seen is not None:
            found.append(seen)
    return found
