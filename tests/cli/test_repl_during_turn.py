"""The REPL's prompt stays open while a turn runs, in a pseudo-terminal as a person uses it:
``/steer`` reaches the running turn's next model call, a message typed meanwhile is queued
with its number, ``/queue`` lists what waits and ``/queue drop N`` withdraws it (never
answered), and the message left waiting is answered once the turn ends; ``/background``'s
answer is posted while the conversation goes on answering."""

from __future__ import annotations

import io
import json
import os
import sys
import threading
from pathlib import Path

import pexpect
import pytest

from tests.cli.helpers import expect_in_terminal, run_cli
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply, ToolCallSpec
from vigil.testing.waiting import wait_for

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")

HOLD = "touch started; while [ ! -e go ]; do sleep 0.02; done; echo built"
"""A tool call that says it runs, then stays in flight until the test lets it finish."""


def _spawn(server: FakeModelServer, home: Path, cwd: Path) -> pexpect.spawn:
    env = {
        **os.environ,
        "VIGIL_HOME": str(home),
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": server.api_key,
        "TERM": "xterm",
    }
    return pexpect.spawn(
        sys.executable, ["-m", "vigil.cli.main", "chat"],
        env=env, cwd=str(cwd), encoding="utf-8", timeout=20, dimensions=(30, 120),
    )


def test_steer_and_queue_are_typed_at_the_prompt_while_a_turn_runs(
    fake_model: FakeModelServer, vigil_home: Path, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    fake_model.queue(
        Reply.tool_calls(ToolCallSpec("terminal", {"command": HOLD})), "Built it, sizes in metric.", "About 465 km."
    )
    child = _spawn(fake_model, vigil_home, work)
    child.logfile_read = transcript = io.StringIO()
    try:
        expect_in_terminal(child, "you ›")
        child.sendline("build the project")
        wait_for(lambda: (work / "started").exists(), what="the tool call running")
        child.sendline("/steer use metric units")
        expect_in_terminal(child, "for the running turn")
        child.sendline("how far is Lyon?")
        expect_in_terminal(child, "queued as #1")
        child.sendline("and deploy it")
        expect_in_terminal(child, "queued as #2")
        child.sendline("/queue")
        expect_in_terminal(child, r"1\. how far is Lyon\?")
        expect_in_terminal(child, r"2\. and deploy it")
        child.sendline("/queue drop 2")
        expect_in_terminal(child, "Withdrew 1 waiting message: “and deploy it”")
        (work / "go").touch()
        wait_for(lambda: len(fake_model.requests) == 3, what="the queued message asked")
        child.sendline("/quit")  # handled after the answers
        expect_in_terminal(child, r"vigil chat --resume ([0-9a-f]{12})")
        session_id = child.match.group(1)
        shown = transcript.getvalue().split("Withdrew 1 waiting message", 1)[1]
        for line in ("Steered: “use metric units”", "Built it, sizes in metric.", "you (queued):", "About 465 km."):
            assert line in shown
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)

    # the request after the tool call carries the guidance after the tool's result; the
    # answer to it is the turn's answer
    assert len(fake_model.requests) == 3
    after_tool = fake_model.requests[1].body["messages"]
    assert [m["role"] for m in after_tool[-3:]] == ["assistant", "tool", "user"]
    assert "built" in json.dumps(after_tool[-2]) and after_tool[-1]["content"] == "use metric units"
    assert fake_model.requests[2].last_user_text == "how far is Lyon?"
    assert "and deploy it" not in json.dumps([r.body for r in fake_model.requests])
    history = json.loads(run_cli("sessions", "show", session_id, "--json").output)["messages"]
    assert [m["content"] for m in history if m["role"] == "user"] == [
        "build the project", "use metric units", "how far is Lyon?"
    ]
    assert [m["content"] for m in history if m["role"] == "assistant" and m["content"]] == [
        "Built it, sizes in metric.", "About 465 km."
    ]


def test_background_answers_beside_the_conversation_which_stays_usable(
    fake_model: FakeModelServer, vigil_home: Path, tmp_path: Path
) -> None:
    side = threading.Event()
    fake_model.rule(contains="side question", reply=Reply.text("The side answer.", gate=side))
    fake_model.rule(contains="main question", reply="The main answer.")
    fake_model.set_default_reply("Hi.")
    child = _spawn(fake_model, vigil_home, tmp_path)
    child.logfile_read = transcript = io.StringIO()
    try:
        expect_in_terminal(child, "you ›")
        child.sendline("hello")
        expect_in_terminal(child, "Hi.")
        child.sendline("/btw a side question")
        expect_in_terminal(child, "in the background")
        wait_for(lambda: len(fake_model.requests) == 2, what="the side task asking")
        child.sendline("a main question")  # answered while the side answer is held
        wait_for(lambda: len(fake_model.requests) == 3, what="the main question asked")
        expect_in_terminal(child, "The main answer.")
        side.set()
        expect_in_terminal(child, "↳ background: “a side question”")
        expect_in_terminal(child, "The side answer.")
        child.sendline("/quit")
        expect_in_terminal(child, r"vigil chat --resume ([0-9a-f]{12})")
        child.expect(pexpect.EOF)
    finally:
        side.set()
        child.close(force=True)
    shown = transcript.getvalue()
    assert shown.index("The main answer.") < shown.index("↳ background")
    side_request = next(r for r in fake_model.requests if r.last_user_text == "a side question")
    assert "hello" in json.dumps(side_request.body["messages"])  # it starts from the conversation's history
