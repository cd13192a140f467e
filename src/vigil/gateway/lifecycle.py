"""Starting and stopping a gateway: the order its parts come up in, and go down in.

Up: heartbeats re-armed from the store, the relay of live events, input taken, what a crash
left unanswered answered, then the outbox, the pruning of old delivery records, idle closing,
the hand-over sweep and the adapters.
Down, once no input is taken: adapters, heartbeats, running turns given their grace, the
turns that finished settled, conversations closed, the outbox drained, leases released.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from vigil.store import StoreError

if TYPE_CHECKING:
    from vigil.gateway.parts import LifecycleHost

log = logging.getLogger(__name__)

SETTLE_GRACE = 5.0
"""Seconds the stopping gateway gives the turns that finished to be marked answered and
their replies queued, before it stops waiting (they are then finished at the next start)."""


async def start(gateway: LifecycleHost) -> None:
    """Bring ``gateway`` up; it takes input once its heartbeats are armed."""
    from vigil.gateway.recovery import recover

    from vigil.gateway import background_notes
    from vigil.gateway.fanout import heartbeat_note

    ownership = gateway.ownership
    heartbeats = gateway.heartbeats
    if heartbeats.daily_token_budget is None:
        heartbeats.daily_token_budget = gateway.settings.heartbeat.daily_token_budget
    if heartbeats.on_note is None:  # a heartbeat vigil ended or paused: its chat is told
        heartbeats.on_note = lambda noted: gateway.spawn(heartbeat_note(gateway, noted))
    heartbeats.adopt(gateway.adopted, ownership.adoptable if ownership.shared else None)
    await heartbeats.start()
    armed = len(gateway.heartbeats.engine)
    if armed:
        gateway.say(f"vigil gateway: {armed} heartbeat(s) armed from the store")
    gateway.relay.start()
    gateway.open_for_input()
    await recover(gateway)
    await background_notes.sweep(gateway)  # /background tasks a dead process of this machine left
    gateway.outbox.start()
    gateway.pruner.start()
    gateway.idle.start()
    gateway.handover.start()
    for adapter in gateway.adapters.values():
        await adapter.start(gateway)


async def stop(gateway: LifecycleHost, grace: float) -> None:
    """Take ``gateway`` down; it no longer takes input. Running turns get ``grace`` seconds."""
    await gateway.idle.stop()
    await gateway.pruner.stop()
    for adapter in gateway.adapters.values():
        try:
            await adapter.stop()
        except Exception:
            log.exception("adapter %s did not stop cleanly", adapter.name)
    await gateway.heartbeats.stop()
    if gateway.ownership.shared:
        # Stopping the heartbeats retired the holder record the conversation leases share:
        # renew it, so that nobody takes over a turn still finishing here (the hand-over
        # sweep keeps renewing until the end).
        try:
            await asyncio.to_thread(gateway.ownership.book.keep_alive)
        except StoreError as exc:
            log.warning("cannot renew the conversation leases while stopping: %s", exc)
    lives = gateway.all_live()
    for live in lives:
        live.conversation.drop_queued()
    running = [live for live in lives if live.conversation.busy]
    if running:
        gateway.say(f"vigil gateway: waiting up to {grace:g} s for {len(running)} running turn(s)")
        waits = [asyncio.ensure_future(live.conversation.wait_idle()) for live in running]
        _done, pending = await asyncio.wait(waits, timeout=grace)
        for task in pending:
            task.cancel()
        for live in running:
            live.conversation.interrupt()
    tasks = gateway.background_tasks()
    settling = [task for task in tasks if not task.done()]
    if settling:
        await asyncio.wait(settling, timeout=SETTLE_GRACE)
    for live in gateway.all_live():
        await live.close()
    await gateway.handover.stop()
    for task in list(tasks):
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    try:
        await asyncio.wait_for(gateway.outbox.drain(), 5.0)
    except (asyncio.TimeoutError, StoreError) as exc:
        log.warning("outbox not drained at shutdown (sent at the next start): %s", exc)
    await gateway.outbox.stop()
    gateway.relay.stop()
    gateway.bus.close_all()
    try:
        await asyncio.to_thread(gateway.ownership.close)
    except StoreError as exc:
        log.warning("cannot release the conversation leases (they lapse by themselves): %s", exc)
