"""Several gateways on one shared (PostgreSQL) store: the worker registry as the workers see it.

Each worker keeps its record ``gateway:worker:<worker id>`` fresh (:class:`StatusKeeper` in
:mod:`vigil.gateway.status`, every third of ``gateway.lease_seconds``). From those records:

* :func:`read_workers` is what ``vigil gateway status`` lists: the live workers, and those
  whose record went stale ("gone since ...") or that stopped, until they are pruned;
* :class:`WorkerWatch` runs in every live worker: when another worker's record goes stale
  (or its pid is gone, on this host), or a lease holder's record expires, it runs the
  recovery it is given — refunding the dead process's heartbeat reservations and marking its
  cron runs interrupted (:mod:`vigil.schedule.liveness` now calls it dead) — and it deletes
  records gone for longer than :data:`KEEP_GONE`.

An SQLite store has one gateway per profile (:mod:`vigil.gateway.lock`) and no worker records;
:func:`is_shared` tells the two apart.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping

from vigil import platforms as registry
from vigil.clock import Clock
from vigil.gateway.cluster.adapter_lease import AdapterLease
from vigil.gateway.status import WorkerIdentity, adapter_entry, ago
from vigil.schedule.changes import bump_generation
from vigil.schedule.heartbeat.repo import PROCESS_OWNER
from vigil.schedule.heartbeat.lease import HOLDER_PREFIX, pid_running, this_host
from vigil.schedule.liveness import WORKER_PREFIX, Seen, holder_seen, worker_seen
from vigil.store import MetaEntry, SessionStore, StoreError
from vigil.store.records import MetaSwap

if TYPE_CHECKING:
    from vigil.gateway.parts import WorkersHost
    from vigil.schedule.cron.repo import CronRepo
    from vigil.schedule.cron.scheduler import CronScheduler

log = logging.getLogger(__name__)

KEEP_GONE = 3600.0
"""Seconds a stale or stopped worker's record stays listed before a live worker deletes it.
Longer than a heartbeat reservation takes to go stale (``STALE_AFTER``), so that nothing
still waits on that record to be called dead."""

RUNNING = "running"
STOPPING = "stopping"
GONE = "gone"
STOPPED = "stopped"


def is_shared(store: SessionStore) -> bool:
    """Whether several gateways may share ``store`` (PostgreSQL). An SQLite file is one
    gateway's. Checked without importing the PostgreSQL driver: a store of that class exists
    only once its module is loaded."""
    module = sys.modules.get("vigil.store.postgres.store")
    cls = getattr(module, "PostgresStore", None)
    return isinstance(cls, type) and isinstance(store, cls)


def join_as_worker(gateway: "WorkersHost", adapters: Mapping[str, Any], clock: Clock) -> WorkerIdentity:
    """The running gateway as one of several workers on a shared store: who it is in the
    registry (its id is its heartbeat lease holder token; its leases' length), and the poll
    lease of every adapter whose platform declares a single receiver (it polls in one worker only)."""
    worker = WorkerIdentity(gateway.worker_id, PROCESS_OWNER, gateway.leases.seconds)
    for name, adapter in adapters.items():
        inner = getattr(adapter, "inner", adapter)  # under its supervisor
        platform = registry.get(name)
        if platform is not None and platform.capabilities.single_receiver:
            inner.poll_lease = AdapterLease(gateway.store, name, token=worker.worker_id, seconds=worker.lease,
                                            clock=clock)
    return worker


def recovery(gateway: "WorkersHost", cron_repo: "CronRepo", cron: "CronScheduler", say: Callable[[str], None]) -> "Recover":
    """What a worker does when it finds other processes of the store dead: refund their
    heartbeat reservations and mark their cron runs interrupted (the liveness check now calls
    them dead), release the reply claims of those whose process has exited, then have every
    scheduler re-read the schedule."""

    async def recover(dead: list[str], first: bool, exited: list[str]) -> None:
        refunded = await asyncio.to_thread(gateway.heartbeats.repo.refund_orphans)
        interrupted = await asyncio.to_thread(cron_repo.recover_abandoned)
        # Replies a worker whose process is gone had claimed are sent now, not once the claims
        # lapse; a worker that only went silent (another machine) may still be sending them.
        released = await asyncio.to_thread(gateway.store.gateway.outbox_release, exited) if exited else 0
        if released:
            gateway.outbox.wake()
        if refunded or interrupted:
            await asyncio.to_thread(bump_generation, cron_repo.store)
            await cron.resync()
        if refunded or interrupted or released or not first:
            names = ", ".join(dead[:3]) + (f" and {len(dead) - 3} more" if len(dead) > 3 else "")
            say(f"vigil gateway: {len(dead)} process(es) sharing the store stopped running ({names}): "
                f"{len(refunded)} heartbeat reservation(s) refunded, {len(interrupted)} cron run(s) marked interrupted, "
                f"{released} reply claim(s) released")

    return recover


@dataclass(frozen=True, slots=True)
class WorkerStatus:
    """One worker as ``vigil gateway status`` lists it.

    ``state`` is ``running`` or ``stopping`` while its record is fresh (``live``), ``gone``
    once the record went stale without the worker saying goodbye (SIGKILL, a lost machine),
    or ``stopped`` after a clean stop. ``since``: when it was last seen (gone, stopped).
    """

    worker_id: str
    live: bool
    state: str
    summary: str
    record: dict[str, Any]
    since: float | None = None
    adapters: list[dict[str, Any]] = field(default_factory=list)

    def value(self, key: str) -> Any:
        return self.record.get(key)


def _judge(entry: MetaEntry, now: float) -> tuple[str, Seen, dict[str, Any]] | None:
    """(worker id, the process, the record) of a worker record, ``None`` for a damaged one."""
    seen = worker_seen(entry.value)
    if seen is None:
        return None
    record = dict(entry.value)
    worker_id = record.get("worker_id")
    return (worker_id if isinstance(worker_id, str) and worker_id else entry.key[len(WORKER_PREFIX):]), seen, record


def _live(seen: Seen, now: float) -> bool:
    """Fresh, not stopped, and (on this host) its pid still runs: a SIGKILLed worker here is
    gone at once, one elsewhere once its lease has passed."""
    return seen.alive(now) and (seen.host != this_host() or pid_running(seen.host, seen.pid))


def read_workers(store: SessionStore, *, now: float) -> list[WorkerStatus]:
    """Every worker record of ``store``: the live ones first (oldest first), then the others
    (most recently seen first). Empty on a store no worker has used (SQLite)."""
    live: list[WorkerStatus] = []
    others: list[WorkerStatus] = []
    for entry in store.list_meta(WORKER_PREFIX):
        judged = _judge(entry, now)
        if judged is None:
            continue
        worker_id, seen, record = judged
        adapters = [adapter_entry(a) for a in record.get("adapters") or () if isinstance(a, dict)]
        where = f"pid {seen.pid} on {seen.host}"
        last = record.get("updated_at")
        if _live(seen, now):
            state = str(record.get("state") or RUNNING)
            live.append(WorkerStatus(worker_id, True, state, f"{state} ({where})", record, None, adapters))
        elif seen.stopped:
            others.append(WorkerStatus(worker_id, False, STOPPED, f"stopped at {ago(now, last)} ({where})", record, last))
        else:
            others.append(WorkerStatus(worker_id, False, GONE, f"gone since {ago(now, last)} ({where})", record, last))
    live.sort(key=lambda w: (_float(w.value("started_at")), w.worker_id))
    others.sort(key=lambda w: -(w.since or 0.0))
    return live + others


def _float(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


Recover = Callable[[list[str], bool, list[str]], Awaitable[None]]
"""Called with the names of processes newly found dead (worker ids, lease holder tokens),
whether this is the watch's first look (which also meets records long gone), and those of them
known to have exited (on this host, their pid is gone), not merely silent."""


class WorkerWatch:
    """What one live worker does about the others (see the module docstring). ``worker_id``
    is its own, never judged; ``recover`` runs once per process found dead (one call per
    look, for all found then); store errors are logged and the next look tries again."""

    def __init__(
        self, store: SessionStore, clock: Clock, worker_id: str, recover: Recover, *,
        holder_token: str | None = None, keep_gone: float = KEEP_GONE,
    ) -> None:
        self.store = store
        self.clock = clock
        self.worker_id = worker_id
        self.holder_token = holder_token or worker_id
        self.recover = recover
        self.keep_gone = keep_gone
        self._handled: dict[str, float] = {}
        """Dead processes recovered already, with the expiry their record had then: a record
        renewed after that (the process was only stalled) is judged afresh."""
        self._failing: str | None = None
        self.looks = 0
        self.recoveries = 0

    async def look(self) -> list[str]:
        """Look at the registry once; returns the processes newly found dead."""
        self.looks += 1
        workers, holders = await asyncio.gather(
            asyncio.to_thread(self.store.list_meta, WORKER_PREFIX),
            asyncio.to_thread(self.store.list_meta, HOLDER_PREFIX),
        )
        now = self.clock.now()
        dead: dict[str, float] = {}
        exited: set[str] = set()
        prune: list[MetaEntry] = []
        for entry in workers:
            judged = _judge(entry, now)
            if judged is None or judged[0] == self.worker_id:
                continue
            worker_id, seen, _record = judged
            if _live(seen, now):
                continue
            if not seen.stopped:
                dead[worker_id] = seen.expires_at
                if seen.host == this_host() and not pid_running(seen.host, seen.pid):
                    exited.add(worker_id)
            last = _float(entry.value.get("updated_at"))
            if now - max(last, seen.expires_at) > self.keep_gone:
                prune.append(entry)
        for entry in holders:
            token = entry.key[len(HOLDER_PREFIX):]
            seen = holder_seen(entry.value)
            if token == self.holder_token or seen is None or _live(seen, now):
                continue
            dead[token] = seen.expires_at
        new = [name for name, expires in dead.items() if self._handled.get(name) != expires]
        if new:
            self.recoveries += 1
            await self.recover(new, self.looks == 1, [name for name in new if name in exited])
            self._handled.update((name, dead[name]) for name in new)
        for name in [name for name in self._handled if name not in dead]:
            del self._handled[name]  # pruned, swept, or alive again
        if prune:
            swaps = [MetaSwap(entry.key, entry.value, None) for entry in prune]
            await asyncio.to_thread(self.store.compare_and_set_many, swaps)
        return new

    async def run(self, interval: float) -> None:
        """:meth:`look` every ``interval`` seconds until cancelled; never fails."""
        if not interval > 0:
            raise ValueError("the watch interval must be positive")
        while True:
            try:
                await self.look()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a loop that must outlive any one failure
                reason = str(exc) or type(exc).__name__
                if reason != self._failing:
                    level = logging.WARNING if isinstance(exc, StoreError) else logging.ERROR
                    log.log(level, "gateway workers: cannot look at the other workers (will retry): %s", reason,
                            exc_info=not isinstance(exc, StoreError))
                self._failing = reason
            else:
                self._failing = None
            await self.clock.sleep(interval)
