"""The emergency stop: a profile-wide flag that keeps heartbeats and cron from starting new
turns. Work already running is not killed; reservations made while it is on are refunded.

``vigil pause`` engages it and ``vigil resume`` releases it; any process sharing the profile's
store sees it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vigil.schedule.changes import bump_generation
from vigil.store import SessionStore

ESTOP_KEY = "schedule:emergency_stop"


@dataclass(frozen=True, slots=True)
class EmergencyStop:
    """Who engaged the stop, when, and why."""

    since: float
    reason: str = ""
    by: str = ""


def engage(store: SessionStore, now: float, *, reason: str = "", by: str = "") -> EmergencyStop:
    """Engage the stop (idempotent: an existing stop keeps its original time)."""
    current = status(store)
    if current is not None:
        return current
    stop = EmergencyStop(since=now, reason=reason, by=by)
    store.set_meta(ESTOP_KEY, {"since": now, "reason": reason, "by": by})
    bump_generation(store)
    return stop


def release(store: SessionStore) -> bool:
    """Release the stop; returns whether it was engaged."""
    existed = store.delete_meta(ESTOP_KEY)
    if existed:
        bump_generation(store)
    return existed


def status(store: SessionStore) -> EmergencyStop | None:
    """The engaged stop, or ``None`` when schedules may run."""
    entry = store.get_meta(ESTOP_KEY)
    if entry is None:
        return None
    value: Any = entry.value
    if not isinstance(value, dict):
        # A damaged flag still means "stopped": failing safe is the point of the flag.
        return EmergencyStop(since=entry.updated_at, reason="(damaged flag)")
    return EmergencyStop(
        since=float(value.get("since", entry.updated_at)),
        reason=str(value.get("reason", "")),
        by=str(value.get("by", "")),
    )


def engaged(store: SessionStore) -> bool:
    """Whether the emergency stop is on."""
    return status(store) is not None
