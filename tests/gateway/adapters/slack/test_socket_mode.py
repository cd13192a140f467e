"""Socket Mode: the gateway connects out to the fake's WebSocket with the app-level token and
gets the same events and commands; each envelope is acknowledged once it is stored."""

from __future__ import annotations

import asyncio

import pytest

from tests.gateway.adapters.slack.conftest import ALICE, eventually


@pytest.fixture
async def socket_slack(make_slack, slack_env, monkeypatch: pytest.MonkeyPatch):
    server = slack_env.socket_mode()
    monkeypatch.delenv("SLACK_SIGNING_SECRET")  # not needed without HTTP events
    monkeypatch.setenv("SLACK_APP_TOKEN", slack_env.app_token)
    h = await make_slack(socket_mode=True)
    await asyncio.to_thread(server.wait_connected)
    return h, server


async def test_a_dm_over_socket_mode_is_stored_acknowledged_and_answered(socket_slack) -> None:
    h, server = socket_slack
    assert h.adapter.health().state == "connected"
    h.model.queue("hello over the socket")
    event = h.sender.message_event("D0SOCK", ALICE, "hi through the socket")
    envelope = server.send("events_api", h.sender.callback(event, event_id="Ev0SOCKET1"))
    ack = await asyncio.to_thread(server.wait_ack, envelope)
    assert ack["envelope_id"] == envelope
    assert h.stored("Ev0SOCKET1") is not None  # stored before the ack
    assert await eventually(lambda: h.answers("D0SOCK"), what="the answer") == ["hello over the socket"]


async def test_a_slash_command_over_socket_mode(socket_slack) -> None:
    h, server = socket_slack
    h.fake.state.channel("C0SOCK")
    envelope = server.send("slash_commands", {
        "command": "/vigil", "text": "hb status", "user_id": ALICE, "channel_id": "C0SOCK",
        "trigger_id": "1.socket", "team_id": h.fake.state.team_id,
    })
    await asyncio.to_thread(server.wait_ack, envelope)
    notes = await eventually(lambda: h.fake.state.ephemerals, what="the command's answer")
    assert notes[0].user == ALICE and "heartbeat" in notes[0].text.lower()


async def test_without_the_app_token_socket_mode_is_misconfigured(make_slack, slack_env, monkeypatch) -> None:
    monkeypatch.delenv("SLACK_APP_TOKEN", raising=False)
    h = await make_slack(socket_mode=True)
    health = h.adapter.health()
    assert health.state == "misconfigured" and "SLACK_APP_TOKEN" in health.detail
