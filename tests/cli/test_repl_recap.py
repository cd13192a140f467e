"""`vigil chat --continue` / `--resume` recap the conversation before the prompt."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pexpect
import pytest

from tests.cli.helpers import run_vigil
from vigil.schedule.heartbeat.text import heartbeat_header
from vigil.store import NewMessage, SQLiteStore
from vigil.testing.fake_model import FakeModelServer

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")


def _env(server: FakeModelServer, home: Path) -> dict[str, str]:
    return {"VIGIL_HOME": str(home), "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": server.api_key}


def _open(server: FakeModelServer, home: Path, *args: str) -> tuple[str, pexpect.spawn]:
    """Start the REPL with ``args``; return what it printed before the first prompt."""
    env = {**os.environ, **_env(server, home), "TERM": "xterm"}
    child = pexpect.spawn(
        sys.executable, ["-m", "vigil.cli.main", "chat", *args], env=env, encoding="utf-8", timeout=20, dimensions=(30, 140)
    )
    child.expect("you ›")
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", child.before), child


def _quit(child: pexpect.spawn) -> None:
    try:
        child.sendline("/quit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)


def test_continue_and_resume_recap_the_last_exchange_and_unseen_heartbeats(
    fake_model: FakeModelServer, vigil_home: Path
) -> None:
    fake_model.rule(contains="what is the plan", reply="Ship the release on Friday.")
    first = run_vigil("chat", "-q", "what is the plan?", home=vigil_home, env=_env(fake_model, vigil_home))
    assert first.returncode == 0, first.stderr
    session_id = first.stderr.strip().split()[-1]
    # the gateway ran two heartbeat turns in the conversation while no REPL had it open
    store = SQLiteStore(vigil_home / "state.db")
    try:
        for answer in ("CI is still running.", "CI is green now."):
            store.append_message(session_id, NewMessage("user", heartbeat_header(600) + "\ncheck the CI run"))
            store.append_message(session_id, NewMessage("assistant", answer))
    finally:
        store.close()

    shown, child = _open(fake_model, vigil_home, "--continue")
    _quit(child)
    assert "Last exchange" in shown
    assert "what is the plan?" in shown and "Ship the release on Friday." in shown
    assert "2 heartbeat turns fired while the conversation was not open" in shown
    assert shown.index("CI is still running.") < shown.index("CI is green now.")

    # those heartbeat turns were shown once the conversation was open: not again next time
    shown, child = _open(fake_model, vigil_home, "--resume", session_id)
    _quit(child)
    assert "what is the plan?" in shown and "Ship the release on Friday." in shown
    assert "heartbeat turn" not in shown and "CI is green now." not in shown


def test_a_new_conversation_has_no_recap(fake_model: FakeModelServer, vigil_home: Path) -> None:
    shown, child = _open(fake_model, vigil_home)
    _quit(child)
    assert "Last exchange" not in shown


def test_the_recap_counts_heartbeat_turns_that_found_nothing_changed(
    fake_model: FakeModelServer, vigil_home: Path
) -> None:
    fake_model.rule(contains="what is the plan", reply="Ship the release on Friday.")
    first = run_vigil("chat", "-q", "what is the plan?", home=vigil_home, env=_env(fake_model, vigil_home))
    session_id = first.stderr.strip().split()[-1]
    store = SQLiteStore(vigil_home / "state.db")
    try:
        for answer in ("HEARTBEAT_OK", "CI is red: 2 tests fail.", "HEARTBEAT_OK"):
            store.append_message(session_id, NewMessage("user", heartbeat_header(600) + "\ncheck the CI run"))
            store.append_message(session_id, NewMessage("assistant", answer))
    finally:
        store.close()
    shown, child = _open(fake_model, vigil_home, "--continue")
    _quit(child)
    flat = " ".join(shown.split())
    assert "♥ 3 heartbeat turns fired while the conversation was not open (2 found nothing changed):" in flat
    assert "CI is red: 2 tests fail." in flat and "HEARTBEAT_OK" not in flat
