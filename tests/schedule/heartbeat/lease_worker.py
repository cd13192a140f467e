"""A REPL-like or gateway-like process with a leased heartbeat scheduler on a shared store,
for the lease hand-over test.

    python -m tests.schedule.heartbeat.lease_worker STORE SESSION ORIGIN_FAKE FACTOR KIND OPEN_AT SECONDS LEASE

Like :mod:`tests.schedule.heartbeat.mp_worker`: it prints ``{"ready": pid}``, reads ORIGIN_REAL from
stdin and runs on the shared scaled clock. A ``repl`` opens the conversation (owns SESSION,
taking its lease over) at fake time OPEN_AT and then runs until it is killed; a ``gateway``
adopts every free heartbeat from the start and stops after SECONDS real seconds. Every fire
that reaches execution prints one JSON line (kind, pid, fake time, fire count); the gateway
ends with a ``done`` line.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

from tests.schedule.heartbeat.mp_worker import ScaledClock
from vigil.schedule.heartbeat.lease import GATEWAY, LeaseBook
from vigil.schedule.heartbeat.repo import Reservation
from vigil.schedule.heartbeat.scheduler import DirectTarget, HeartbeatScheduler
from vigil.store import open_store

POLL = 5.0  # fake seconds


async def main(
    db: str, session_id: str, origin_fake: float, factor: float, kind: str, open_at: float, seconds: float,
    lease: float,
) -> None:
    store = open_store(db)
    print(json.dumps({"ready": os.getpid()}), flush=True)
    origin_real = float(sys.stdin.readline())
    clock = ScaledClock(origin_real, origin_fake, factor)
    book = LeaseBook(store, clock, kind=kind, seconds=lease)
    scheduler = HeartbeatScheduler(store, clock=clock, poll_interval=POLL, leases=book)

    def run(reservation: Reservation) -> None:
        line = {"kind": kind, "pid": os.getpid(), "at": reservation.heartbeat.last_fire,
                "count": reservation.heartbeat.fire_count}
        print(json.dumps(line), flush=True)

    if kind == GATEWAY:
        scheduler.adopt(lambda sid: DirectTarget(scheduler, run))
    await clock.sleep_until(open_at)
    await scheduler.start()
    if kind != GATEWAY:
        scheduler.own(session_id, DirectTarget(scheduler, run))
        await scheduler.refresh(session_id)
        print(json.dumps({"opened": clock.now()}), flush=True)
        await asyncio.Event().wait()  # until killed
    await asyncio.sleep(max(0.0, origin_real + seconds - time.time()))
    stopped_at = clock.now()
    await scheduler.stop()
    store.close()
    print(json.dumps({"done": os.getpid(), "stopped_at": stopped_at}), flush=True)


if __name__ == "__main__":
    db, sid, fake, factor, kind, open_at, seconds, lease = sys.argv[1:9]
    asyncio.run(main(db, sid, float(fake), float(factor), kind, float(open_at), float(seconds), float(lease)))
