"""End to end: the real ``vigil gateway run`` (a subprocess) with Discord enabled in config.yaml,
the token in the environment, the fake Discord and the fake model over HTTP. One gateway, one
story: answers in the DM and in a mention's thread, a redelivery answered once, a stranger
paired with nothing reaching the model, ``/vigil heartbeat …`` firing in the thread, ``vigil
cron add … --deliver discord:<channel>:<thread>`` delivering there; then a SIGKILL with a turn
under way and a message written while the gateway is down: the restarted gateway resumes its
session, answers both once, and the heartbeat fires on. ``vigil gateway status`` shows Discord
connected, ``vigil doctor`` checks it, and the token is in no log."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml

from tests.cli.helpers import run_cli
from tests.gateway.adapters.discord.conftest import ALICE, BOB, STRANGER, TOKEN_ENV
from tests.gateway.process import GatewayProcess, wait_for
from vigil.testing.discord_api import FakeDiscordServer
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply

pytestmark = pytest.mark.slow


def _answers(fake: FakeDiscordServer, channel: str) -> list[str]:
    return [text for text in fake.state.texts(channel) if not text.endswith(" …")]


def _adapter(home: Path) -> dict:
    status = json.loads(run_cli("gateway", "status", "--json").output)
    return {a["name"]: a for a in status["adapters"]}.get("discord", {})


def test_the_gateway_process_on_discord(fake_discord: FakeDiscordServer, fake_model: FakeModelServer,
                                        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fake_discord
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(yaml.safe_dump({"timezone": "UTC", "discord": {
        "enabled": True, "api_url": fake.api_url, "token_env": TOKEN_ENV, "allow": [ALICE, BOB]}}))
    monkeypatch.setenv("VIGIL_HOME", str(home))
    fake_model.rule(contains="ping", reply="pong")
    fake_model.rule(contains="check the deploy", reply="deploy green")
    fake_model.rule(contains="the morning summary", reply="Good morning: **3** meetings.")
    fake_model.rule(contains="a slow question", reply=Reply.text("too late", delay=15.0), times=1)
    fake_model.rule(contains="a slow question", reply="the answer, once")
    fake_model.set_default_reply("ok")
    gateway = GatewayProcess(home, fake_model, env={TOKEN_ENV: fake.token, "VIGIL_TEST_HEARTBEAT_MIN_SECONDS": "1"})
    try:
        gateway.start()
        wait_for(lambda: _adapter(home).get("state") == "connected", timeout=20, what="discord connected")
        checks = {c["name"]: c for c in json.loads(run_cli("doctor", "--json").output)["checks"]}
        assert "discord api" in checks and "for tests" in checks["discord api"]["detail"]

        dm = fake.dm_channel(ALICE)
        asked = fake.dm(ALICE, "ping from the dm")
        thread = fake.say(fake.channel_id, ALICE, "ping in the channel", mention=True)["id"]
        wait_for(lambda: _answers(fake, dm) == ["pong"] and _answers(fake, thread) == ["pong"], what="both answers")
        requests = len(fake_model.requests)
        fake.send("MESSAGE_CREATE", asked)  # the same message again, as a replay would bring it
        fake.dm(STRANGER, "let me in")
        wait_for(lambda: _answers(fake, fake.dm_channel(STRANGER)), what="the pairing code")
        assert "vigil pairing approve" in _answers(fake, fake.dm_channel(STRANGER))[0]
        assert _answers(fake, dm) == ["pong"] and len(fake_model.requests) == requests

        command = fake.command(thread, ALICE, "heartbeat every 1s check the deploy")
        wait_for(lambda: [t for t in fake.ephemeral(command) if t], what="the command's answer")
        wait_for(lambda: "deploy green" in _answers(fake, thread), what="a heartbeat in the thread")

        now = time.time()
        at = datetime.fromtimestamp(now - 30, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S+00:00")
        monkeypatch.setenv("VIGIL_CRON_NOW", str(now - 60))  # due 30 s ago: the gateway runs it at once
        added = run_cli("cron", "add", "morning", "-s", at, "--prompt", "the morning summary",
                        "--deliver", f"discord:{fake.channel_id}:{thread}")
        monkeypatch.delenv("VIGIL_CRON_NOW")
        assert added.exit_code == 0, added.output

        fake.dm(BOB, "a slow question")
        wait_for(lambda: any("a slow question" in r.last_user_text for r in fake_model.requests), what="the slow turn")
        gateway.kill()
        fake.dm(ALICE, "written while you were away")
        fires = _answers(fake, thread).count("deploy green")
        gateway.start()
        wait_for(lambda: _answers(fake, fake.dm_channel(BOB)) == ["the answer, once"], timeout=30,
                 what="the slow question answered after the restart")
        wait_for(lambda: _answers(fake, dm) == ["pong", "ok"], what="the message written while down")
        wait_for(lambda: "Good morning: **3** meetings." in _answers(fake, thread), timeout=30,
                 what="the cron answer in the thread")
        wait_for(lambda: _answers(fake, thread).count("deploy green") > fires, what="the heartbeat after the restart")
        assert fake.hub.resumes >= 1  # the session went on: nothing written meanwhile was lost
        assert _answers(fake, fake.dm_channel(BOB)) == ["the answer, once"]
        assert run_cli("gateway", "status", "--json").exit_code == 0 and _adapter(home)["state"] == "connected"
        assert gateway.stop() == 0
    finally:
        if gateway.process is not None and gateway.process.poll() is None:
            gateway.kill()
    logs = "".join(gateway.output) + "".join(p.read_text(errors="replace") for p in (home / "logs").glob("*"))
    assert fake.token not in logs
