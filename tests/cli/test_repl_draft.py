"""A heartbeat never fires on top of a half-typed line in the REPL (pseudo-terminal)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pexpect
import pytest

from tests.cli.helpers import expect_in_terminal, run_cli
from vigil.schedule.intervals import TEST_MINIMUM_ENV
from vigil.testing.fake_model import FakeModelServer


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")
def test_a_due_heartbeat_waits_for_the_draft_and_says_so(fake_model: FakeModelServer, vigil_home: Path) -> None:
    fake_model.rule(contains="[Heartbeat — recurring instruction", reply="CI is still running.")
    fake_model.rule(contains="half typed", reply="Got your line.")
    env = {
        **os.environ,
        "VIGIL_HOME": str(vigil_home),
        "OPENAI_BASE_URL": fake_model.base_url,
        "OPENAI_API_KEY": fake_model.api_key,
        TEST_MINIMUM_ENV: "1",
        "TERM": "xterm",
    }
    child = pexpect.spawn(
        sys.executable, ["-m", "vigil.cli.main", "chat"], env=env, encoding="utf-8", timeout=30, dimensions=(30, 140)
    )
    try:
        expect_in_terminal(child, "you ›")
        child.sendline("hello")
        expect_in_terminal(child, "ok")
        expect_in_terminal(child, "you ›")
        child.sendline("/hb every 2s check the CI run")
        expect_in_terminal(child, r"♥ Heartbeat set \(every 2s\)")
        expect_in_terminal(child, "you ›")
        child.send("half typed")
        # the heartbeat comes due while the line is there: it waits, and the toolbar says why
        expect_in_terminal(child, "waiting for your draft")
        child.send("\r")
        expect_in_terminal(child, "Got your line.")
        expect_in_terminal(child, "CI is still running.")
        child.sendline("/hb clear")
        expect_in_terminal(child, r"♥ Heartbeat cleared")
        child.sendline("/quit")
        expect_in_terminal(child, "vigil chat --resume ([0-9a-f]{12})")
        session_id = child.match.group(1)
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    shown = json.loads(run_cli("sessions", "show", session_id, "--json").output)
    users = [m["content"] for m in shown["messages"] if m["role"] == "user"]
    # the draft was sent whole, and the heartbeat that waited for it came right after it
    at = users.index("half typed")
    assert users[at + 1].startswith("[Heartbeat — recurring instruction, fires every 2s]")
