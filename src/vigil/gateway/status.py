"""The gateway's status record in the store, and what ``vigil gateway status`` makes of it.

A running gateway rewrites its record every few seconds (:class:`StatusKeeper`). On an SQLite
store, where one gateway runs per profile, that is ``state_meta['gateway:status']``; a reader
(:func:`read_status`) believes it only together with the profile's gateway lock: the gateway
runs when some process holds the lock *and* the record is fresh and written by that process.
A record whose writer is gone reads as "not running (last seen ...)", however it was left.

On a shared (PostgreSQL) store every gateway is a *worker* with a record of its own,
``gateway:worker:<worker id>``, rewritten every third of its lease; that record is the
worker registry too (:mod:`vigil.gateway.cluster.workers` reads and prunes it,
:mod:`vigil.schedule.liveness` judges from it whether a process on another host runs). It
has the fields below and ``worker_id``, ``owner`` (the process's ``host:pid:token``) and
``lease`` (seconds after ``updated_at`` that it counts as fresh).

The record (a JSON object)::

    pid, host, started_at, updated_at, interval, url,
    adapters: [{name, ok, detail, state, since, last_error}],
    live_conversations, armed_heartbeats, next_cron_run, version, state,
    waiting: [{inbox_id, session_id, reason, detail, since, retry_at}], waiting_count

``url`` is the web chat's base URL without the login token (``None`` without a web server);
``next_cron_run`` is epoch seconds or ``None``; ``state`` is ``running``, ``stopping`` or
``stopped``. An adapter's ``state`` is ``connected``, ``retrying`` (since ``since``, epoch
seconds), ``misconfigured`` or ``stopped`` (:mod:`vigil.gateway.supervisor`); ``last_error`` is
the text of its last failure or ``None``. ``waiting`` lists (some of) the messages whose turns
wait to be tried again (``reason``: ``transient`` — the model or the store cannot be used now —,
``no_model`` or ``internal``; ``retry_at``: epoch seconds of the next try); ``waiting_count``
counts them all.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Literal

from vigil import __version__
from vigil.clock import Clock
from vigil.gateway.lock import LockHolder, holder
from vigil.profiles import Profile
from vigil.schedule.liveness import worker_key
from vigil.store.base import SessionStore

log = logging.getLogger(__name__)

STATUS_KEY = "gateway:status"
DEFAULT_INTERVAL = 5.0
STALE_AFTER_INTERVALS = 3
"""A record not rewritten for this many intervals is stale: its writer is gone or hung."""
MIN_STALE_AFTER = 15.0
States = Literal["running", "stopping", "stopped"]
SNAPSHOT_FIELDS = ("url", "adapters", "live_conversations", "armed_heartbeats", "next_cron_run", "waiting",
                   "waiting_count")
"""What the gateway's ``snapshot()`` supplies; the keeper adds who, where, when and the state."""


@dataclass(frozen=True, slots=True)
class WorkerIdentity:
    """Who a worker on a shared store is: its id (its heartbeat lease holder token), its
    owner name in reservations and runs (``host:pid:token``) and its lease in seconds."""

    worker_id: str
    owner: str
    lease: float


class StatusKeeper:
    """Keeps the status record fresh while the gateway runs.

    ``snapshot()`` returns the live part of the record (:data:`SNAPSHOT_FIELDS`; missing keys
    read as empty). :meth:`run` writes the record every ``interval`` seconds until cancelled;
    a failing snapshot or store is logged (when it starts, changes and ends) and tried again next time.
    :meth:`write` sets the state (``stopping`` when SIGTERM arrives, ``stopped`` at the very
    end) and writes at once; the loop keeps writing the last state set.
    """

    def __init__(
        self, store: SessionStore, clock: Clock, snapshot: Callable[[], dict[str, Any]], *,
        worker: WorkerIdentity | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.snapshot = snapshot
        self.worker = worker
        """Set on a shared store: the record is this worker's own (see the module docstring)."""
        self.key = STATUS_KEY if worker is None else worker_key(worker.worker_id)
        self.state: States = "running"
        self.started_at = clock.now()
        self.interval = DEFAULT_INTERVAL if worker is None else worker.lease / 3
        self.pid = os.getpid()
        self.host = socket.gethostname()
        self._failing: str | None = None

    def record(self) -> dict[str, Any]:
        """The record as it would be written now."""
        live = self.snapshot()
        adapters = [adapter_entry(a) for a in live.get("adapters") or ()]
        return {
            "pid": self.pid,
            "host": self.host,
            "started_at": self.started_at,
            "updated_at": self.clock.now(),
            "interval": self.interval,
            "url": live.get("url"),
            "adapters": adapters,
            "live_conversations": int(live.get("live_conversations") or 0),
            "armed_heartbeats": int(live.get("armed_heartbeats") or 0),
            "next_cron_run": live.get("next_cron_run"),
            "waiting": [dict(item) for item in live.get("waiting") or () if isinstance(item, dict)],
            "waiting_count": int(live.get("waiting_count") or 0),
            "version": __version__,
            "state": self.state,
            **({} if self.worker is None else {
                "worker_id": self.worker.worker_id, "owner": self.worker.owner, "lease": self.worker.lease,
            }),
        }

    def write(self, state: States | None = None) -> dict[str, Any]:
        """Set ``state`` (if given) and write the record now (blocking: from async code call it
        through ``asyncio.to_thread``, except at the very end). Store errors propagate."""
        if state is not None:
            if state not in ("running", "stopping", "stopped"):
                raise ValueError(f"unknown gateway state {state!r}")
            self.state = state
        record = self.record()
        self.store.set_meta(self.key, record)
        return record

    async def run(self, interval: float | None = None) -> None:
        """Write the record every ``interval`` seconds (default: :data:`DEFAULT_INTERVAL`, a
        worker's a third of its lease) until cancelled; never fails."""
        import asyncio

        interval = self.interval if interval is None else interval
        if not interval > 0:
            raise ValueError("the status interval must be positive")
        self.interval = interval
        while True:
            try:
                await asyncio.to_thread(self.write)
            except Exception as exc:  # a loop that must outlive any one failure
                reason = str(exc) or type(exc).__name__
                if reason != self._failing:  # said when it starts or changes, not at every retry
                    log.warning("gateway status: cannot write the status record (will retry): %s", reason)
                self._failing = reason
            else:
                if self._failing:
                    log.warning("gateway status: the status record is written again")
                self._failing = None
            await self.clock.sleep(interval)


@dataclass(frozen=True, slots=True)
class GatewayStatus:
    """What ``vigil gateway status`` reports.

    ``running``: a process holds the lock and keeps the record fresh. ``state`` is the record's
    state when running, else ``not running``, or ``unresponsive`` when a process holds the lock
    but does not keep the record fresh (starting, or hung). ``summary`` says it in one line.
    ``pid`` is the lock holder's (else the record's last writer); ``record`` is the raw record.
    """

    running: bool
    state: str
    summary: str
    pid: int | None
    record: dict[str, Any] | None = None
    lock_holder: LockHolder | None = None
    last_seen: float | None = None
    adapters: list[dict[str, Any]] = field(default_factory=list)

    def value(self, key: str) -> Any:
        """A field of the record (``None`` without one)."""
        return None if self.record is None else self.record.get(key)


def is_fresh(record: dict[str, Any], now: float) -> bool:
    """Whether ``record`` was written recently enough to believe (see :data:`STALE_AFTER_INTERVALS`)."""
    updated = _number(record.get("updated_at"))
    interval = _number(record.get("interval")) or DEFAULT_INTERVAL
    if updated is None:
        return False
    return now - updated <= max(STALE_AFTER_INTERVALS * interval, MIN_STALE_AFTER)


def read_status(store: SessionStore, profile: Profile, *, now: float) -> GatewayStatus:
    """The gateway's status from the record in ``store`` and the profile's lock."""
    entry = store.get_meta(STATUS_KEY)
    record = entry.value if entry is not None and isinstance(entry.value, dict) else None
    locked = holder(profile)
    last_seen = _number(record.get("updated_at")) if record else None
    adapters = [adapter_entry(a) for a in (record or {}).get("adapters") or () if isinstance(a, dict)]
    if locked is not None:
        mine = record is not None and locked.pid != 0 and record.get("pid") == locked.pid
        if mine and record is not None and is_fresh(record, now) and record.get("state") != "stopped":
            state = str(record.get("state") or "running")
            return GatewayStatus(
                True, state, f"{state} (pid {locked.pid})", locked.pid, record, locked, last_seen, adapters
            )
        if not (mine and record is not None and record.get("state") == "stopped"):
            who = f"pid {locked.pid}" if locked.pid else "a process"
            seen = (
                f"; its status was last written at {ago(now, last_seen)}" if mine and last_seen
                else "; it has not written its status yet"
            )
            return GatewayStatus(
                False, "unresponsive",
                f"unresponsive: {who} holds the gateway lock but does not keep its status fresh{seen} "
                "(starting, or hung)",
                locked.pid or None, record if mine else None, locked, last_seen if mine else None,
                adapters if mine else [],
            )
    if record is None:
        return GatewayStatus(False, "not running", "not running (no gateway has run for this profile)", None)
    how = "stopped at" if record.get("state") == "stopped" else "last seen"
    summary = f"not running ({how} {ago(now, last_seen)})" if last_seen else "not running"
    pid = record.get("pid") if isinstance(record.get("pid"), int) else None
    return GatewayStatus(False, "not running", summary, pid, record, None, last_seen, adapters)


def adapter_entry(raw: Any) -> dict[str, Any]:
    """One adapter of the record, from a snapshot's (or an old record's) entry."""
    ok = bool(raw.get("ok"))
    error = raw.get("last_error")
    return {
        "name": str(raw.get("name") or "?"),
        "ok": ok,
        "detail": str(raw.get("detail") or ""),
        "state": str(raw.get("state") or ("connected" if ok else "stopped")),
        "since": _number(raw.get("since")),
        "last_error": None if error is None else str(error),
    }


def adapter_line(entry: dict[str, Any], now: float) -> str:
    """How ``vigil gateway status`` shows one adapter: ``web connected (3 page(s) open)``,
    ``NAME retrying since 12:03:04, 5m ago — last error: ...``, ``NAME misconfigured — ...``."""
    item = {key: " ".join(value.split()) if isinstance(value, str) else value
            for key, value in adapter_entry(entry).items()}  # one line, whatever an error said
    state = item["state"]
    text = f"{item['name'] or '?'} {state}"  # a name of blanks alone is no name
    if state in ("retrying", "stopped") and item["since"] is not None:
        text += f" since {ago(now, item['since'])}"
    if item["detail"] and item["detail"] not in (item["last_error"], state):
        text += f" ({item['detail']})"
    if item["last_error"] and state != "connected":
        text += f" — last error: {item['last_error']}"
    elif item["last_error"]:
        text += f" (last error: {item['last_error']})"
    return text


def waiting_line(record: dict[str, Any], now: float) -> str | None:
    """What ``vigil gateway status`` says about the messages that wait, e.g. "2 message(s)
    waiting for the model (retrying, next try in 40 s): cannot reach …"; ``None``: none wait."""
    count = record.get("waiting_count")
    listed = [item for item in record.get("waiting") or () if isinstance(item, dict)]
    if not isinstance(count, int) or count <= 0 or not listed:
        return None
    soonest = min(listed, key=lambda item: _number(item.get("retry_at")) or now)
    retry_at = _number(soonest.get("retry_at"))
    seconds = max(0.0, (retry_at or now) - now)
    what = {"no_model": "for a model to be configured", "internal": "after an error"}.get(
        str(soonest.get("reason")), "for the model")
    detail = str(soonest.get("detail") or "")
    when = f"next try in {seconds:.0f} s" if seconds >= 1 else "trying again now"
    return f"{count} message(s) waiting {what} (retrying, {when})" + (f": {detail}" if detail else "")


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def ago(now: float, then: float | None) -> str:
    """``2026-12-01 12:03:04, 5m ago`` (local time)."""
    if then is None:
        return "at an unknown time"
    try:
        stamp = datetime.fromtimestamp(then).strftime("%Y-%m-%d %H:%M:%S")
    except (ValueError, OverflowError, OSError):  # a damaged record's time
        return "at an unknown time"
    seconds = max(0, int(now - then))
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{stamp}, {seconds // size}{unit} ago"
    return f"{stamp}, {seconds}s ago"
