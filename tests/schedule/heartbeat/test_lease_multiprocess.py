"""Real processes: a gateway runs a heartbeat, a REPL opens the conversation and takes it over,
the REPL is killed with SIGKILL and the gateway takes it back. Every slot fires once (on SQLite
and on PostgreSQL)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from vigil.schedule.heartbeat.record import Heartbeat, heartbeat_key
from vigil.store import open_store

SID = "aaaaaaaaaaaa"
INTERVAL = 60
FACTOR = 60.0  # a 60 s interval passes in one real second
LEASE = 120.0  # fake seconds: two real seconds
OPEN_AT = 150.0  # the REPL opens the conversation 2.5 real seconds in
RUN_SECONDS = 12.0


def _spawn(root: Path, env: dict[str, str], args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.schedule.heartbeat.lease_worker", *args],
        cwd=root, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def test_a_killed_repls_heartbeat_goes_back_to_the_gateway_and_no_slot_fires_twice(store_location: str) -> None:
    store = open_store(store_location)
    origin_fake = 1_800_000_000.0
    store.set_meta(heartbeat_key(SID), Heartbeat.create(SID, "watch", INTERVAL, origin_fake).to_json())
    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "src")])}
    common = [store_location, SID, repr(origin_fake), repr(FACTOR)]
    gateway = _spawn(root, env, [*common, "gateway", repr(origin_fake), repr(RUN_SECONDS), repr(LEASE)])
    repl = _spawn(root, env, [*common, "repl", repr(origin_fake + OPEN_AT), repr(RUN_SECONDS), repr(LEASE)])
    try:
        for proc in (gateway, repl):
            assert proc.stdout is not None
            ready = proc.stdout.readline()
            assert "ready" in ready, proc.communicate(timeout=60)[1]
        origin_real = time.time() + 0.2
        for proc in (gateway, repl):
            assert proc.stdin is not None
            proc.stdin.write(f"{origin_real!r}\n")
            proc.stdin.flush()
        repl_lines = []
        assert repl.stdout is not None
        while sum("count" in line for line in repl_lines) < 2:
            line = repl.stdout.readline()
            assert line, repl.communicate(timeout=10)[1]
            repl_lines.append(json.loads(line))
        repl.send_signal(signal.SIGKILL)  # no release, no clean-up: its lease must lapse
        repl.wait(timeout=10)
        killed_at = origin_fake + (time.time() - origin_real) * FACTOR
        out, err = gateway.communicate(timeout=60)
        assert gateway.returncode == 0, err
    finally:
        for proc in (gateway, repl):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    gateway_lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    fires = sorted((f for f in repl_lines + gateway_lines if "count" in f), key=lambda f: f["count"])
    final = Heartbeat.from_json(store.get_meta(heartbeat_key(SID)).value)
    store.close()

    # every slot fired exactly once, in one process or the other
    assert [f["count"] for f in fires] == list(range(1, len(fires) + 1)), fires
    assert final.fire_count == len(fires)
    by_gateway = [f for f in fires if f["kind"] == "gateway"]
    by_repl = [f for f in fires if f["kind"] == "repl"]
    opened = next(line["opened"] for line in repl_lines if "opened" in line)
    # the gateway ran it first, the REPL took it over, and the gateway got it back after the kill
    assert any(f["at"] < opened for f in by_gateway), fires
    assert len(by_repl) == 2
    assert not [f for f in by_gateway if by_repl[0]["at"] < f["at"] < killed_at], fires
    assert len([f for f in by_gateway if f["at"] > killed_at]) >= 3, fires
