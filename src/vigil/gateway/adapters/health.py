"""An adapter's health as ``vigil gateway status`` shows it, kept the same way by every platform.

An adapter is in one of four states: :data:`CONNECTED`, :data:`RETRYING` (the platform does not
answer; the adapter tries again with back-off, :mod:`vigil.backoff`), :data:`MISCONFIGURED` (a
secret is missing or refused: nothing works until the configuration changes) or
:data:`STOPPED`. :class:`HealthState` keeps the state, since when, what to show, and the last
error (kept while the adapter retries and after it recovers, for ``gateway status``).
"""

from __future__ import annotations

import logging
import time
from typing import Callable

from vigil.gateway.adapters.base import AdapterHealth

CONNECTED = "connected"
RETRYING = "retrying"
MISCONFIGURED = "misconfigured"
STOPPED = "stopped"
STATES = (CONNECTED, RETRYING, MISCONFIGURED, STOPPED)

log = logging.getLogger(__name__)


class HealthState:
    """The current state, since when (wall clock), a detail and the last error.

    ``name`` and ``say`` make a change into trouble heard: a warning in the log, and a line
    for the person running the gateway (``say``, the gateway's console) when the adapter
    becomes misconfigured or starts retrying."""

    def __init__(self, name: str = "", say: Callable[[str], None] | None = None) -> None:
        self.name = name
        self.say = say
        self.state = STOPPED
        self.since = time.time()
        self.detail = "not started"
        self.last_error: str | None = None

    @property
    def ok(self) -> bool:
        return self.state == CONNECTED

    def set(self, state: str, detail: str, error: str | None = None) -> None:
        """Enter ``state`` (``since`` changes only when the state does) showing ``detail``;
        ``error`` becomes the last error."""
        if state not in STATES:
            raise ValueError(f"unknown adapter state {state!r}")
        changed = state != self.state
        if changed:
            self.state, self.since = state, time.time()
        self.detail = detail
        if error is not None:
            self.last_error = error
        if changed and self.name and state in (RETRYING, MISCONFIGURED):
            log.warning("%s adapter %s: %s", self.name, state, error or detail)
            if self.say is not None:
                self.say(f"vigil gateway: error: {self.name} adapter {state}: {error or detail}")

    def view(self, detail: str | None = None) -> AdapterHealth:
        """What ``Adapter.health`` returns (``detail``: instead of the stored one)."""
        return AdapterHealth(self.ok, self.detail if detail is None else detail, self.state, self.since,
                             self.last_error)
