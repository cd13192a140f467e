"""The app's slash command carries vigil's slash commands: ``/vigil hb status``,
``/vigil heartbeat every …`` (which then fires into the thread the person talks in)."""

from __future__ import annotations

import pytest

from tests.gateway.adapters.slack.conftest import ALICE, BOB, SlackHarness, eventually


async def test_vigil_hb_status_is_answered_to_the_person_only(slack: SlackHarness) -> None:
    sent = await slack.sender.command("hb status", user=ALICE, channel="C0OPS")
    assert sent.response.status_code == 200 and sent.response.content == b""  # acknowledged at once
    notes = await eventually(lambda: slack.fake.state.ephemerals, what="the command's answer")
    assert notes[0].user == ALICE and notes[0].channel == "C0OPS"
    assert "heartbeat" in notes[0].text.lower()
    assert slack.fake.state.calls_of("chat.postMessage") == []  # nobody else sees it
    assert slack.model.requests == []  # a command, not a turn
    assert slack.stored("command:" + sent.event_id).text == "/hb status"


async def test_another_command_name_is_refused_with_a_note(slack: SlackHarness) -> None:
    sent = await slack.sender.command("hb status", user=ALICE, channel="C0OPS", command="/other")
    assert sent.response.status_code == 200
    assert "/vigil" in sent.response.json()["text"]
    assert slack.stored("command:" + sent.event_id) is None


async def test_a_configured_command_name_is_the_one_answered(make_slack) -> None:
    h = await make_slack(command="/agent")
    sent = await h.sender.command("", user=BOB, channel="D0BOB", command="/agent")
    assert h.stored("command:" + sent.event_id).text == "/help"
    assert await eventually(lambda: h.answers("D0BOB", ""), what="the help")  # a DM: a plain message


async def test_a_heartbeat_set_with_the_slash_command_fires_into_that_thread(
    slack: SlackHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VIGIL_TEST_HEARTBEAT_MIN_SECONDS", "1")
    slack.model.queue("watching the deploy from here")
    mention = await slack.sender.mention("C0OPS", ALICE, "keep an eye on the deploy")
    await eventually(lambda: slack.answers("C0OPS", mention.ts), what="the first answer")
    slack.model.set_default_reply("deploy still green")
    sent = await slack.sender.command("heartbeat every 1s check the deploy", user=ALICE, channel="C0OPS")
    assert sent.response.status_code == 200
    assert slack.stored("command:" + sent.event_id).route.thread == mention.ts  # the thread Alice talks in
    set_note = await eventually(lambda: slack.fake.state.ephemerals, what="the heartbeat set")
    assert set_note[0].user == ALICE and set_note[0].thread_ts == mention.ts
    fires = await eventually(lambda: [t for t in slack.answers("C0OPS", mention.ts) if t == "deploy still green"],
                             what="a heartbeat fire in the thread")
    assert fires
    assert slack.answers("C0OPS", "") == []
    heartbeat_turns = [r for r in slack.model.requests if "check the deploy" in r.last_user_text]
    assert heartbeat_turns


async def test_in_a_channel_the_app_is_not_in_the_answer_goes_to_the_response_url(slack: SlackHarness) -> None:
    sent = await slack.sender.command("hb status", user=BOB, channel="C0NOTMEMBER", member=False)
    assert sent.response.status_code == 200
    responses = await eventually(lambda: slack.fake.state.responses, what="the answer via response_url")
    assert responses[0]["response_type"] == "ephemeral" and "heartbeat" in responses[0]["text"].lower()
    assert slack.fake.state.ephemerals == []
