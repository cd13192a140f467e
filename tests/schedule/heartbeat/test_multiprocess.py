"""Two real processes run the engine for the same heartbeat on one store (SQLite and PostgreSQL):
every slot fires exactly once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from vigil.schedule.heartbeat.record import Heartbeat, heartbeat_key
from vigil.store import open_store

SID = "aaaaaaaaaaaa"
INTERVAL = 60
FACTOR = 60.0  # a 60 s interval passes in one real second
RUN_SECONDS = 6.2
LATE = 30.0
"""How late (fake seconds, half a real second) a fire may be: well under an interval, so a
lost slot (a gap of two intervals) or a double fire can never pass for lateness."""


def test_two_processes_fire_each_slot_exactly_once(store_location: str) -> None:
    store = open_store(store_location)
    origin_fake = 1_800_000_000.0
    heartbeat = Heartbeat.create(SID, "watch", INTERVAL, origin_fake)
    store.set_meta(heartbeat_key(SID), heartbeat.to_json())
    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "src")])}
    args = [store_location, SID, repr(origin_fake), repr(FACTOR), repr(RUN_SECONDS)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.schedule.heartbeat.mp_worker", *args],
            cwd=root, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for _ in range(2)
    ]
    # The shared clock starts once both processes are up, however long their start-up took.
    for proc in procs:
        assert proc.stdout is not None and proc.stdin is not None
        ready = proc.stdout.readline()
        assert "ready" in ready, proc.communicate(timeout=60)[1]
    origin_real = time.time() + 0.2
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(f"{origin_real!r}\n")
        proc.stdin.flush()
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
