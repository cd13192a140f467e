"""A scheduler process for the multi-process test: ``python worker.py BASE_URL API_KEY STORE``.

Reads ``tick <epoch>`` lines on stdin; for each, handles whatever is due at that instant in
the profile of ``$VIGIL_HOME`` with its sessions and jobs in STORE (an SQLite file or a
PostgreSQL URL; claims race with the other workers) and answers
``done <runs> <owner>``. ``quit`` ends it.
"""

from __future__ import annotations

import asyncio
import sys

from vigil.clock import FakeClock
from vigil.config.settings import ModelSettings, Settings
from vigil.models.factory import build_client
from vigil.profiles import get_profile
from vigil.schedule.cron.repo import CronRepo
from vigil.runtime.cron_runner import CronRunner
from vigil.schedule.cron.scheduler import CronScheduler
from vigil.schedule.heartbeat.repo import PROCESS_OWNER
from vigil.store import open_store


async def main(base_url: str, api_key: str, location: str) -> None:
    profile = get_profile(None)
    store = open_store(location)
    settings = Settings(model=ModelSettings(provider="openai", name="fake-model", base_url=base_url, api_key=api_key))
    client = await build_client(settings.model, {})
    clock = FakeClock(0)
    repo = CronRepo(store, clock)
    runner = CronRunner(repo=repo, client=client, profile=profile, settings=settings, clock=clock)
    scheduler = CronScheduler(repo, runner.execute, clock=clock, poll_interval=0)
    print("ready", flush=True)
    for line in sys.stdin:
        command = line.split()
        if not command or command[0] == "quit":
            break
        clock.set_sync(float(command[1]))
        report = await scheduler.tick()
        print(f"done {len(report.runs)} {PROCESS_OWNER}", flush=True)
    await client.aclose()
    store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
