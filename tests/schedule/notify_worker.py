"""A process with a heartbeat and a cron scheduler on a shared store, both polling for changes
only once a minute, for the change-notification test.

    python -m tests.schedule.notify_worker STORE SESSION

Prints ``{"ready": pid}`` once both run, then one JSON line per heartbeat fire
(``{"heartbeat": session}``) and per cron run (``{"cron": job}``); ends when stdin closes.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from vigil.schedule.cron.repo import Claim, CronRepo
from vigil.schedule.cron.runs import RunRecord
from vigil.schedule.cron.scheduler import CronScheduler
from vigil.schedule.heartbeat.repo import Reservation
from vigil.schedule.heartbeat.scheduler import DirectTarget, HeartbeatScheduler
from vigil.store import open_store

POLL = 60.0  # seconds: far longer than the test waits


def say(line: dict[str, object]) -> None:
    print(json.dumps(line), flush=True)


async def main(location: str, session_id: str) -> None:
    store = open_store(location)
    repo = CronRepo(store)

    async def execute(claim: Claim) -> RunRecord:
        say({"cron": claim.job.name})
        record = claim.record.finished("ok", repo.clock.now())
        await asyncio.to_thread(repo.finish, claim, record)
        return record

    def fire(reservation: Reservation) -> None:
        say({"heartbeat": reservation.heartbeat.session_id})

    heartbeats = HeartbeatScheduler(store, poll_interval=POLL)
    heartbeats.own(session_id, DirectTarget(heartbeats, fire))
    cron = CronScheduler(repo, execute, poll_interval=POLL)
    await heartbeats.start()
    await cron.start()
    say({"ready": os.getpid()})
    await asyncio.to_thread(sys.stdin.read)
    await cron.stop()
    await heartbeats.stop()
    store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
