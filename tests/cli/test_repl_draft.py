"""A heartbeat never fires on top of a half-typed line in the REPL (pseudo-terminal)."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pexpect
import pytest

from tests.cli.helpers import run_cli
from vigil.schedule.intervals import TEST_MINIMUM_ENV
from vigil.testing.fake_model import FakeModelServer

_CPR_REQUEST = "\x1b[6n"


def _expect(child: pexpect.spawn, pattern: str) -> None:
    """``child.expect(pattern)``, answering prompt_toolkit's cursor position requests as a
    terminal would (it draws the bottom toolbar only once it knows where the cursor is)."""
    while True:
        if child.expect([re.escape(_CPR_REQUEST), pattern]) == 1:
            return
        child.send("\x1b[1;1R")


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
        _expect(child, "you ›")
        child.sendline("hello")
        _expect(child, "ok")
        _expect(child, "you ›")
        child.sendline("/hb every 2s check the CI run")
        _expect(child, r"♥ Heartbeat set \(every 2s\)")
        _expect(child, "you ›")
        child.send("half typed")
        # the heartbeat comes due while the line is there: it waits, and the toolbar says why
        _expect(child, "waiting for your draft")
        child.send("\r")
        _expect(child, "Got your line.")
        _expect(child, "CI is still running.")
        child.sendline("/hb clear")
        _expect(child, r"♥ Heartbeat cleared")
        child.sendline("/quit")
        _expect(child, "vigil chat --resume ([0-9a-f]{12})")
        session_id = child.match.group(1)
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    shown = json.loads(run_cli("sessions", "show", session_id, "--json").output)
    users = [m["content"] for m in shown["messages"] if m["role"] == "user"]
    # the draft was sent whole, and the heartbeat that waited for it came right after it
    at = users.index("half typed")
    assert users[at + 1].startswith("[Heartbeat — recurring instruction, fires every 2s]")
