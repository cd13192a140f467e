"""Heartbeats: the stored record and its pure changes (``record``), compare-and-set storage and
reservations (``repo``), the per-process scheduler (``scheduler``) and the texts people read
(``text``).

The record's names stay importable from ``vigil.schedule.heartbeat``, where they used to live.
"""

from vigil.schedule.heartbeat.record import Heartbeat, HeartbeatError, NoHeartbeat, Route, heartbeat_key

__all__ = ["Heartbeat", "HeartbeatError", "NoHeartbeat", "Route", "heartbeat_key"]
