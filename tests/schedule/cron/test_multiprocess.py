"""Three OS processes tick one store (SQLite and PostgreSQL) at the same instants: every
occurrence runs once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.schedule.cron.conftest import START
from vigil.clock import FakeClock
from vigil.profiles import Profile
from vigil.schedule.cron.jobs import JobSpec, new_job
from vigil.schedule.cron.repo import CronRepo
from vigil.store import SessionStore
from vigil.testing.fake_model import FakeModelServer

WORKER = Path(__file__).with_name("worker.py")
MINUTES = 10


def test_three_processes_run_each_occurrence_exactly_once(
    fake_model: FakeModelServer, shared_store: SessionStore, store_location: str, profile: Profile,
    clock: FakeClock, vigil_home: Path,
) -> None:
    store, repo = shared_store, CronRepo(shared_store, clock)
    for n in range(6):
        for name, schedule in ((f"every-minute-{n}", "every 1m"), (f"even-minutes-{n}", "*/2 * * * *")):
            spec = JobSpec(schedule=schedule, prompt="do the thing", tz="UTC")
            repo.add(new_job(name, spec, now=clock.now(), default_tz="UTC", skills_dir=profile.skills_dir))
    expected = {
        **{f"every-minute-{n}": {START + 60 * m for m in range(1, MINUTES + 1)} for n in range(6)},
        **{f"even-minutes-{n}": {START + 60 * m for m in range(2, MINUTES + 1, 2)} for n in range(6)},
    }
    env = {**os.environ, "VIGIL_HOME": str(vigil_home)}
    workers = [
        subprocess.Popen(
            [sys.executable, str(WORKER), fake_model.base_url, fake_model.api_key, store_location],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )
        for _ in range(3)
    ]
    owners_that_ran: set[str] = set()
    try:
        for worker in workers:
            assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
        for minute in range(1, MINUTES + 1):
            for worker in workers:
                assert worker.stdin is not None
                worker.stdin.write(f"tick {START + 60 * minute}\n")
                worker.stdin.flush()
            for worker in workers:
                assert worker.stdout is not None
                _, runs, owner = worker.stdout.readline().split()
                if int(runs):
                    owners_that_ran.add(owner)
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write("quit\n")
            worker.stdin.flush()
        for worker in workers:
            assert worker.wait(timeout=20) == 0, worker.stderr.read() if worker.stderr else ""
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()

    seen: dict[str, list[float]] = {}
    for record in repo.runs.list():
        assert record.status == "ok", record
        seen.setdefault(record.job, []).append(record.occurrence or 0)
    assert {job: sorted(times) for job, times in seen.items()} == {job: sorted(t) for job, t in expected.items()}
    total = sum(len(t) for t in expected.values())
    assert len(store.list_sessions(source="cron")) == total == len(fake_model.requests)
    assert len(owners_that_ran) >= 2  # the work really was shared
