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
INTERVAL = 60
FACTOR = 120.0  # a 60 s interval passes in half a real second
RUN_SECONDS = 3.2
LATE = 30.0
"""How late (fake seconds, a quarter of a real second) a fire may be: well under an interval,
so a lost slot (a gap of two intervals) or a double fire can never pass for lateness."""


def test_two_processes_fire_each_slot_exactly_once(db_path: Path) -> None:
    store = SQLiteStore(db_path)
    origin_fake = 1_800_000_000.0
    heartbeat = Heartbeat.create(SID, "watch", INTERVAL, origin_fake)
    store.set_meta(heartbeat_key(SID), heartbeat.to_json())
    origin_real = time.time() + 1.0  # both processes are up before the shared clock starts
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
    lines = [json.loads(line) for out, _ in outputs for line in out.splitlines() if line.strip()]
    fires = sorted((line for line in lines if "count" in line), key=lambda f: f["count"])
    done = [line for line in lines if "done" in line]
    final = Heartbeat.from_json(store.get_meta(heartbeat_key(SID)).value)
    store.close()

    # both processes ran the engine for the whole run, from before the first slot
    assert len(done) == 2 and len({d["done"] for d in done}) == 2
    assert all(d["started_at"] < origin_fake + INTERVAL for d in done), done

    # Every slot that elapsed fired exactly once, on time. The slots form a chain: the first
    # is due one interval after creation, each next one an interval after the previous fire.
    assert [f["count"] for f in fires] == list(range(1, len(fires) + 1)), fires
    due = origin_fake + INTERVAL
    for fire in fires:
        assert fire["due"] == due and due <= fire["at"] < due + LATE, (fire, due)
        due = fire["at"] + INTERVAL
    # ... and the slot after the last fire had not yet elapsed when the engines stopped
    end = max(d["stopped_at"] for d in done)
    assert due > end - LATE, f"a slot due at {due} never fired (stopped at {end})"
    elapsed_slots = (end - origin_fake) // INTERVAL
    assert elapsed_slots - 1 <= len(fires) <= elapsed_slots and len(fires) >= 5

    assert final.fire_count == len(fires) and final.pending is None
    assert sum(d["confirmed"] for d in done) == sum(d["claims"] for d in done) == len(fires)
    # each engine came due for every slot (the loser's claim finds the slot taken)
    assert all(d["engine_fired"] >= len(fires) for d in done), done
