"""`vigil heartbeat list` and `status` say who runs each heartbeat: the REPL that has the
conversation open, the gateway, or nobody.

The test holds no store open while a vigil command runs (it opens one for each step): an
SQLite store kept open here across another process's use of the file has been seen to make
the next store opened in this process fail with "disk I/O error"."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from contextlib import contextmanager
from typing import Iterator

import pexpect
import pytest

from tests.cli.helpers import expect_in_terminal, run_cli, run_vigil
from vigil.profiles import get_profile
from vigil.schedule.heartbeat.lease import GATEWAY, LeaseBook
from vigil.store import SessionStore, open_store
from vigil.testing.fake_model import FakeModelServer

NOBODY = "nobody — start vigil gateway run"


@contextmanager
def _store() -> Iterator[SessionStore]:
    profile = get_profile(None)
    profile.home.mkdir(parents=True, exist_ok=True)
    store = open_store(profile.state_db)
    try:
        yield store
    finally:
        store.close()


def _gateway_takes(session_id: str) -> bool:
    """Take the lease as a gateway would (this test process plays the gateway)."""
    with _store() as store:
        return LeaseBook(store, kind=GATEWAY).take(session_id)


@pytest.fixture
def session_id(vigil_home: Path) -> str:
    with _store() as store:
        session_id = store.create_session(source="cli", title="watching CI").id
    assert run_cli("heartbeat", "set", "-s", session_id, "15m", "check", "the", "CI").exit_code == 0
    return session_id


def _table(home: Path) -> str:
    """``vigil heartbeat list`` as printed in a terminal of 160 columns."""
    done = run_vigil("heartbeat", "list", home=home, env={"COLUMNS": "160"})
    assert done.returncode == 0, done.stderr
    return done.stdout


def _owner(session_id: str) -> object:
    out = run_cli("heartbeat", "list", "--json").output
    listed = json.loads(out)
    assert isinstance(listed, list), out
    return next(item["owner"] for item in listed if item["session"] == session_id)


def test_a_heartbeat_nobody_runs_says_to_start_the_gateway(session_id: str, vigil_home: Path) -> None:
    assert _owner(session_id) is None
    table = _table(vigil_home)
    row = next(line for line in table.splitlines() if line.startswith(session_id))
    assert row.rstrip().endswith(" nobody") and NOBODY in table
    assert f"owner:     {NOBODY}" in run_cli("heartbeat", "status", "-s", session_id).output
    run_cli("heartbeat", "pause", "-s", session_id)
    assert "owner:     nobody (paused)" in run_cli("heartbeat", "status", "-s", session_id).output


def test_a_heartbeat_the_gateway_holds_shows_the_gateway(session_id: str, vigil_home: Path) -> None:
    assert _gateway_takes(session_id)
    assert _owner(session_id) == {"kind": "gateway", "pid": os.getpid(), "host": socket.gethostname()}
    table = _table(vigil_home)
    row = next(line for line in table.splitlines() if line.startswith(session_id))
    assert row.rstrip().endswith(" gateway") and "nobody" not in table
    assert "owner:     gateway" in run_cli("heartbeat", "status", "-s", session_id).output


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")
def test_an_open_repl_owns_its_conversations_heartbeat_until_it_closes(
    fake_model: FakeModelServer, vigil_home: Path, session_id: str
) -> None:
    assert _gateway_takes(session_id)  # the gateway ran it; opening the REPL takes it over
    env = {
        **os.environ,
        "VIGIL_HOME": str(vigil_home),
        "OPENAI_BASE_URL": fake_model.base_url,
        "OPENAI_API_KEY": fake_model.api_key,
        "TERM": "xterm",
    }
    child = pexpect.spawn(
        sys.executable, ["-m", "vigil.cli.main", "chat", "--resume", session_id],
        env=env, encoding="utf-8", timeout=20, dimensions=(30, 120),
    )
    try:
        expect_in_terminal(child, "you ›")
        assert _owner(session_id) == {"kind": "repl", "pid": child.pid, "host": socket.gethostname()}
        row = next(line for line in _table(vigil_home).splitlines() if line.startswith(session_id))
        assert row.rstrip().endswith(f" REPL pid {child.pid}")
        assert f"owner:     REPL pid {child.pid}" in run_cli("heartbeat", "status", "-s", session_id).output
        assert not _gateway_takes(session_id)  # a gateway keeps off while the REPL is open
        child.sendline("/quit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert _owner(session_id) is None  # released on the way out: the gateway may adopt it
    assert _gateway_takes(session_id)
