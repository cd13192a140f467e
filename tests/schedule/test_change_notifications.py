"""On PostgreSQL a schedule change made by one process reaches the schedulers of another at
once (LISTEN/NOTIFY), not at their next poll: here the other process polls once a minute and
still runs a new cron job and a new heartbeat due a second after they are made."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.schedule.notify_worker import POLL
from vigil.schedule.cron.jobs import JobSpec, new_job
from vigil.schedule.cron.repo import CronRepo
from vigil.schedule.heartbeat.repo import HeartbeatRepo
from vigil.schedule.polling import TEST_POLL_ENV
from vigil.store import open_store

pytestmark = pytest.mark.postgres
SID = "aaaaaaaaaaaa"
BEFORE_THE_POLL = POLL / 2  # real seconds: the guard, well before the worker's first poll


def test_a_change_made_elsewhere_is_seen_before_the_next_poll(pg_url: str) -> None:
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k != TEST_POLL_ENV}
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(root / "src")])
    worker = subprocess.Popen(
        [sys.executable, "-m", "tests.schedule.notify_worker", pg_url, SID],
        cwd=root, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    lines: queue.Queue[dict[str, str]] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(json.loads(line)) for line in worker.stdout or ()], daemon=True).start()
    store = open_store(pg_url)
    try:
        assert "ready" in lines.get(timeout=60), worker.stderr.read() if worker.stderr else ""
        started = time.monotonic()
        now = time.time()
        CronRepo(store).add(new_job("nightly", JobSpec("every 1m", "report"), now=now - 59, default_tz="UTC",
                                    skills_dir=None))  # first due a second from now
        HeartbeatRepo(store).set(SID, "anything new?", 1)  # due a second from now
        heard: set[str] = set()
        while heard != {"cron:nightly", f"heartbeat:{SID}"}:
            left = BEFORE_THE_POLL - (time.monotonic() - started)
            assert left > 0, f"only {heard or 'nothing'} ran before the worker's poll"
            try:
                line = lines.get(timeout=left)
            except queue.Empty:
                continue
            heard |= {f"{kind}:{name}" for kind, name in line.items()}
    finally:
        store.close()
        if worker.stdin is not None:
            worker.stdin.close()
        try:
            worker.wait(timeout=30)
        finally:
            if worker.poll() is None:
                worker.kill()
    assert worker.returncode == 0, worker.stderr.read() if worker.stderr else ""
