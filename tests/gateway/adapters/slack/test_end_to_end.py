"""End to end: the real ``vigil gateway run`` (a subprocess, started once for the module) with
Slack on, the fake Slack Web API and its signed Events sender, and the fake model: answers
land in the right DM and thread, a redelivery is answered once, ``/vigil heartbeat every …``
fires into the thread and again after a SIGKILL and restart, and a message taken just before
a SIGKILL is answered once after the restart."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from tests.gateway.process import GatewayProcess, module_model
from tests.gateway.adapters.slack.conftest import ALICE, BOB
from vigil.gateway.adapters.slack.editing import WORKING
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.slack_api import FakeSlackServer
from vigil.testing.slack_api.events import EventsSender, Sent
from vigil.testing.scripting import Reply
from vigil.testing.waiting import eventually as until

pytestmark = pytest.mark.slow


class E2E:
    def __init__(self, gateway: GatewayProcess, slack: FakeSlackServer, model: FakeModelServer) -> None:
        self.gateway, self.slack, self.model = gateway, slack, model
        self.sender = EventsSender(gateway.url + "/slack/events", slack.signing_secret, slack.state)
        self.thread = ""
        self.dm: Sent | None = None

    def answers(self, channel: str, thread: str | None = None) -> list[str]:
        return [t for t in self.slack.state.texts(channel, thread) if t != WORKING and not t.endswith(" …")]

    def restart(self) -> None:
        self.gateway.kill()
        self.gateway.start_for_module()
        self.sender.url = self.gateway.url + "/slack/events"

    def stored(self, external_id: str) -> bool:
        with sqlite3.connect(self.gateway.home / "state.db") as db:
            return db.execute("SELECT 1 FROM gateway_inbox WHERE external_id = ?", (external_id,)).fetchone() is not None


@pytest.fixture(scope="module")
def e2e(fake_slack_session: FakeSlackServer, fake_model_session: FakeModelServer,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[E2E]:
    home: Path = tmp_path_factory.mktemp("slack-e2e")
    (home / "config.yaml").write_text(yaml.safe_dump({"slack": {
        "enabled": True, "api_url": fake_slack_session.api_url, "allow": [ALICE, BOB],
    }}))
    fake_slack_session.start()
    fake_slack_session.state.reset()
    with module_model(fake_model_session) as model:
        model.rule(contains="check the deploy", reply="deploy green")
        model.rule(contains="slow question", reply=Reply.text("slow answer", delay=1.0))
        model.rule(contains="ping", reply="pong")
        model.set_default_reply("ok")
        gateway = GatewayProcess(home, model, env={
            "VIGIL_TEST_HEARTBEAT_MIN_SECONDS": "1", "SLACK_BOT_TOKEN": fake_slack_session.bot_token,
            "SLACK_SIGNING_SECRET": fake_slack_session.signing_secret,
        })
        gateway.start_for_module()
        try:
            yield E2E(gateway, fake_slack_session, model)
        finally:
            gateway.stop_if_running()
            fake_slack_session.state.reset()


async def test_dms_and_channel_threads_are_answered_where_they_were_asked(e2e: E2E) -> None:
    dm = await e2e.sender.message("D0E2E", ALICE, "ping from the dm")
    assert dm.response.status_code == 200
    mention = await e2e.sender.mention("C0E2E", ALICE, "ping in the channel")
    e2e.thread = mention.ts
    assert await until(lambda: e2e.answers("D0E2E", "")) == ["pong"]
    assert await until(lambda: e2e.answers("C0E2E", mention.ts)) == ["pong"]
    assert e2e.answers("C0E2E", "") == []
    e2e.dm = dm


async def test_a_redelivery_of_an_answered_event_is_not_answered_again(e2e: E2E) -> None:
    dm = e2e.dm
    assert dm is not None, "runs after the first test"
    asked = len(e2e.model.requests)
    assert (await e2e.sender.resend(dm, 1)).status_code == 200
    assert (await e2e.sender.resend(dm, 2)).status_code == 200
    await until(e2e.gateway.settled, what="nothing left to send")
    assert e2e.answers("D0E2E", "") == ["pong"]
    assert len(e2e.model.requests) == asked


async def test_the_slash_command_heartbeat_fires_into_the_thread_and_again_after_sigkill(e2e: E2E) -> None:
    assert e2e.thread, "runs after the first test"
    sent = await e2e.sender.command("heartbeat every 1s check the deploy", user=ALICE, channel="C0E2E")
    assert sent.response.status_code == 200
    await until(lambda: e2e.slack.state.ephemerals, what="the command's answer")
    fires = await until(lambda: e2e.answers("C0E2E", e2e.thread).count("deploy green"), what="a fire in the thread")
    e2e.restart()
    await until(lambda: e2e.answers("C0E2E", e2e.thread).count("deploy green") > fires + 1,
                what="fires after the restart, with no new message")
    cleared = await e2e.sender.message("C0E2E", ALICE, "/hb clear", thread_ts=e2e.thread)
    assert cleared.response.status_code == 200
    assert e2e.answers("C0E2E", "") == []


async def test_a_message_taken_just_before_sigkill_is_answered_once_after_restart(e2e: E2E) -> None:
    sent = await e2e.sender.message("D0LATE", BOB, "a slow question")
    assert sent.response.status_code == 200 and e2e.stored(sent.event_id)
    e2e.restart()
    assert await until(lambda: e2e.answers("D0LATE", ""), what="the answer after restart") == ["slow answer"]
    await until(e2e.gateway.settled, what="nothing left to send")
    assert e2e.answers("D0LATE", "") == ["slow answer"]
