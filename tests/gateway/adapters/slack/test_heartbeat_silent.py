"""A heartbeat's ``HEARTBEAT_OK`` through the real gateway and the fake Slack: kept in the
history, never posted to the thread (no placeholder either); real news is posted."""

from __future__ import annotations

import pytest

from tests.gateway.adapters.slack.conftest import ALICE, SlackHarness, eventually


async def test_heartbeat_ok_stays_out_of_the_thread(slack: SlackHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VIGIL_TEST_HEARTBEAT_MIN_SECONDS", "1")
    slack.model.queue("watching the deploy from here")
    mention = await slack.sender.mention("C0OPS", ALICE, "keep an eye on the deploy")
    await eventually(lambda: slack.answers("C0OPS", mention.ts), what="the first answer")
    slack.model.queue("HEARTBEAT_OK", "HEARTBEAT_OK", "The deploy failed at step 3.")
    slack.model.set_default_reply("HEARTBEAT_OK")
    await slack.sender.command("heartbeat every 1s check the deploy", user=ALICE, channel="C0OPS")
    await eventually(lambda: "The deploy failed at step 3." in slack.answers("C0OPS", mention.ts),
                     timeout=20, what="the real news in the thread")
    assert slack.answers("C0OPS", mention.ts) == ["watching the deploy from here", "The deploy failed at step 3."]
    assert not any("HEARTBEAT_OK" in t for t in slack.fake.state.texts("C0OPS"))  # no placeholder showed it
    heartbeat_turns = [r for r in slack.model.requests if "check the deploy" in r.last_user_text]
    assert len(heartbeat_turns) >= 3
