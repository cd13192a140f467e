"""Several gateways on one store: a message stored by one worker, answered by another.

A worker that receives a message for a conversation another live worker runs stores it in the
inbox (the platform is acknowledged as usual) and tells the others on the store's ``inbox``
notification channel; the worker that runs the conversation hands it to that conversation's
queue. Every worker also sweeps the inbox every third of the lease time: that catches a missed
notification and, once a dead worker's leases lapse, takes its conversations over with what it
left unanswered (through :mod:`vigil.gateway.recovery`, so a turn cut off mid-way continues and an
answer already stored is not asked for again). The same sweep renews this worker's conversation
leases and closes, here, a conversation another worker took over while this one was stalled.

On a store only one gateway uses (SQLite) none of this runs: there is nobody to hand over to.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Callable

from vigil.gateway.recovery import recover_entry
from vigil.gateway.cluster.relay import store_notifications
from vigil.store import StoreError
from vigil.store.gateway.gateway_tables import InboxEntry

if TYPE_CHECKING:
    from vigil.gateway.parts import HandoverHost

log = logging.getLogger(__name__)

CHANNEL = "inbox"
SWEEP_LIMIT = 500
"""Unfinished entries looked at per sweep (the oldest first)."""


class Handover:
    """The hand-over of one worker (see the module docstring)."""

    def __init__(self, gateway: "HandoverHost") -> None:
        self.gateway = gateway
        self.every = gateway.ownership.book.renew_every
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._told: set[int] = set()  # entries announced by another worker, not looked at yet
        self._sweep_due = False
        self._unsubscribe: Callable[[], None] | None = None
        self._notifications: Any = None
        self._letting_go: set[str] = set()
        self.taken_over = 0
        """Entries this worker answered for a conversation it took over or was handed."""

    @property
    def active(self) -> bool:
        return self.gateway.ownership.shared

    def start(self) -> None:
        if not self.active or self._task is not None:
            return
        self._notifications = store_notifications(self.gateway.store)
        if self._notifications is not None:
            loop = asyncio.get_running_loop()

            def heard(payload: str) -> None:
                loop.call_soon_threadsafe(self._heard, payload)

            # Announcements made while the listener was cut off are lost: sweep at once.
            heard.on_reconnect = lambda: loop.call_soon_threadsafe(self._sweep_now)  # type: ignore[attr-defined]
            try:
                self._unsubscribe = self._notifications.subscribe(CHANNEL, heard)
            except Exception as exc:  # a listener that cannot start: the sweep still runs
                log.warning("cannot listen for handed-over messages (the sweep still finds them): %s", exc)
        self._task = asyncio.create_task(self._run(), name="gateway-handover")

    async def stop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def tell(self, entry: InboxEntry, owner: str) -> None:
        """``entry`` waits for ``owner``, the worker that runs its conversation: wake it now
        (the others ignore it; should that worker be gone, their sweeps find the entry)."""
        if self._notifications is None:
            return
        try:
            self._notifications.publish(CHANNEL, f"{entry.id} {owner}")
        except Exception as exc:  # its sweep finds it anyway
            log.warning("cannot announce inbox entry %d to the other workers: %s", entry.id, exc)

    def _sweep_now(self) -> None:
        self._sweep_due = True
        self._wake.set()

    def _heard(self, payload: str) -> None:
        entry_id, _, owner = payload.partition(" ")
        if owner and owner != self.gateway.worker_id:
            return
        try:
            self._told.add(int(entry_id))
        except ValueError:
            return
        self._wake.set()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        next_sweep = loop.time() + self.every
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), max(0.0, next_sweep - loop.time()))
            except asyncio.TimeoutError:
                pass
            self._wake.clear()
            try:
                if self._told and loop.time() < next_sweep and not self._sweep_due:
                    await self.look_at(self._take_told())  # one entry read each, not a sweep
                    continue
                next_sweep = loop.time() + self.every
                self._told.clear()
                self._sweep_due = False
                await self.sweep()
            except StoreError as exc:
                log.warning("the inbox sweep failed (trying again in %g s): %s", self.every, exc)
            except Exception:  # one bad entry must not end the hand-over
                log.exception("the inbox sweep failed")

    async def sweep(self) -> int:
        """Renew the leases, let go of conversations taken over elsewhere, and answer the
        unfinished entries of conversations this worker runs or nobody runs. Returns how
        many entries were handed on."""
        gateway = self.gateway
        lost = await asyncio.to_thread(gateway.ownership.still_held)
        for session_id in lost:
            self._let_go_soon(session_id)
        entries = await asyncio.to_thread(gateway.store.gateway.inbox_unfinished, limit=SWEEP_LIMIT)
        handled = 0
        for entry in entries:
            if entry.id in gateway.handling or gateway.closing:
                continue
            handled += await recover_entry(gateway, entry)
        if handled:
            self.taken_over += handled
            gateway.say(f"vigil gateway: {handled} message(s) handed over to this worker are being answered")
        return handled

    def _take_told(self) -> list[int]:
        told, self._told = sorted(self._told), set()
        return told

    async def look_at(self, entry_ids: list[int]) -> int:
        """Hand on the entries another worker announced, if their conversation runs here."""
        gateway = self.gateway
        handled = 0
        for entry_id in entry_ids:
            if entry_id in gateway.handling or gateway.closing:
                continue
            entry = await asyncio.to_thread(gateway.store.gateway.inbox_get, entry_id)
            if entry is not None:
                handled += await recover_entry(gateway, entry)
        self.taken_over += handled
        return handled

    def _let_go_soon(self, session_id: str) -> None:
        """Let go of ``session_id`` in a task of its own: waiting for its turn to end must
        not hold up the sweeps, which answer what the other conversations are owed."""
        if session_id in self._letting_go:
            return
        self._letting_go.add(session_id)

        async def let_go() -> None:
            try:
                await self._let_go(session_id)
            finally:
                self._letting_go.discard(session_id)
        self.gateway.spawn(let_go())

    async def _let_go(self, session_id: str) -> None:
        """Another worker runs ``session_id`` now: close it here once it is idle, with no
        message being handed to it (under its routes' locks), unless this worker has taken it
        back meanwhile (a message claimed it again once the other worker's lease lapsed)."""
        gateway = self.gateway
        live = gateway.live.get(session_id)
        if live is None:
            return
        gateway.say(f"vigil gateway: conversation {session_id[:8]} is run by another worker now")
        while True:
            await live.conversation.wait_idle()
            async with gateway.routes_held(live):
                if live.closed or gateway.live.get(session_id) is not live:
                    return
                if session_id in gateway.ownership.held:
                    gateway.say(f"vigil gateway: conversation {session_id[:8]} is back in this worker")
                    return
                if live.conversation.idle:
                    gateway.forget(live)
                    await live.close()
                    return
            # a message was handed to it while the locks were awaited: let that one finish
