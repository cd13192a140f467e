"""Keys at the REPL's prompt, pressed in a pseudo-terminal as a person presses them."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pexpect
import pytest

from tests.cli.helpers import run_cli
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")

LEAVE_HINT = "Press Ctrl-C again or Ctrl-D to leave"


def _spawn(server: FakeModelServer, home: Path) -> pexpect.spawn:
    env = {
        **os.environ,
        "VIGIL_HOME": str(home),
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": server.api_key,
        "TERM": "xterm",
    }
    return pexpect.spawn(
        sys.executable, ["-m", "vigil.cli.main", "chat"], env=env, encoding="utf-8", timeout=20, dimensions=(30, 120)
    )


def test_ctrl_c_at_an_empty_prompt_warns_first_and_leaves_on_the_second(
    fake_model: FakeModelServer, vigil_home: Path
) -> None:
    fake_model.queue("Hello there.", Reply.text("this will take a long time", delay=30))
    child = _spawn(fake_model, vigil_home)
    try:
        child.expect("you ›")
        child.sendline("hello")
        child.expect("Hello there.")
        child.expect("you ›")
        # a Ctrl-C during a turn still interrupts the turn, and does not count towards leaving
        child.sendline("slow question")
        fake_model.wait_for_requests(2, timeout=10)
        child.sendintr()
        child.expect("interrupted")
        child.expect("you ›")
        # a Ctrl-C on a half-typed line drops the line; the next one is the first at an empty prompt
        child.send("half a thought")
        child.expect("half a thought")
        child.sendintr()
        child.sendintr()
        child.expect(LEAVE_HINT)
        child.sendintr()
        child.expect(r"vigil chat --resume ([0-9a-f]{12})")
        session_id = child.match.group(1)
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    shown = json.loads(run_cli("sessions", "show", session_id, "--json").output)
    assert [m["content"] for m in shown["messages"] if m["role"] == "user"] == ["hello", "slow question"]


def test_a_single_ctrl_c_at_an_empty_prompt_keeps_the_repl_open(fake_model: FakeModelServer, vigil_home: Path) -> None:
    fake_model.queue("Still here.")
    child = _spawn(fake_model, vigil_home)
    try:
        child.expect("you ›")
        child.sendintr()
        child.expect(LEAVE_HINT)
        child.expect("you ›")
        child.sendline("are you there?")
        child.expect("Still here.")
        child.expect("you ›")
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
