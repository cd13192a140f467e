"""Issue 13's end-to-end acceptance: ONE real ``vigil gateway run`` (a subprocess, started once
for the module, SIGKILLed and restarted once) with Slack, Telegram and the web chat on, against
the fake Slack (Web API + signed Events sender), the fake Telegram Bot API and the fake model,
all over real HTTP.

Before the SIGKILL: a Slack DM, a Slack channel thread, a Telegram private chat, a Telegram
forum topic and a web conversation are each answered where they were asked; a Slack
redelivery of an answered event is not answered again; ``/vigil heartbeat every 2s …`` sent as
the Slack slash command fires into the thread. Then a Slack DM, a Telegram private message and
a Telegram topic message are stored while the (slow) model is still answering them (the last
one half streamed), the gateway is SIGKILLed, two cron jobs (``--deliver telegram:<chat>`` and
``--deliver slack:<channel>:<thread>``) due at once are added, and the gateway restarts: with
no new message the heartbeat fires again, the interrupted messages are answered once, both cron
answers land (``vigil cron runs`` shows them delivered), and a second redelivery is still not
answered, and a cut-off turn leaves no placeholder or half answer behind in the chats. The tests run
in order, each on what the one before left."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Iterator

import pytest
import yaml

pytest.importorskip("slack_sdk")  # pip install -e '.[slack,telegram]' to run it
pytest.importorskip("telegram")

from tests.cli.helpers import run_cli
from tests.gateway.process import (
    GatewayProcess, add_overdue_job, history, module_model, new_conversation, send, wait_for,
)
from vigil.gateway.adapters.slack.editing import WORKING
from vigil.testing.fake_model import FakeModelServer
from vigil.testing.scripting import Reply
from vigil.testing.slack_api import EventsSender, FakeSlackServer, Sent
from vigil.testing.telegram_api.server import FakeTelegramServer

pytestmark = pytest.mark.slow

ALICE, BOB = "U0ALICE", "U0BOB"  # Slack users on the allow-list
OWNER, FRIEND, GROUP, TOPIC = 111, 222, -1001234, 3  # Telegram
DM, LATE_DM, CHANNEL = "D0ALICE", "D0BOB", "C0TEAM"
TOKEN_ENV = "VIGIL_E2E_PLATFORMS_TELEGRAM_TOKEN"
REPLIES = {  # what the fake model answers, by a phrase of the user's message
    "ping from the dm": "dm answer", "ping in the thread": "thread answer", "second dm ping": "second dm answer",
    "ping from telegram": "telegram answer", "ping in the topic": "topic answer", "ping from the web": "web answer",
    "check the deploy": "deploy green", "telegram cron report": "Telegram report.", "slack cron report": "Slack report.",
    "after the restart": "still here",
}


class Platforms:
    """The gateway process, the three fakes, and what the tests learn as they go."""

    def __init__(self, gateway: GatewayProcess, slack: FakeSlackServer, telegram: FakeTelegramServer,
                 model: FakeModelServer) -> None:
        self.gateway, self.slack, self.telegram, self.model = gateway, slack, telegram, model
        self.sender = EventsSender(gateway.url + "/slack/events", slack.signing_secret, slack.state)
        self.thread = ""
        self.dm: Sent | None = None
        self.web = ""

    def slack_answers(self, channel: str, thread: str = "") -> list[str]:
        """What the bot said there (``thread`` ``""``: top level), placeholders apart."""
        return [t for t in self.slack.state.texts(channel, thread) if t != WORKING and not t.endswith(" …")]

    def fires(self) -> int:
        return self.slack_answers(CHANNEL, self.thread).count("deploy green")

    def web_answers(self) -> list[str]:
        with self.gateway.client() as client:
            return [m["content"] for m in history(client, self.web)["messages"]
                    if m["role"] == "assistant" and not m["tool_calls"]]

    def asked(self, phrase: str) -> int:
        return sum(phrase in r.last_user_text for r in self.model.requests)

    def stored(self, adapter: str, text: str) -> list[str]:
        """The inbox statuses of the messages from ``adapter`` with this text."""
        with sqlite3.connect(self.gateway.home / "state.db") as db:
            rows = db.execute("SELECT status FROM gateway_inbox WHERE adapter = ? AND text = ?", (adapter, text))
            return [status for (status,) in rows]

    def previews_recorded(self, adapter: str) -> int:
        """Streamed previews the gateway has recorded for its next start."""
        with sqlite3.connect(self.gateway.home / "state.db") as db:
            (count,) = db.execute("SELECT COUNT(*) FROM state_meta WHERE key LIKE ?", (f"{adapter}.preview.%",)).fetchone()
            return int(count)

    def start(self) -> None:
        self.gateway.start_for_module()
        self.sender.url = self.gateway.url + "/slack/events"


def settled(check, what: str, timeout: float = 20.0):  # noqa: ANN001
    """``check()`` once it is truthy (polled every 50 ms), or fail after ``timeout`` seconds."""
    return wait_for(check, timeout=timeout, what=what)


@pytest.fixture(scope="module")
def platforms(fake_model_session: FakeModelServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platforms]:
    home: Path = tmp_path_factory.mktemp("platforms-e2e")
    slack, telegram = FakeSlackServer().start(), FakeTelegramServer().start()
    (home / "config.yaml").write_text(yaml.safe_dump({
        "timezone": "UTC",
        "slack": {"enabled": True, "api_url": slack.api_url, "allow": [ALICE, BOB]},
        "telegram": {"enabled": True, "api_url": telegram.api_url, "token_env": TOKEN_ENV,
                     "allow": [str(OWNER), str(FRIEND)]},
    }))
    with module_model(fake_model_session) as model:
        for slow in ("a slow slack question", "a slow telegram question"):  # slow the first time only
            model.rule(contains=slow, reply=Reply.text("too late", delay=15.0), times=1)
            model.rule(contains=slow, reply=f"answer to {slow}")
        streaming = Reply.text(["Half of an answer"] + [" and more"] * 60, chunk_delay=0.25)  # cut off by the SIGKILL
        model.rule(contains="a streamed question", reply=streaming, times=1)
        model.rule(contains="a streamed question", reply="the whole answer")
        for phrase, reply in REPLIES.items():
            model.rule(contains=phrase, reply=reply)
        model.set_default_reply("ok")
        gateway = GatewayProcess(home, model, env={
            "VIGIL_TEST_HEARTBEAT_MIN_SECONDS": "1", "SLACK_BOT_TOKEN": slack.bot_token,
            "SLACK_SIGNING_SECRET": slack.signing_secret, TOKEN_ENV: telegram.token,
        })
        running = Platforms(gateway, slack, telegram, model)
        try:
            running.start()
            yield running
        finally:
            gateway.stop_if_running()
            slack.stop()
            telegram.stop()


async def test_each_message_is_answered_in_its_own_chat_thread_and_topic(platforms: Platforms) -> None:
    p = platforms
    p.dm = await p.sender.message(DM, ALICE, "ping from the dm")
    mention = await p.sender.mention(CHANNEL, ALICE, "ping in the thread")
    assert p.dm.response.status_code == 200 and mention.response.status_code == 200
    p.thread = mention.ts
    p.telegram.message(OWNER, OWNER, "ping from telegram")
    p.telegram.message(GROUP, OWNER, "ping in the topic", chat_type="supergroup", thread_id=TOPIC)
    with p.gateway.client() as client:
        p.web = new_conversation(client)
        send(client, p.web, "ping from the web")

    settled(lambda: p.slack_answers(DM) == ["dm answer"], "the Slack DM's answer")
    settled(lambda: p.slack_answers(CHANNEL, p.thread) == ["thread answer"], "the answer in the thread")
    settled(lambda: p.telegram.texts(OWNER) == ["telegram answer"], "the Telegram private answer")
    settled(lambda: p.telegram.texts(GROUP, TOPIC) == ["topic answer"], "the answer in the topic")
    settled(lambda: p.web_answers() == ["web answer"], "the web answer")
    assert p.slack_answers(CHANNEL) == []  # nothing at the channel's top level
    assert p.telegram.texts(GROUP, None) == []  # nor outside the topic


async def test_a_slack_redelivery_of_an_answered_event_is_not_answered_again(platforms: Platforms) -> None:
    p = platforms
    assert p.dm is not None, "runs after the first test"
    assert (await p.sender.resend(p.dm, 1)).status_code == 200
    await p.sender.message(DM, ALICE, "second dm ping")  # answered after anything queued before it
    settled(lambda: "second dm answer" in p.slack_answers(DM), "the next answer in the DM")
    assert p.slack_answers(DM) == ["dm answer", "second dm answer"]
    assert p.asked("ping from the dm") == 1


async def test_the_slack_slash_command_heartbeat_fires_into_the_thread(platforms: Platforms) -> None:
    p = platforms
    assert p.thread, "runs after the first test"
    sent = await p.sender.command("heartbeat every 2s check the deploy", user=ALICE, channel=CHANNEL)
    assert sent.response.status_code == 200
    [note] = settled(lambda: p.slack.state.ephemerals, "the command's answer, shown to Alice alone")
    assert (note.channel, note.thread_ts, note.user) == (CHANNEL, p.thread, ALICE)
    assert note.text.startswith("♥ Heartbeat set (every 2s): check the deploy"), note.text
    settled(lambda: p.fires() >= 1, "a heartbeat fire in the thread")
    assert p.slack_answers(CHANNEL) == [] and "deploy green" not in p.slack_answers(DM)


async def test_after_a_sigkill_the_heartbeat_fires_again_pending_messages_are_answered_once_and_cron_delivers(
    platforms: Platforms, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = platforms
    assert p.thread and p.dm is not None and p.fires() >= 1, "runs after the tests before it"
    late = await p.sender.message(LATE_DM, BOB, "a slow slack question")
    assert late.response.status_code == 200  # acknowledged: stored
    p.telegram.message(FRIEND, FRIEND, "a slow telegram question")
    p.telegram.message(GROUP, OWNER, "a streamed question", chat_type="supergroup", thread_id=TOPIC)
    settled(lambda: p.asked("a slow slack question") and p.asked("a slow telegram question"),
            "both slow turns under way")
    settled(lambda: p.stored("slack", "a slow slack question") == p.stored("telegram", "a slow telegram question")
            == ["running"], "both stored, their turns under way")
    settled(lambda: p.slack.state.texts(LATE_DM, "") == [WORKING], "Slack's working indicator")
    settled(lambda: any(t.startswith("Half of an answer") for t in p.telegram.texts(GROUP, TOPIC)),
            "the streamed preview in the topic")
    # The preview's id is recorded once Telegram has answered its sendMessage: a SIGKILL
    # between the two would orphan it (Telegram has no idempotency key to find it by).
    settled(lambda: p.previews_recorded("telegram") >= 1, "the preview recorded")
    p.gateway.kill()
    fires = p.fires()
    assert p.slack_answers(LATE_DM) == [] and p.telegram.texts(FRIEND) == []  # not answered yet

    add_overdue_job(p.gateway.home, "tg-report", "telegram cron report", f"telegram:{OWNER}")
    add_overdue_job(p.gateway.home, "slack-report", "slack cron report", f"slack:{CHANNEL}:{p.thread}")
    p.start()  # and no new message in any conversation until the heartbeat has fired again

    settled(lambda: p.fires() > fires, "a heartbeat fire after the restart")
    settled(lambda: p.slack_answers(LATE_DM) == ["answer to a slow slack question"], "the late Slack answer")
    settled(lambda: p.telegram.texts(FRIEND) == ["answer to a slow telegram question"], "the late Telegram answer")
    settled(lambda: "the whole answer" in p.telegram.texts(GROUP, TOPIC), "the streamed answer after the restart")
    settled(lambda: "Telegram report." in p.telegram.texts(OWNER), "the cron answer in the Telegram chat")
    settled(lambda: "Slack report." in p.slack_answers(CHANNEL, p.thread), "the cron answer in the thread")

    # answered once: a new message in each conversation is answered after anything before it
    await p.sender.message(LATE_DM, BOB, "after the restart")
    p.telegram.message(FRIEND, FRIEND, "after the restart")
    settled(lambda: p.slack_answers(LATE_DM)[-1:] == ["still here"], "the next Slack answer")
    settled(lambda: p.telegram.texts(FRIEND)[-1:] == ["still here"], "the next Telegram answer")
    assert p.slack_answers(LATE_DM) == ["answer to a slow slack question", "still here"]
    assert p.telegram.texts(FRIEND) == ["answer to a slow telegram question", "still here"]
    assert p.stored("slack", "a slow slack question") == p.stored("telegram", "a slow telegram question") == ["answered"]
    assert p.asked("a slow slack question") == p.asked("a slow telegram question") == 2  # cut off, then again

    await p.sender.message(CHANNEL, ALICE, "after the restart", thread_ts=p.thread)
    settled(lambda: "still here" in p.slack_answers(CHANNEL, p.thread), "the thread's answer after the restart")

    # a redelivery after the restart is not answered either
    assert (await p.sender.resend(p.dm, 2)).status_code == 200
    await p.sender.message(DM, ALICE, "after the restart")
    settled(lambda: p.slack_answers(DM)[-1:] == ["still here"], "the DM's answer after the restart")
    assert p.slack_answers(DM) == ["dm answer", "second dm answer", "still here"]
    assert p.asked("ping from the dm") == 1

    # each answer only where it belongs
    assert p.telegram.texts(OWNER) == ["telegram answer", "Telegram report."]
    in_topic = p.telegram.texts(GROUP, TOPIC)
    assert in_topic[0] == "topic answer" and in_topic[-1] == "the whole answer" and in_topic.count("the whole answer") == 1
    assert p.web_answers() == ["web answer"]
    assert p.slack_answers(CHANNEL) == []
    in_thread = p.slack_answers(CHANNEL, p.thread)
    assert in_thread[0] == "thread answer" and in_thread.count("Slack report.") == 1
    assert in_thread.count("still here") == 1
    assert set(in_thread) == {"thread answer", "deploy green", "Slack report.", "still here"}

    with monkeypatch.context() as env:
        env.setenv("VIGIL_HOME", str(p.gateway.home))
        settled(lambda: {r["job"]: r["delivery"]["status"] for r in json.loads(run_cli("cron", "runs", "--json").output)}
                == {"tg-report": "delivered", "slack-report": "delivered"}, "both runs recorded delivered")
        table = run_cli("cron", "runs").output
    assert table.count("ok, delivered") == 2, table

    log = (p.gateway.home / "logs" / "gateway.log").read_text()
    assert re.search(rf"delivered reply \d+ to slack {CHANNEL} thread {re.escape(p.thread)} user {ALICE}\n", log)
    secrets = (p.slack.bot_token, p.slack.signing_secret, p.telegram.token, p.telegram.token.split(":")[1])
    assert not [s for s in secrets if s in log or s in "".join(p.gateway.output)]


def test_no_slack_working_placeholder_is_left_behind_by_a_turn_a_sigkill_cut_off(platforms: Platforms) -> None:
    assert "still here" in platforms.slack_answers(LATE_DM), "runs after the SIGKILL test"
    assert WORKING not in platforms.slack.state.texts(LATE_DM, "")


def test_no_telegram_half_answer_is_left_behind_by_a_turn_a_sigkill_cut_off(platforms: Platforms) -> None:
    assert "the whole answer" in platforms.telegram.texts(GROUP, TOPIC), "runs after the SIGKILL test"
    assert platforms.telegram.texts(GROUP, TOPIC) == ["topic answer", "the whole answer"]
