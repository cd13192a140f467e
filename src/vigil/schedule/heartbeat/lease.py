"""Heartbeat ownership leases: which process *tries* to fire a conversation's heartbeat.

A heartbeat fires in exactly one process: the REPL that has its conversation open, otherwise
the running gateway. Each process records that in the session store as a lease:

* ``heartbeat-lease:<session_id>`` names the holder: kind (``repl`` or ``gateway``), pid,
  host, the holder's token, when it was taken and until when it runs on its own;
* ``heartbeat-lease-holder:<token>`` is the holder's liveness record, whose ``expires_at`` the
  holder pushes forward every :attr:`LeaseBook.renew_every` seconds.

A lease is live while either expiry is ahead (and, on this host, while its pid runs). Renewal
writes the one holder record, not every lease: a gateway holding 100,000 leases renews them
all with one small write, where rewriting every lease would cost seconds of CPU every tick.

Every lease change is a compare-and-set, so two processes never both *take* a lease; a
process that was stalled may still briefly believe it holds one, which is harmless: the
claim on the heartbeat record (see :mod:`vigil.schedule.heartbeat.repo`) decides who fires a
slot. Taking a lease away from another holder and releasing one bump the schedule generation,
so the other processes notice at their next poll. An expired lease is the same as none.

All methods are synchronous (the store is); async callers run them in a worker thread.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from vigil.clock import Clock, SystemClock
from vigil.schedule.changes import bump_generation
from vigil.schedule.liveness import HOLDER_PREFIX, Liveness
from vigil.schedule.polling import poll_override
from vigil.schedule.processes import pid_running, this_host
from vigil.store import MetaEntry, SessionStore
from vigil.store.records import MetaSwap

LEASE_PREFIX = "heartbeat-lease:"
REPL = "repl"
GATEWAY = "gateway"
KINDS = (REPL, GATEWAY)

LEASE_SECONDS = 30.0
"""How long a lease outlives its holder's last renewal; renewed every third of that."""

_ATTEMPTS = 20


def lease_key(session_id: str) -> str:
    return LEASE_PREFIX + session_id


def holder_key(token: str) -> str:
    return HOLDER_PREFIX + token


def default_lease_seconds() -> float:
    """:data:`LEASE_SECONDS`, or three test poll intervals when the test-only poll variable
    is set (so a test sees a dead owner's lease lapse in seconds)."""
    poll = poll_override()
    return LEASE_SECONDS if poll is None else min(LEASE_SECONDS, max(1.0, 3 * poll))


@dataclass(frozen=True, slots=True)
class Lease:
    """One live lease as read from the store; ``expires_at`` is the later of the lease's own
    expiry and its holder's last renewal."""

    session_id: str
    kind: str
    pid: int
    host: str
    token: str
    taken_at: float
    expires_at: float

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "pid": self.pid, "host": self.host, "token": self.token,
            "taken_at": self.taken_at, "expires_at": self.expires_at,
        }

    @staticmethod
    def from_json(session_id: str, value: Any) -> Lease | None:
        """The lease in a stored value, ``None`` if it is not one (damaged: treated as free)."""
        if not isinstance(value, dict):
            return None
        try:
            kind, pid, host, token = value["kind"], value["pid"], value["host"], value["token"]
            taken_at, expires_at = float(value["taken_at"]), float(value["expires_at"])
        except (KeyError, TypeError, ValueError):
            return None
        if kind not in KINDS or not isinstance(pid, int) or not isinstance(host, str) or not isinstance(token, str):
            return None
        return Lease(session_id, kind, pid, host, token, taken_at, expires_at)


@dataclass(frozen=True, slots=True)
class Taken:
    """What :meth:`LeaseBook.take_many` did: the sessions whose lease is now ours, and the live
    leases of other holders that it left alone."""

    taken: set[str] = field(default_factory=set)
    elsewhere: dict[str, Lease] = field(default_factory=dict)


class LeaseBook:
    """The leases of one holder (one process, in practice) in one profile's store.

    ``kind`` is :data:`REPL` (takes a lease over from anyone: the conversation is open here)
    or :data:`GATEWAY` (takes only free, expired or already-own leases). ``is_running(host,
    pid)`` says whether a holder runs (default: by pid on this host, by the store's worker and
    holder records elsewhere, :mod:`vigil.schedule.liveness`).
    """

    def __init__(
        self,
        store: SessionStore,
        clock: Clock | None = None,
        *,
        kind: str,
        seconds: float | None = None,
        is_running: Callable[[str, int], bool] | None = None,
        prefix: str = LEASE_PREFIX,
        token: str | None = None,
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"a lease holder is one of {', '.join(KINDS)}, not {kind!r}")
        self.store = store
        self.clock = clock or SystemClock()
        if is_running is None:
            is_running = Liveness(store, self.clock).process_alive
        self.kind = kind
        self.seconds = default_lease_seconds() if seconds is None else float(seconds)
        self.renew_every = self.seconds / 3
        self.token = token or secrets.token_hex(8)
        """The holder's id; two books with one token (a gateway's heartbeat and conversation
        leases) share its liveness record, so one renewal keeps both alive."""
        self.prefix = prefix
        """Lease keys are ``prefix + session_id``; only heartbeat leases bump the schedule
        generation when they change hands (the schedulers watch those)."""
        self._bumps = prefix == LEASE_PREFIX
        self.pid = os.getpid()
        self.host = this_host()
        self._is_running = is_running
        self._alive_until = 0.0  # our holder record's expiry as last written

    @property
    def forceful(self) -> bool:
        """Whether this holder takes leases over from live holders (a REPL does)."""
        return self.kind == REPL

    # -- reading --------------------------------------------------------------------------------
    def holder(self, session_id: str) -> Lease | None:
        """The live lease of ``session_id``, or ``None`` (free, expired or damaged)."""
        return self.holders([session_id]).get(session_id)

    def holders(self, session_ids: Iterable[str]) -> dict[str, Lease]:
        """The live leases of ``session_ids`` (absent: free), read in two snapshots."""
        return live_leases(self.store, session_ids, self.clock.now(), self._is_running, self.prefix)

    def mine(self, lease: Lease | None) -> bool:
        return lease is not None and lease.token == self.token

    # -- changing -------------------------------------------------------------------------------
    def take(self, session_id: str, *, force: bool = False) -> bool:
        """Take the lease of ``session_id``: always with ``force`` (a REPL opening the
        conversation), otherwise only when it is free, expired or ours. Returns whether it is
        ours now. Taking it from another holder bumps the schedule generation."""
        return session_id in self.take_many([session_id], force=force).taken

    def take_many(self, session_ids: Iterable[str], *, force: bool = False) -> Taken:
        """:meth:`take` for many sessions in one commit (a gateway adopting heartbeats)."""
        wanted = list(dict.fromkeys(session_ids))
        result = Taken()
        for _ in range(_ATTEMPTS):
            if not wanted:
                break
            self._stay_alive()
            entries = self._read(wanted)
            swaps: list[MetaSwap] = []
            replaced = False
            for sid in wanted:
                raw, lease = entries.get(sid, (None, None))
                if self.mine(lease):
                    result.taken.add(sid)
                elif lease is not None and not force:
                    result.elsewhere[sid] = lease
                else:
                    swaps.append(MetaSwap(self.prefix + sid, raw, self._new_lease(sid).to_json()))
                    replaced = replaced or raw is not None
            if not swaps:
                break
            done = self.store.compare_and_set_many(swaps)
            if replaced and any(done) and self._bumps:
                bump_generation(self.store)
            cut = len(self.prefix)
            won = {swap.key[cut:] for swap, ok in zip(swaps, done) if ok}
            result.taken.update(won)
            wanted = [swap.key[cut:] for swap, ok in zip(swaps, done) if not ok]
        return result

    def renew(self, session_ids: Iterable[str]) -> set[str]:
        """Keep every lease of this holder alive (one write) and return those of
        ``session_ids`` that are still ours: any other was taken over meanwhile."""
        ids = list(session_ids)
        if not ids:
            return set()
        self.keep_alive()
        entries = self._read(ids)
        return {sid for sid, (_, lease) in entries.items() if self.mine(lease)}

    def keep_alive(self) -> None:
        """Push this holder's expiry forward: every lease it holds lives on (one write)."""
        now = self.clock.now()
        self._alive_until = now + self.seconds
        record = {"kind": self.kind, "pid": self.pid, "host": self.host, "expires_at": self._alive_until}
        self.store.set_meta(holder_key(self.token), record)

    def release(self, session_id: str) -> bool:
        """Give up the lease of ``session_id`` if it is ours; returns whether it was."""
        return bool(self.release_many([session_id]))

    def release_many(self, session_ids: Iterable[str]) -> set[str]:
        """Give up those of ``session_ids`` that are ours, in one commit, and bump the schedule
        generation so that the other processes notice at once. Returns those released."""
        ids = list(dict.fromkeys(session_ids))
        if not ids:
            return set()
        raw = self.store.get_meta_many([self.prefix + sid for sid in ids])
        swaps = [
            MetaSwap(key, entry.value, None)
            for key, entry in raw.items()
            if isinstance(entry.value, dict) and entry.value.get("token") == self.token
        ]
        if not swaps:
            return set()
        done = self.store.compare_and_set_many(swaps)
        released = {swap.key[len(self.prefix):] for swap, ok in zip(swaps, done) if ok}
        if released and self._bumps:
            bump_generation(self.store)
        return released

    def retire(self) -> None:
        """Delete this holder's liveness record (at exit, after releasing its leases)."""
        self.store.delete_meta(holder_key(self.token))
        self._alive_until = 0.0

    def sweep(self) -> int:
        """Delete expired leases and holder records left by processes that died (an expired
        lease is the same as none, so this changes nobody's rights). Returns how many."""
        now = self.clock.now()
        holders = {e.key[len(HOLDER_PREFIX):]: e for e in self.store.list_meta(HOLDER_PREFIX)}
        swaps = [
            MetaSwap(entry.key, entry.value, None)
            for entry in self.store.list_meta(self.prefix)
            if self._live(entry.key[len(self.prefix):], entry.value, holders, now) is None
        ]
        swaps += [
            MetaSwap(entry.key, entry.value, None)
            for token, entry in holders.items()
            if token != self.token and not _holder_fresh(entry, now)
        ]
        if not swaps:
            return 0
        return sum(self.store.compare_and_set_many(swaps))

    # -- internals ------------------------------------------------------------------------------
    def _new_lease(self, session_id: str) -> Lease:
        now = self.clock.now()
        return Lease(session_id, self.kind, self.pid, self.host, self.token, now, now + self.seconds)

    def _stay_alive(self) -> None:
        """Write the holder record before taking, unless it is fresh enough already."""
        if self._alive_until - self.clock.now() < self.seconds - self.renew_every:
            self.keep_alive()

    def _read(self, session_ids: Iterable[str]) -> dict[str, tuple[Any, Lease | None]]:
        return read_leases(self.store, session_ids, self.clock.now(), self._is_running, self.prefix)

    def _live(self, session_id: str, value: Any, holders: dict[str, MetaEntry], now: float) -> Lease | None:
        return _live(session_id, value, holders, now, self._is_running)


def live_leases(
    store: SessionStore, session_ids: Iterable[str], now: float,
    is_running: Callable[[str, int], bool] = pid_running, prefix: str = LEASE_PREFIX,
) -> dict[str, Lease]:
    """The live leases of ``session_ids`` at ``now`` (absent: nobody holds it), for readers
    such as ``vigil heartbeat list`` that hold none themselves."""
    entries = read_leases(store, session_ids, now, is_running, prefix)
    return {sid: lease for sid, (_, lease) in entries.items() if lease is not None}


def read_leases(
    store: SessionStore, session_ids: Iterable[str], now: float, is_running: Callable[[str, int], bool],
    prefix: str = LEASE_PREFIX,
) -> dict[str, tuple[Any, Lease | None]]:
    """Each session's stored lease value (absent sessions are left out) and the live lease
    in it (``None``: expired, dead or damaged), read in two snapshots."""
    keys = {prefix + sid: sid for sid in session_ids}
    raw = store.get_meta_many(list(keys))
    tokens = {e.value.get("token") for e in raw.values() if isinstance(e.value, dict)}
    holders = store.get_meta_many([holder_key(t) for t in tokens if isinstance(t, str) and t])
    by_token = {key[len(HOLDER_PREFIX):]: entry for key, entry in holders.items()}
    out: dict[str, tuple[Any, Lease | None]] = {}
    for key, sid in keys.items():
        entry = raw.get(key)
        if entry is not None:
            out[sid] = (entry.value, _live(sid, entry.value, by_token, now, is_running))
    return out


def _live(
    session_id: str, value: Any, holders: dict[str, MetaEntry], now: float,
    is_running: Callable[[str, int], bool],
) -> Lease | None:
    lease = Lease.from_json(session_id, value)
    if lease is None:
        return None
    expires = lease.expires_at
    holder = holders.get(lease.token)
    if holder is not None and _holder_fresh(holder, now):
        expires = max(expires, float(holder.value["expires_at"]))
    if expires <= now or not is_running(lease.host, lease.pid):
        return None
    return Lease(session_id, lease.kind, lease.pid, lease.host, lease.token, lease.taken_at, expires)


def _holder_fresh(entry: MetaEntry, now: float) -> bool:
    value = entry.value
    if not isinstance(value, dict):
        return False
    try:
        return float(value["expires_at"]) > now
    except (KeyError, TypeError, ValueError):
        return False
