"""SIGTERM, SIGHUP and SIGINT to real `vigil` processes while a tool's command runs.

Each must stop the command's whole process group, give every stored tool call a result,
record a cron run as interrupted with its session ended, and exit 128 + the signal number.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Iterator

import pexpect
import pytest

from vigil.store import SQLiteStore
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply, ToolCallSpec

SIGNALS = [signal.SIGTERM, signal.SIGHUP, signal.SIGINT]
BOUND = 30.0
"""Seconds any wait here may take before the test fails (the tool would sleep 30 s more)."""


def _env(server: FakeModelServer, home: Path) -> dict[str, str]:
    return {**os.environ, "VIGIL_HOME": str(home), "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": server.api_key}


def _pgrep(*args: str) -> list[int]:
    found = subprocess.run(["pgrep", *args], capture_output=True, text=True)
    return [int(pid) for pid in found.stdout.split()]


@pytest.fixture
def marker(tmp_path: Path) -> Iterator[str]:
    """A unique word in the tool's command line, to find its processes; any left are killed."""
    word = f"vigil-signal-test-{uuid.uuid4().hex[:12]}"
    yield word
    for pid in _pgrep("-f", word):
        try:
            os.killpg(os.getpgid(pid), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _script_long_command(server: FakeModelServer, marker: str, workdir: Path) -> None:
    command = f"sh -c 'sleep 30; echo done > {workdir}/{marker}' {marker}"
    server.queue(
        Reply.tool_calls(ToolCallSpec("terminal", {"command": command}, id="call_long")),
        "The command finished.",
    )


def _wait_for_tool(marker: str, process_alive) -> int:  # type: ignore[no-untyped-def]
    """The process group of the running tool command, once it is there."""
    deadline = time.monotonic() + BOUND
    while time.monotonic() < deadline:
        pids = _pgrep("-f", marker)
        if pids:
            return os.getpgid(pids[0])
        assert process_alive(), "vigil exited before the tool started"
        time.sleep(0.05)
    raise AssertionError("the tool's command never started")


def _living(pids: list[int]) -> list[int]:
    """Those of ``pids`` still running (a zombie has exited; it only waits to be reaped)."""
    alive = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in ("Z", "X"):
            alive.append(pid)
    return alive


def _assert_no_survivors(marker: str, group: int) -> None:
    """Nothing of the tool's command runs: neither the shells naming the marker nor the
    ``sleep`` in their process group. SIGKILL takes effect asynchronously, hence the wait."""
    deadline = time.monotonic() + 10
    while (left := _living(_pgrep("-f", marker) + _pgrep("-g", str(group)))) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left == [], subprocess.run(["ps", "-o", "pid,stat,cmd", "-p", ",".join(map(str, left))],
                                      capture_output=True, text=True).stdout


def _assert_every_call_answered(home: Path, session_id: str) -> None:
    store = SQLiteStore(home / "state.db")
    try:
        messages = store.get_messages(session_id)
    finally:
        store.close()
    calls = [call.id for m in messages for call in m.tool_calls]
    results = [m.tool_call_id for m in messages if m.role == "tool"]
    assert calls == ["call_long"] and results == calls
    assert "interrupted" in messages[-1].content


def _session_of(home: Path, source: str) -> tuple[str, str | None]:
    store = SQLiteStore(home / "state.db")
    try:
        sessions = [s for s in store.list_sessions() if s.source == source]
        assert len(sessions) == 1
        return sessions[0].id, sessions[0].end_reason
    finally:
        store.close()


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_chat_q_stops_the_tool_and_answers_its_call(
    fake_model: FakeModelServer, vigil_home: Path, tmp_path: Path, marker: str, sig: signal.Signals
) -> None:
    _script_long_command(fake_model, marker, tmp_path)
    vigil = subprocess.Popen(
        [sys.executable, "-m", "vigil.cli.main", "chat", "-q", "run the long command"],
        env=_env(fake_model, vigil_home), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        group = _wait_for_tool(marker, lambda: vigil.poll() is None)
        vigil.send_signal(sig)
        _, err = vigil.communicate(timeout=BOUND)
    finally:
        if vigil.poll() is None:
            vigil.kill()
    assert vigil.returncode == 128 + sig, err
    assert f"Stopped by {sig.name}" in err and "Traceback" not in err
    _assert_no_survivors(marker, group)
    session_id, _ = _session_of(vigil_home, "cli")
    assert f"session {session_id} is kept" in err
    _assert_every_call_answered(vigil_home, session_id)
    assert not (tmp_path / marker).exists()
    assert len(fake_model.requests) == 1  # stopped: the model was not asked to go on


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_cron_run_is_recorded_interrupted_and_its_session_ended(
    fake_model: FakeModelServer, vigil_home: Path, tmp_path: Path, marker: str, sig: signal.Signals
) -> None:
    env = _env(fake_model, vigil_home)
    added = subprocess.run(
        [sys.executable, "-m", "vigil.cli.main", "cron", "add", "long", "--schedule", "every 1h",
         "--prompt", "run the long command", "--workdir", str(tmp_path)],
        env=env, capture_output=True, text=True, timeout=BOUND,
    )
    assert added.returncode == 0, added.stderr
    _script_long_command(fake_model, marker, tmp_path)
    vigil = subprocess.Popen(
        [sys.executable, "-m", "vigil.cli.main", "cron", "run", "long"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        group = _wait_for_tool(marker, lambda: vigil.poll() is None)
        vigil.send_signal(sig)
        _, err = vigil.communicate(timeout=BOUND)
    finally:
        if vigil.poll() is None:
            vigil.kill()
    assert vigil.returncode == 128 + sig, err
    assert "recorded as interrupted" in err and "Traceback" not in err
    _assert_no_survivors(marker, group)

    runs = subprocess.run(
        [sys.executable, "-m", "vigil.cli.main", "cron", "runs", "long", "--json"],
        env=env, capture_output=True, text=True, timeout=BOUND,
    )
    [run] = json.loads(runs.stdout)
    assert run["status"] == "interrupted" and run["finished_at"] is not None
    session_id, end_reason = _session_of(vigil_home, "cron")
    assert run["session_id"] == session_id and end_reason == "interrupted"
    _assert_every_call_answered(vigil_home, session_id)
    status = subprocess.run(
        [sys.executable, "-m", "vigil.cli.main", "cron", "status", "--json"],
        env=env, capture_output=True, text=True, timeout=BOUND,
    )
    assert json.loads(status.stdout)["running"] == []


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_the_repl_stops_cleanly_on_sigterm_and_sighup(
    fake_model: FakeModelServer, vigil_home: Path, tmp_path: Path, marker: str, sig: signal.Signals
) -> None:
    _script_long_command(fake_model, marker, tmp_path)
    env = {**_env(fake_model, vigil_home), "TERM": "xterm", "COLUMNS": "100", "LINES": "30"}
    child = pexpect.spawn(
        sys.executable, ["-m", "vigil.cli.main", "chat"], env=env, cwd=str(tmp_path),
        encoding="utf-8", timeout=BOUND, dimensions=(30, 100),
    )
    try:
        child.expect("you ›")
        child.sendline("run the long command")
        group = _wait_for_tool(marker, child.isalive)
        child.kill(sig)
        child.expect(pexpect.EOF)
        child.close()
    finally:
        if child.isalive():
            child.terminate(force=True)
    assert child.exitstatus == 128 + sig, child.before
    _assert_no_survivors(marker, group)
    session_id, _ = _session_of(vigil_home, "cli")
    _assert_every_call_answered(vigil_home, session_id)


def test_the_gateway_reloads_on_sighup_and_stops_gracefully_on_sigterm(
    fake_model: FakeModelServer, vigil_home: Path
) -> None:
    """`gateway run` is a service: SIGHUP re-reads its configuration, and a stop signal is its
    normal end, so it exits 0 (the commands above are cut short, hence 128 + signal)."""
    from tests.gateway.process import free_port

    gateway = subprocess.Popen(
        [sys.executable, "-m", "vigil.cli.main", "gateway", "run", "--web-port", str(free_port())],
        env=_env(fake_model, vigil_home), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert gateway.stdout is not None
        assert "the cron scheduler" in gateway.stdout.readline()
        gateway.send_signal(signal.SIGHUP)
        while "SIGHUP" not in (line := gateway.stdout.readline()):
            assert line, "the gateway ended on SIGHUP"
        assert "reloaded" in line and gateway.poll() is None
        gateway.send_signal(signal.SIGTERM)
        gateway.wait(BOUND)
        out, err = gateway.stdout.read(), gateway.stderr.read() if gateway.stderr else ""
    finally:
        if gateway.poll() is None:
            gateway.kill()
    assert gateway.returncode == 0, err
    assert "vigil gateway: stopped" in out


def test_cron_tick_stops_like_cron_run(
    fake_model: FakeModelServer, vigil_home: Path, tmp_path: Path, marker: str
) -> None:
    from tests.schedule.cron.conftest import START

    env = _env(fake_model, vigil_home)
    added = subprocess.run(
        [sys.executable, "-m", "vigil.cli.main", "cron", "add", "hourly", "--schedule", "every 1h",
         "--prompt", "run the long command", "--workdir", str(tmp_path)],
        env={**env, "VIGIL_CRON_NOW": str(START)}, capture_output=True, text=True, timeout=BOUND,
    )
    assert added.returncode == 0, added.stderr
    _script_long_command(fake_model, marker, tmp_path)
    vigil = subprocess.Popen(
        [sys.executable, "-m", "vigil.cli.main", "cron", "tick"], env={**env, "VIGIL_CRON_NOW": str(START + 3600)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        group = _wait_for_tool(marker, lambda: vigil.poll() is None)
        vigil.send_signal(signal.SIGTERM)
        _, err = vigil.communicate(timeout=BOUND)
    finally:
        if vigil.poll() is None:
            vigil.kill()
    assert vigil.returncode == 143 and "recorded as interrupted" in err and "Traceback" not in err
    _assert_no_survivors(marker, group)
    session_id, end_reason = _session_of(vigil_home, "cron")
    assert end_reason == "interrupted"
    _assert_every_call_answered(vigil_home, session_id)
    runs = subprocess.run(
        [sys.executable, "-m", "vigil.cli.main", "cron", "runs", "hourly", "--json"],
        env={**env, "VIGIL_CRON_NOW": str(START + 3600)}, capture_output=True, text=True, timeout=BOUND,
    )
    assert [r["status"] for r in json.loads(runs.stdout)] == ["interrupted"]


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_chat_q_stops_a_command_running_in_a_sandbox(
    fake_model: FakeModelServer, vigil_home: Path, tmp_path: Path, marker: str
) -> None:
    # chat -q without a terminal is unattended: vigil runs the command in its bubblewrap sandbox,
    # with its own session and PID namespace, so killing the launched process group alone would
    # not reach inside.
    _script_long_command(fake_model, marker, tmp_path)
    vigil = subprocess.Popen(
        [sys.executable, "-m", "vigil.cli.main", "chat", "-q", "run the long command"],
        env=_env(fake_model, vigil_home), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        group = _wait_for_tool(marker, lambda: vigil.poll() is None)
        deadline = time.monotonic() + BOUND
        while len(_pgrep("-f", marker)) < 3 and time.monotonic() < deadline:  # bwrap, bash, sh inside
            time.sleep(0.05)
        assert "bwrap" in {Path(f"/proc/{pid}/comm").read_text().strip() for pid in _pgrep("-f", marker)}
        vigil.send_signal(signal.SIGTERM)
        _, err = vigil.communicate(timeout=BOUND)
    finally:
        if vigil.poll() is None:
            vigil.kill()
    assert vigil.returncode == 143, err
    _assert_no_survivors(marker, group)
    session_id, _ = _session_of(vigil_home, "cli")
    _assert_every_call_answered(vigil_home, session_id)
