"""Two real processes run the engine for the same heartbeat on one state.db: every slot fires
exactly once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from vigil.schedule.heartbeat import Heartbeat, heartbeat_key
from vigil.store import SQLiteStore

SID = "aaaaaaaaaaaa"
FACTOR = 240.0  # a 60 s interval passes in a quarter of a real second
RUN_SECONDS = 2.5


def test_two_processes_fire_each_slot_exactly_once(db_path: Path) -> None:
    store = SQLiteStore(db_path)
    origin_fake = 1_800_000_000.0
    heartbeat = Heartbeat.create(SID, "watch", 60, origin_fake)
    store.set_meta(heartbeat_key(SID), heartbeat.to_json())
    origin_real = time.time() + 0.8  # both processes are up before the shared clock starts
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "src")])}
    args = [str(db_path), SID, repr(origin_real), repr(origin_fake), repr(FACTOR), repr(RUN_SECONDS)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.schedule.mp_worker", *args],
            cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=60) for p in procs]
    for proc, (_, err) in zip(procs, outputs):
        assert proc.returncode == 0, err
    fires = sorted(
        (json.loads(line) for out, _ in outputs for line in out.splitlines() if line.strip()),
        key=lambda f: f["count"],
    )
    final = Heartbeat.from_json(store.get_meta(heartbeat_key(SID)).value)
    store.close()

    counts = [f["count"] for f in fires]
    assert counts == list(range(1, len(fires) + 1)), "a slot fired twice or was skipped"
    assert len(fires) >= 4 and final.fire_count == len(fires) and final.pending is None
    times = [f["at"] for f in fires]
    assert all(later - earlier >= 60 for earlier, later in zip(times, times[1:])), fires
    assert len({f["owner"] for f in fires}) in (1, 2)
