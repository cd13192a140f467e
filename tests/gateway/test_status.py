"""The status record a gateway keeps fresh, and `vigil gateway status` reading it with the lock."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cli.helpers import run_cli
from tests.cli.test_startup_imports import run_fresh
from vigil.clock import FakeClock, SystemClock
from vigil.gateway.lock import acquire
from vigil.gateway.status import STATUS_KEY, StatusKeeper, read_status
from vigil.gateway.token import read_token
from vigil.profiles import get_profile
from vigil.store import SQLiteStore, StoreError, open_store

# A stand-in for the gateway process: it takes the lock, keeps the status record fresh as the
# gateway does, and on SIGTERM writes "stopped" and exits.
KEEPER = r"""
import asyncio, signal, time
from vigil.clock import SystemClock
from vigil.gateway.lock import acquire
from vigil.gateway.status import StatusKeeper
from vigil.gateway.token import load_or_create_token
from vigil.profiles import get_profile
from vigil.store import open_store

NEXT_CRON = time.time() + 2 * 3600

def snapshot():
    return {"url": "http://127.0.0.1:8787/", "live_conversations": 3, "armed_heartbeats": 2,
            "next_cron_run": NEXT_CRON,
            "adapters": [{"name": "web", "ok": True, "detail": "serving"},
                         {"name": "slack", "ok": False, "detail": "token revoked"}]}

async def main():
    profile = get_profile(None)
    lock = acquire(profile)
    store = open_store(profile.state_db)
    load_or_create_token(profile)
    keeper = StatusKeeper(store, SystemClock(), snapshot)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    keeper.write("running")
    print("ready", flush=True)
    task = asyncio.create_task(keeper.run(interval=0.2))
    await stop.wait()
    task.cancel()
    keeper.write("stopped")
    store.close()
    lock.release()

asyncio.run(main())
"""


@pytest.fixture
def gateway_like(vigil_home: Path):
    process = subprocess.Popen([sys.executable, "-c", KEEPER], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    assert process.stdout.readline() == "ready\n"
    yield process
    if process.poll() is None:
        process.kill()
        process.wait(timeout=30)


def _status(*args: str) -> tuple[int, str]:
    result = run_cli("gateway", "status", *args)
    return result.exit_code, result.output


def test_status_of_a_running_gateway(gateway_like: subprocess.Popen[str], vigil_home: Path) -> None:
    token = read_token(get_profile(None))
    assert token
    code, text = _status()
    assert code == 0, text
    assert re.match(rf"vigil gateway: running \(pid {gateway_like.pid} on \S+, since \d{{4}}-\d\d-\d\d \d\d:\d\d", text)
    assert "\n  web chat:           http://127.0.0.1:8787/\n" in text
    assert f"\n  login URL:          http://127.0.0.1:8787/login?token={token}\n" in text
    assert "\n  adapters:           web connected (serving); slack stopped (token revoked)\n" in text
    assert "\n  live conversations: 3\n" in text
    assert "\n  armed heartbeats:   2\n" in text
    assert re.search(r"\n  next cron run:      \d{4}-\d\d-\d\d \d\d:\d\d \(in (1h59m|2h)\)\n", text)

    code, raw = _status("--json")
    assert code == 0
    status = json.loads(raw)
    assert status["running"] is True and status["state"] == "running"
    assert status["pid"] == gateway_like.pid
    assert status["url"] == "http://127.0.0.1:8787/"
    assert status["login_url"] == f"http://127.0.0.1:8787/login?token={token}"
    assert status["token"] == token
    assert status["adapters"][0] == {"name": "web", "ok": True, "detail": "serving", "state": "connected",
                                     "since": None, "last_error": None}
    assert (status["live_conversations"], status["armed_heartbeats"]) == (3, 2)
    assert status["next_cron_run"] > time.time()
    assert status["started_at"] <= status["updated_at"] <= time.time()


def test_a_gateway_stopped_with_sigterm_reads_as_stopped(gateway_like: subprocess.Popen[str]) -> None:
    gateway_like.send_signal(signal.SIGTERM)
    assert gateway_like.wait(timeout=30) == 0
    code, text = _status()
    assert code == 3
    assert text.startswith("vigil gateway: not running (stopped at ")
    assert "vigil gateway run" in text and "login URL" not in text
    status = json.loads(_status("--json")[1])
    assert status["running"] is False and status["login_url"] is None and status["live_conversations"] is None


def test_a_killed_gateway_reads_as_last_seen_however_fresh_its_record(gateway_like: subprocess.Popen[str]) -> None:
    gateway_like.kill()
    gateway_like.wait(timeout=30)
    code, text = _status()
    assert code == 3
    assert text.startswith("vigil gateway: not running (last seen ")
    assert "Start it with `vigil gateway run`" in text
    assert json.loads(_status("--json")[1])["state"] == "not running"


def test_status_before_any_gateway_ran_says_how_to_start_one(vigil_home: Path) -> None:
    code, text = _status()
    assert code == 3
    assert text.splitlines()[0] == "vigil gateway: not running (no gateway has run for this profile)."
    assert "`vigil gateway run`" in text and "`vigil gateway install`" in text
    assert run_cli("profile", "create", "work").exit_code == 0
    named = run_cli("-p", "work", "gateway", "status")
    assert named.exit_code == 3 and "`vigil -p work gateway run`" in named.output
    assert json.loads(_status("--json")[1])["running"] is False


def test_status_help_documents_its_exit_codes() -> None:
    text = run_cli("gateway", "status", "--help").output
    assert re.search(r"0\s+the gateway runs", text) and re.search(r"3\s+it does not", text)


def test_status_loads_no_web_server_metrics_or_model_sdk(vigil_home: Path, tmp_path: Path) -> None:
    ran = run_fresh("gateway", "status", home=vigil_home, tmp_path=tmp_path)
    assert ran.code == 3, ran.stderr
    assert ran.loaded("starlette", "uvicorn", "prometheus_client", "openai", "anthropic", "httpx") == []


# -- the record, in one process --------------------------------------------------------------

def _snapshot() -> dict[str, Any]:
    return {"url": "http://127.0.0.1:8787/", "live_conversations": 1, "armed_heartbeats": 0, "next_cron_run": None}


def test_the_record_is_believed_only_while_fresh_and_locked(vigil_home: Path) -> None:
    profile = get_profile(None)
    store = open_store(profile.state_db)
    clock = FakeClock()
    try:
        with acquire(profile):
            keeper = StatusKeeper(store, clock, _snapshot)
            written = keeper.write()
            assert store.get_meta(STATUS_KEY).value == written
            fresh = read_status(store, profile, now=clock.now() + 1)
            assert fresh.running and fresh.state == "running" and fresh.value("live_conversations") == 1
            keeper.write("stopping")
            assert read_status(store, profile, now=clock.now()).state == "stopping"
            hung = read_status(store, profile, now=clock.now() + 3600)
            assert not hung.running and hung.state == "unresponsive"
            assert "last written at" in hung.summary
        gone = read_status(store, profile, now=clock.now() + 1)
        assert not gone.running and gone.summary.startswith("not running (last seen ")
        with pytest.raises(ValueError):
            keeper.write("sleeping")  # type: ignore[arg-type]
    finally:
        store.close()


def test_a_lock_holder_that_has_not_written_its_own_record_is_not_running(vigil_home: Path) -> None:
    profile = get_profile(None)
    store = open_store(profile.state_db)
    try:
        # The record of an earlier gateway, fresh, but not written by the process holding the lock:
        store.set_meta(STATUS_KEY, {"pid": 1, "updated_at": time.time(), "interval": 5.0, "state": "running"})
        with acquire(profile):
            status = read_status(store, profile, now=time.time())
            assert not status.running and status.state == "unresponsive"
            assert "has not written its status yet" in status.summary
    finally:
        store.close()


class _FailingWrites:
    """A real store whose first ``failures`` writes of the status record raise, as a store that
    is briefly unreachable does."""

    def __init__(self, store: SQLiteStore, failures: int) -> None:
        self._store, self.failures = store, failures

    def set_meta(self, key: str, value: Any) -> None:
        if self.failures:
            self.failures -= 1
            raise StoreError("database is locked")
        self._store.set_meta(key, value)


async def _until(condition: Any) -> None:
    for _ in range(2000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the condition never held")


async def test_the_keeper_outlives_store_and_snapshot_failures(vigil_home: Path, caplog: pytest.LogCaptureFixture) -> None:
    profile = get_profile(None)
    store = open_store(profile.state_db)
    snapshots = {"calls": 0}

    def flaky_snapshot() -> dict[str, Any]:
        snapshots["calls"] += 1
        if snapshots["calls"] == 4:
            raise RuntimeError("adapter table is being rebuilt")
        return {**_snapshot(), "live_conversations": snapshots["calls"]}

    failing = _FailingWrites(store, failures=3)
    keeper = StatusKeeper(failing, SystemClock(), flaky_snapshot)  # type: ignore[arg-type]
    caplog.set_level(logging.WARNING, logger="vigil.gateway.status")
    task = asyncio.create_task(keeper.run(interval=0.01))
    try:
        await _until(lambda: (entry := store.get_meta(STATUS_KEY)) is not None and entry.value["live_conversations"] >= 6)
        assert not task.done()
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        store.close()
    messages = [record.getMessage() for record in caplog.records]
    assert messages[0] == "gateway status: cannot write the status record (will retry): database is locked"
    assert "gateway status: the status record is written again" in messages
    assert any("adapter table is being rebuilt" in message for message in messages)
    assert len(messages) <= 4  # a failure is reported when it starts, not at every retry


from hypothesis import given, strategies as st  # noqa: E402

from vigil.gateway.status import adapter_entry, adapter_line  # noqa: E402

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


@given(st.dictionaries(st.sampled_from(["name", "ok", "detail", "state", "since", "last_error", "x"]), _json))
def test_any_adapter_entry_of_a_damaged_record_shows_as_one_line(raw: dict) -> None:
    entry = adapter_entry(raw)
    assert set(entry) == {"name", "ok", "detail", "state", "since", "last_error"}
    line = adapter_line(raw, now=2_000_000_000.0)
    assert " ".join(entry["state"].split()) in line and "\n" not in line and line.strip() == line


def test_adapter_lines_say_state_since_and_last_error() -> None:
    now = 2_000_000_000.0
    assert adapter_line({"name": "web", "ok": True, "detail": "2 page(s) open"}, now) == "web connected (2 page(s) open)"
    retrying = adapter_line({"name": "telegram", "ok": False, "state": "retrying", "since": now - 300,
                             "last_error": "502 Bad Gateway", "detail": "502 Bad Gateway"}, now)
    assert retrying.startswith("telegram retrying since ") and retrying.endswith(", 5m ago — last error: 502 Bad Gateway")
    assert adapter_line({"name": "slack", "ok": False, "state": "misconfigured",
                         "last_error": "SLACK_BOT_TOKEN is not set"}, now) == (
        "slack misconfigured — last error: SLACK_BOT_TOKEN is not set")
