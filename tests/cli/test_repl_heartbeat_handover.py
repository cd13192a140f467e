"""A real `vigil chat` REPL runs its conversation's heartbeat, is killed with SIGKILL, and a
gateway-like process (``tests.schedule.heartbeat.lease_worker``) takes the heartbeat over once the dead
REPL's lease has lapsed. Every slot fires once, in one process or the other."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pexpect
import pytest

from tests.cli.helpers import expect_in_terminal
from vigil.profiles import get_profile
from vigil.schedule.heartbeat.record import Heartbeat, heartbeat_key
from vigil.schedule.intervals import TEST_MINIMUM_ENV
from vigil.schedule.polling import TEST_POLL_ENV
from vigil.store import open_store
from vigil.testing.fake_model import FakeModelServer

ROOT = Path(__file__).resolve().parents[2]
LEASE = 3.0  # the gateway's lease, in seconds (it renews and looks every second)


def _gateway(db: Path) -> subprocess.Popen[str]:
    """A gateway-like process on the real clock that adopts every free heartbeat."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")])}
    now = repr(time.time())
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.schedule.heartbeat.lease_worker", str(db), "-", now, "1", "gateway", now, "600", repr(LEASE)],
        cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None and proc.stdin is not None
    assert "ready" in proc.stdout.readline(), proc.communicate(timeout=30)[1]
    proc.stdin.write(f"{now}\n")
    proc.stdin.flush()
    return proc


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal and SIGKILL")
def test_a_killed_repls_heartbeat_is_taken_over_by_the_gateway(fake_model: FakeModelServer, vigil_home: Path) -> None:
    fake_model.rule(contains="[Heartbeat — recurring instruction", reply="Nothing new.")
    env = {
        **os.environ,
        "VIGIL_HOME": str(vigil_home),
        "OPENAI_BASE_URL": fake_model.base_url,
        "OPENAI_API_KEY": fake_model.api_key,
        TEST_MINIMUM_ENV: "1",
        TEST_POLL_ENV: "1",  # the REPL renews every second; its lease lapses 3 s after the last renewal
        "TERM": "xterm",
    }
    child = pexpect.spawn(
        sys.executable, ["-m", "vigil.cli.main", "chat"], env=env, encoding="utf-8", timeout=20, dimensions=(30, 120)
    )
    gateway = None
    try:
        expect_in_terminal(child, "you ›")
        child.sendline("hello")
        expect_in_terminal(child, "ok")
        expect_in_terminal(child, "you ›")
        child.sendline("/hb every 2s check the CI run")
        expect_in_terminal(child, r"♥ Heartbeat set \(every 2s\)")
        gateway = _gateway(get_profile(None).state_db)
        expect_in_terminal(child, "Nothing new.")  # the REPL fires it, not the gateway
        expect_in_terminal(child, "Nothing new.")
        child.kill(signal.SIGKILL)
        child.wait()
        killed_at = time.time()
        assert gateway.stdout is not None
        fires = []
        while len([f for f in fires if f["at"] > killed_at]) < 2:
            line = gateway.stdout.readline()
            assert line, gateway.communicate(timeout=10)[1]
            fires.append(json.loads(line))
    finally:
        child.close(force=True)
        if gateway is not None:
            gateway.kill()
            gateway.wait()
    store = open_store(get_profile(None).state_db)
    try:
        [entry] = store.list_meta("heartbeat:")
        final = Heartbeat.from_json(entry.value)
    finally:
        store.close()
    assert all(f["at"] > killed_at for f in fires), fires  # nothing fired in the gateway while the REPL lived
    counts = [f["count"] for f in fires]
    # the REPL fired slots 1..k; the gateway carries on with k+1, k+2 ... and no slot twice
    assert counts[0] >= 3 and counts == list(range(counts[0], counts[0] + len(counts))), fires
    assert final.fire_count >= counts[-1]
    assert heartbeat_key(final.session_id) == entry.key
