"""Several gateways on one store: live events reach the pages open on every worker.

A web page follows its conversation through the worker that serves its event stream, which
need not be the worker that runs the conversation. Each worker therefore shares what its event
bus and its web pages are given (a turn's deltas, ``session_moved``, an outbox reply, a cron
answer) on the store's ``events`` notification channel, and hands what the other workers share
to its own watchers. A message too large for a notification becomes ``stale``, on which a page
reloads the conversation's history (which holds everything).

On a store only one gateway uses (SQLite) nothing is shared: there is nobody to share with.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from vigil.gateway.parts import RelayHost

log = logging.getLogger(__name__)

CHANNEL = "events"
LIMIT = 7_800
"""Bytes of one shared message (a notification carries at most 8,000)."""


def store_notifications(store: Any) -> Any:
    """The store's notification channels (PostgreSQL), or ``None`` (SQLite, or unavailable)."""
    make = getattr(store, "notifications", None)
    if make is None:
        return None
    try:
        return make()
    except Exception as exc:
        log.warning("the store's notifications are not available: %s", exc)
        return None


class Relayed:
    """What a shared part (the event bus, the web adapter's open pages) needs: ``relay(msg)``
    to share a message, set while the relay runs; ``deliver(msg)`` applies one shared by
    another worker (implemented by the part)."""

    relay: Callable[[dict[str, Any]], None] | None = None

    def deliver(self, message: dict[str, Any]) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def missed(self) -> None:  # pragma: no cover - interface
        """Shared messages may have been lost: every watcher here reloads (``stale``)."""
        raise NotImplementedError


class EventRelay:
    """The relay of one worker (see the module docstring)."""

    def __init__(self, gateway: "RelayHost") -> None:
        self.gateway = gateway
        self._notifications: Any = None
        self._unsubscribe: Callable[[], None] | None = None
        self._parts: dict[str, Relayed] = {}

    def start(self) -> None:
        gateway = self.gateway
        if not gateway.ownership.shared:
            return
        self._notifications = store_notifications(gateway.store)
        if self._notifications is None:
            return
        self._parts = {"bus": gateway.bus}
        for name, adapter in gateway.adapters.items():
            pages = getattr(adapter, "pages", None)
            if isinstance(pages, Relayed):
                self._parts[f"pages:{name}"] = pages
        loop = asyncio.get_running_loop()

        def heard(payload: str) -> None:
            loop.call_soon_threadsafe(self._received, payload)

        # What the others shared while the listener was cut off is lost: the pages reload.
        heard.on_reconnect = lambda: loop.call_soon_threadsafe(self._missed)  # type: ignore[attr-defined]
        try:
            self._unsubscribe = self._notifications.subscribe(CHANNEL, heard)
        except Exception as exc:
            log.warning("cannot hear the other workers' live events (pages here see answers once they are stored): %s", exc)
            return
        for name, part in self._parts.items():
            part.relay = self._sharer(name)

    def stop(self) -> None:
        for part in self._parts.values():
            part.relay = None
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def _sharer(self, part: str) -> Callable[[dict[str, Any]], None]:
        worker = self.gateway.worker_id

        def share(message: dict[str, Any]) -> None:
            payload = json.dumps({"w": worker, "p": part, "m": message}, separators=(",", ":"))
            if len(payload.encode()) > LIMIT:
                payload = json.dumps({"w": worker, "p": part, "m": _stale(message)}, separators=(",", ":"))
            try:
                self._notifications.publish(CHANNEL, payload)
            except Exception as exc:  # the pages elsewhere reload when they reconnect
                log.warning("cannot share a live event with the other workers: %s", exc)

        return share

    def _missed(self) -> None:
        """Tell every page here to reload its conversation's history."""
        for part in self._parts.values():
            try:
                part.missed()
            except Exception:
                log.exception("cannot tell the pages here to reload")

    def _received(self, payload: str) -> None:
        try:
            data = json.loads(payload)
            if data["w"] == self.gateway.worker_id:
                return
            part, message = self._parts.get(data["p"]), data["m"]
        except (ValueError, KeyError, TypeError):
            log.warning("ignoring a malformed shared event")
            return
        if part is not None and isinstance(message, dict):
            try:
                part.deliver(message)
            except Exception:
                log.exception("a shared event could not be delivered here")


def _stale(message: dict[str, Any]) -> dict[str, Any]:
    """A small stand-in for a message too large to share: its pages reload the history."""
    event = message.get("e") if isinstance(message.get("e"), dict) else {}
    session_id = event.get("session_id") if isinstance(event, dict) else None
    small: dict[str, Any] = {key: value for key, value in message.items() if key != "e"}
    small["e"] = {"type": "stale", "session_id": session_id}
    return small
