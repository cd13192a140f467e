"""End to end: the real ``vigil gateway run`` process with Matrix enabled in config.yaml, the
access token in the environment, the fake homeserver and the fake model over HTTP. One
gateway, SIGKILLed and restarted once, for everything that needs a process: answers in a
direct room and in a room's thread, a redelivered event answered once, a stranger's
invitation declined and their message answered with a pairing code only, a heartbeat set in a
thread firing there, a message stored when the process died answered once after the restart,
a cron job delivering into a room, ``gateway status`` and ``vigil doctor`` on Matrix, and the
token in no log line."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
import yaml

from tests.cli.helpers import run_cli
from tests.gateway.adapters.matrix.conftest import ALICE, STRANGER
from tests.gateway.process import GatewayProcess, add_overdue_job, wait_for
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.matrix_api import FakeMatrixServer
from vigil.testing.scripting import Reply

pytestmark = pytest.mark.slow

TOKEN_ENV = "VIGIL_E2E_MATRIX_TOKEN"
REPLIES = {"hello there": "Hello from vigil.", "ping in the thread": "thread answer", "check the deploy": "deploy green",
           "matrix cron report": "Cron report.", "after the restart": "still here"}


def _status(home: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.setenv("VIGIL_HOME", str(home))
    return {a["name"]: a for a in json.loads(run_cli("gateway", "status", "--json").output)["adapters"]}


def test_the_gateway_process_answers_matrix_and_survives_a_sigkill(
    fake_model: FakeModelServer, homeserver: FakeMatrixServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, state, bot = tmp_path / "home", homeserver.state, homeserver.bot
    home.mkdir()
    (home / "config.yaml").write_text(yaml.safe_dump({"timezone": "UTC", "matrix": {
        "enabled": True, "homeserver": homeserver.url, "user_id": bot, "allow": [ALICE], "token_env": TOKEN_ENV}}))
    for phrase, reply in REPLIES.items():
        fake_model.rule(contains=phrase, reply=reply)
    fake_model.rule(contains="a slow question", reply=Reply.text("too late", delay=15.0), times=1)
    fake_model.rule(contains="a slow question", reply="the answer, once")
    monkeypatch.setenv(TOKEN_ENV, homeserver.token)
    gateway = GatewayProcess(home, fake_model, env={TOKEN_ENV: homeserver.token, "VIGIL_TEST_HEARTBEAT_MIN_SECONDS": "1"})
    try:
        gateway.start()
        wait_for(lambda: _status(home, monkeypatch).get("matrix", {}).get("state") == "connected", what="matrix connected")
        dm = state.create_room(ALICE, invite=[bot], direct=True)
        theirs = state.create_room(STRANGER, invite=[bot], direct=True)
        room = state.create_room(ALICE, invite=[bot], members=[STRANGER], name="team")
        wait_for(lambda: state.rooms[dm].membership(bot) == state.rooms[room].membership(bot) == "join", what="joined")
        wait_for(lambda: state.rooms[theirs].membership(bot) == "leave", what="the stranger's invitation declined")

        hello = state.say(dm, ALICE, "hello there")
        wait_for(lambda: state.texts(dm, bot) == ["Hello from vigil."], what="the answer in the direct room")
        root = state.say(room, ALICE, "vigil: ping in the thread")
        wait_for(lambda: state.texts(room, bot, thread=root) == ["thread answer"], what="the answer in the thread")
        state.say(room, STRANGER, "vigil: let me in")
        wait_for(lambda: any("pairing" in t.lower() for t in state.texts(room, bot)), what="the pairing code")
        state.replay(dm, hello)  # handed out again: stored once, answered once
        wait_for(lambda: homeserver.acknowledged(hello), what="the redelivery synced past")

        state.say(room, ALICE, "!heartbeat every 2s check the deploy", thread=root)
        wait_for(lambda: "deploy green" in state.texts(room, bot, thread=root), what="a heartbeat fire in the thread")

        slow = state.say(dm, ALICE, "a slow question")
        wait_for(lambda: any("a slow question" in r.last_user_text for r in fake_model.requests), what="the slow turn")
        wait_for(lambda: homeserver.acknowledged(slow), what="the slow question stored and synced past")
        gateway.kill()
        fires = state.texts(room, bot, thread=root).count("deploy green")
        assert state.texts(dm, bot) == ["Hello from vigil."]

        monkeypatch.setenv("VIGIL_HOME", str(home))
        add_overdue_job(home, "report", "the matrix cron report", f"matrix:{room}")

        gateway.start()
        wait_for(lambda: "the answer, once" in state.texts(dm, bot), timeout=40, what="the slow answer after the restart")
        wait_for(lambda: "Cron report." in state.texts(room, bot, thread=None), what="the cron answer in the room")
        wait_for(lambda: state.texts(room, bot, thread=root).count("deploy green") > fires, what="the heartbeat again")
        state.say(dm, ALICE, "after the restart")
        wait_for(lambda: state.texts(dm, bot)[-1:] == ["still here"], what="the next answer")
        assert state.texts(dm, bot) == ["Hello from vigil.", "the answer, once", "still here"]
        asked = [r.last_user_text for r in fake_model.requests]
        assert asked.count("hello there") == 1 and not any("let me in" in text for text in asked)

        status = _status(home, monkeypatch)["matrix"]
        assert status["ok"] and bot in status["detail"], status
        report = {(c["name"], c["status"]) for c in json.loads(run_cli("doctor", "--json").output)["checks"]
                  if c["area"] == "platforms"}
        assert {("matrix secrets", "ok"), ("matrix SDK", "ok")} <= report, report
        assert gateway.stop() == 0
    finally:
        if gateway.process is not None and gateway.process.poll() is None:
            gateway.stop(signal.SIGKILL)
    logs = "".join(gateway.output) + "".join(p.read_text(errors="replace") for p in (home / "logs").glob("*"))
    assert homeserver.token not in logs
