"""One process running a heartbeat scheduler on a shared store, for the multi-process test.

    python -m tests.schedule.heartbeat.mp_worker STORE SESSION ORIGIN_FAKE FACTOR SECONDS

STORE is an SQLite file or a PostgreSQL URL (what ``vigil.store.open_store`` opens).

Once started up it prints ``{"ready": owner}`` and reads ORIGIN_REAL (epoch seconds) from
stdin: the test sends it when both processes are ready, so a slow start under load never
eats into the run. Both processes use the same scaled clock (fake time = ORIGIN_FAKE + (real -
ORIGIN_REAL) x FACTOR), so a 60 s interval passes in 60/FACTOR real seconds. Each fire that reaches
execution prints one JSON line: owner, fake time, fire count, due time. At the end one more
line reports what this process's engine did and the fake time it stopped at.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from datetime import datetime, timezone

from vigil.schedule.heartbeat.repo import PROCESS_OWNER, Reservation
from vigil.schedule.heartbeat.scheduler import DirectTarget, HeartbeatScheduler
from vigil.store import open_store


class ScaledClock:
    """Real time, sped up by ``factor`` from a shared origin."""

    def __init__(self, origin_real: float, origin_fake: float, factor: float) -> None:
        self.origin_real, self.origin_fake, self.factor = origin_real, origin_fake, factor

    def now(self) -> float:
        return self.origin_fake + (time.time() - self.origin_real) * self.factor

    def utcnow(self) -> datetime:
        return datetime.fromtimestamp(self.now(), timezone.utc)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds) / self.factor)

    async def sleep_until(self, when: float) -> None:
        await asyncio.sleep(max(0.0, when - self.now()) / self.factor)


async def main(db: str, session_id: str, origin_fake: float, factor: float, seconds: float) -> None:
    store = open_store(db)
    print(json.dumps({"ready": PROCESS_OWNER}), flush=True)
    origin_real = float(sys.stdin.readline())
    clock = ScaledClock(origin_real, origin_fake, factor)
    scheduler = HeartbeatScheduler(store, clock=clock, poll_interval=30)

    def run(reservation: Reservation) -> None:
        line = {
            "owner": PROCESS_OWNER,
            "at": reservation.heartbeat.last_fire,
            "count": reservation.heartbeat.fire_count,
            "due": reservation.due,
        }
        print(json.dumps(line), flush=True)

    scheduler.own(session_id, DirectTarget(scheduler, run))
    started_at = clock.now()
    await scheduler.start()
    await asyncio.sleep(max(0.0, origin_real + seconds - time.time()))
    stopped_at = clock.now()
    await scheduler.stop()
    store.close()
    done = {
        "done": PROCESS_OWNER,
        "started_at": started_at,
        "stopped_at": stopped_at,
        "engine_fired": scheduler.engine.stats.fired,
        "claims": scheduler.stats.claims,
        "confirmed": scheduler.stats.confirmed,
    }
    print(json.dumps(done), flush=True)


if __name__ == "__main__":
    db, sid, fake, factor, seconds = sys.argv[1:6]
    asyncio.run(main(db, sid, float(fake), float(factor), float(seconds)))
