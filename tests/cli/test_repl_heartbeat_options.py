"""In the REPL (a real pseudo-terminal, the fake model over HTTP): a HEARTBEAT_OK answer is one
quiet line, real news is shown whole, and a heartbeat set --for a few seconds ends by itself and
says so, with the note kept in the conversation."""

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
def test_quiet_answers_fold_and_an_ended_heartbeat_says_so(fake_model: FakeModelServer, vigil_home: Path) -> None:
    fake_model.queue("hi there", "HEARTBEAT_OK", "The CI run failed: 2 tests.")
    fake_model.set_default_reply("HEARTBEAT_OK")
    env = {
        **os.environ,
        "VIGIL_HOME": str(vigil_home),
        "OPENAI_BASE_URL": fake_model.base_url,
        "OPENAI_API_KEY": fake_model.api_key,
        TEST_MINIMUM_ENV: "1",
        "TERM": "xterm",
    }
    child = pexpect.spawn(
        sys.executable, ["-m", "vigil.cli.main", "chat"], env=env, encoding="utf-8", timeout=20, dimensions=(30, 120)
    )
    try:
        expect_in_terminal(child, "you ›")
        child.sendline("hello")
        expect_in_terminal(child, "hi there")
        expect_in_terminal(child, "you ›")
        child.sendline("/hb every 2s --for 7s check the CI run")
        expect_in_terminal(child, r"♥ Heartbeat set \(every 2s\): check the CI run")
        expect_in_terminal(child, r"nothing changed \(HEARTBEAT_OK\)")
        expect_in_terminal(child, "The CI run failed: 2 tests.")
        expect_in_terminal(child, r"♥ Heartbeat ended \(every 2s, fired \d times\)")
        child.sendline("/hb")
        expect_in_terminal(child, "No heartbeat in this conversation")
        fake_model.rule(contains="thanks", reply="you are welcome")
        child.sendline("thanks")
        expect_in_terminal(child, "you are welcome")
        child.sendline("/quit")
        expect_in_terminal(child, "vigil chat --resume ([0-9a-f]{12})")
        session_id = child.match.group(1)
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    shown = json.loads(run_cli("sessions", "show", session_id, "--json").output)
    answers = [m["content"] for m in shown["messages"] if m["role"] == "assistant"]
    assert answers[1:3] == ["HEARTBEAT_OK", "The CI run failed: 2 tests."]  # stored, history complete
    notes = [m["content"] for m in shown["messages"] if m["role"] == "note"]
    assert len(notes) == 1 and notes[0].startswith("♥ Heartbeat ended")
    # the note is not for the model: the next request extends the last one byte for byte
    before, after = (r.body["messages"] for r in fake_model.requests[-2:])
    assert after[: len(before)] == before and "Heartbeat ended" not in str(after)
